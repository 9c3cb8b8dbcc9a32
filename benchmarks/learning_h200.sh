#!/usr/bin/env bash
# The learning experiment on one H200, as resumable stages (benchmarks/learning.py says what each does):
#   STAGES="sft ranker" bash benchmarks/learning_h200.sh
#   STAGES="rl:exec rl:full rl:full_one_turn" bash benchmarks/learning_h200.sh      (call again to continue)
#   STAGES="bench:sft bench:exec bench:full bench:full_one_turn" bash benchmarks/learning_h200.sh   (again)
#   python3 benchmarks/learning.py report      (CPU work: anywhere, no time limit)
# Each stage runs under `timeout` so that one device call (at most 10 minutes) ends cleanly: a stopped RL arm
# resumes from its newest checkpoint (train.checkpoint_every_steps), a stopped bench from its next shard, a
# finished stage is skipped. RUNS (default runs/learning) holds everything; copy it back between calls (or keep
# the machine warm). STAGE_S bounds a stage. Exit status: that of the first stage that failed (0: all ran).
set -uo pipefail
RUNS=${RUNS:-runs/learning}
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
status=0
for stage in ${STAGES:-plan}; do
  t0=$(date +%s)
  timeout ${STAGE_S:-560} python3 benchmarks/learning.py ${stage%%:*} $( [[ $stage == *:* ]] && echo ${stage#*:} ) \
    --runs "$RUNS" ${LEARNING_ARGS:-}
  rc=$?
  echo "learning stage $stage rc=$rc $(( $(date +%s) - t0 ))s"
  [ $status -eq 0 ] && status=$rc
done
exit $status
