#!/usr/bin/env bash
# The learning experiment on one H200, as resumable stages (benchmarks/learning.py says what each does):
#   STAGES="sft bench:sft" bash benchmarks/tools/learning_h200.sh
#   STAGES="rl:exec" bash benchmarks/tools/learning_h200.sh            (call again to continue)
#   STAGES="bench:exec" bash benchmarks/tools/learning_h200.sh         (again)
#   python3 benchmarks/learning.py report      (CPU work: anywhere, no time limit)
# Each stage runs under `timeout` so that one device call (at most 10 minutes) ends cleanly: a stopped RL arm
# resumes from its newest checkpoint (train.checkpoint_every_steps), a stopped bench from its next shard, a
# finished stage is skipped. RUNS (default runs/learning) holds everything. STAGE_S bounds a stage. Exit
# status: that of the first stage that failed (0: all ran). The ranker stage is CPU work (gbt on the committed
# measured dataset): run it here and carry RUNS/ranker (small).
#
# Across calls and sessions. A machine keeps RUNS only while it stays warm (call again at once), a session
# holds one for at most 30 minutes, and a call carries 64 MiB in and brings 64 MiB back. So the experiment
# goes one arm per session, every arm from the same SFT policy, bit for bit:
#   session 1: sft, bench:sft; then the SFT policy goes out in parts over two calls
#              (python3 benchmarks/tools/learning_state.py pack runs/learning sft/sft/hf --out $OUT [--first K]),
#              kept here in .learning-state/sft_sft_hf/ (ignored);
#   session k: the parts come back in over two calls that carry .learning-state/... and nothing else
#              (learning_state.py unpack ... --into runs/learning; a machine that stays warm keeps them), then
#              rl:ARM (two calls) and bench:ARM with the wheels carried.
# Every RL arm notes the fingerprint of the SFT policy it started from; the report says whether they agree.
# With OUT set, each call ends by writing what the report needs (bench reports, training logs, fingerprints;
# no weights) to $OUT/learning_results.tgz: unpack it into RUNS here, and `report` reads every session's.
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
if [ -n "${OUT:-}" ] && [ -d "$RUNS" ]; then
  tar -C "$RUNS" -czf "$OUT/learning_results.tgz" --exclude=checkpoints --exclude=hf --exclude='*.safetensors' \
    --exclude=deepspeed --exclude=wandb . && echo "learning: results of this call in \$OUT/learning_results.tgz"
fi
exit $status
