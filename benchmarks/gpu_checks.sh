#!/usr/bin/env bash
# Every GPU check of the project in one script, for the H200 test machine:
#   bash benchmarks/gpu_checks.sh [verify] [tests] [trust] [protocols] [kernelbench] [kernelbench_memory]
#                                 [kernelbench_baseline] [kernelbench_bench] [pareval] [bench]
#                                 [structure] [generation] [train] [sft] [train_sft] [sft_bench] [measure] [multi_gpu]
#                                 [fidelity] [hardening] [throughput] [timed_honest] [timed_attacks] [bounded]
#                                 [bounded_smoke] [agreement] [group]
# agreement: honest KernelBench answers timed by KernelBench's own method and by `cudaperf eval` on this GPU
#   (benchmarks/kernelbench_agreement.py; needs .kernelbench/ from benchmarks/tools/kernelbench_carry.sh): levels
#   KB_LEVELS (default 1,2), size sets AGREE_SIZES (original, today or both; default original), AGREE_PROBLEMS (problem
#   ids of those levels, comma-separated; default all), no answer started
#   after AGREE_BUDGET_S seconds (default 480), AGREE_MEMORY=1 samples the device's used memory too; builds kept in
#   .kb-cache/ for the next call on the same machine. KernelBench's side in three trial shapes (its current harness,
#   its first, the evaluator's); prints the agreement per shape and why each row outside lies outside.
# bounded_smoke: the short form of bounded for a call with little time: the sandbox's escape probe from the child's side
#   and honest c2cuda and light implementations (SMOKE_TASKS) through the whole evaluator (hardening_gpu.py --honest-only).
# bounded: the trusted side's limits on a GPU host: the sandbox tests from the child's side (the narrowed /proc and
#   /sys under the real driver) and the bounded stages' tests, then the evaluator's GPU tests (tests/evaluation),
#   with benchmarks/trusted_stage_limits.py (every trusted stage's worst case against its cap) beside them on the
#   host's CPUs; one call.
# timed_honest: every built-in c2cuda and light implementation through trusted_timing.py (honest part only), under the
#   evaluator before (.before.tar.gz: `bash benchmarks/tools/before_carry.sh 1b582e9`, version 17) and after, back to
#   back on the same GPU in one call: verdicts and the speedup ratio after/before per implementation.
# timed_attacks: benchmarks/timed_attacks.py (kernels that tell timed calls from checked ones, and their honest
#   twins) under the evaluator after and, where .before.tar.gz is carried, before (TIMED_BEFORE_ATTACKS=0: not); then
#   the evaluator's GPU tests (GPU_TIMED_TESTS, default tests/evaluation/test_evaluator_gpu.py; none: not).
# fidelity: what evaluator version 14 (adversarial check set, redrawn state, float64 anchor) does to honest code:
#   every built-in implementation through trusted_timing.py (two stability runs), then the KernelBench answers
#   of levels KB_LEVELS (default 1) within FIDELITY_KB_S seconds (default 270); one call.
# throughput: the fused check's kernels against compare on the GPU, then the 64-sample group of c2cuda/saxpy with its
#   stage breakdown (benchmarks/evaluator_throughput.py --group-only), after and, where .before.tar.gz is carried
#   (git archive of the revision before, made by benchmarks/tools/before_carry.sh), before, on the same GPU in one call.
# group: the 64-sample group (copies of the task's implementations, then 64 distinct answers with their source
#   mutants compiled through the pool), each without and with eval.group_rounds (GROUP_ROUNDS=off|on|both, default
#   both: verdicts and speedups side by side), each run with its stage breakdown and the GPU lock's trace (who held
#   it, how, how long, why; the raw trace kept as <run>.lock.jsonl), then the conventional path and each run's rate
#   against it (GROUP_CONVENTIONAL=0: not); one call (GROUP_S, 560). GROUP_KIND=copies|realistic|both (default both),
#   GROUP_BASELINE: eval.timing_baseline of these runs, GROUP_SIZE: candidates a group (64), GROUP_MORE_WORKERS (e.g. 8): the copies group again with that many evaluators. Where .before.tar.gz is carried (before_carry.sh REV), the
#   evaluator before runs the copies group first (GROUP_BEFORE_S, 200; GROUP_BEFORE=0: not), same GPU, same call.
# builds: KernelBench answers' build time per object with and without torch's precompiled header
#   (benchmarks/kernelbench_build.py, KB_BUILD_N answers), and the compile pool's CPU per candidate on this host's
#   CPUs before and after (benchmarks/evaluator_cpu_path.py against .before.tar.gz)
# hardening: docs/trust.md's GPU-only steps (benchmarks/hardening_gpu.py): honest code under the full child sandbox,
#   the output-copy credit against an answer that aliases the harness's buffer, the strict profile's rule on
#   extensions built with CUDA; prints a table.
# sft: a short warm start, SFT_S seconds of training; train_sft: two RL steps starting from it, on the
#   train split it was fitted to; sft_bench: SFT then `cudaperf bench` of it on LIMIT held-out tasks
#   (benchmarks/tools/sft_h200.sh: what carries over to unseen families); measure: the dataset within MEASURE_S
#   seconds (benchmarks/tools/measure_h200.sh, continuing from pipeline/assets/measured/); multi_gpu: evaluator
#   scaling, NCCL bandwidth and weight sync, two RL steps of configs/h200x8.yaml; needs 2+ GPUs, says so
#   in one line otherwise; MULTI_GPU_PARTS=evaluators,sync,train picks parts.
# kernelbench: KernelBench at today's sizes (needs .kernelbench/ from benchmarks/tools/kernelbench_carry.sh and Ray in
#   .carry-site/): kernelbench_memory, peak memory of KernelBench's harness and ours on the 10 largest level-1/2
#   problems with our answers (answers compiled in parallel first; at most KB_MEMORY_S seconds, default 540), then
#   kernelbench_baseline, the eager baseline of level-1 problems against the published H100 one (about 280 s).
# kernelbench_bench: `cudaperf bench --answers` over benchmarks/fixtures/kernelbench_answers under the kernelbench gate
#   profile, levels KB_LEVELS (default 1; the 40 answers of levels 1-3 take about 15 minutes: one call per
#   level), at most KB_BENCH_S seconds (default 540); judged rows are kept in rows.partial.jsonl as they come.
# pareval: every kernel of ParEval's problems (pipeline/assets/pareval_tasks/) in ParEval's form, launched as its driver
#   launches them, correct under the evaluator; a kernel that writes nothing incorrect (tests/test_pareval.py).
# bench: evaluator throughput (benchmarks/evaluator_throughput.py: 1 and 4 evaluators, the 64-sample group, the
#   stage breakdown, eval.timing_ci side by side, the conventional path), at most BENCH_S seconds (560): a call alone.
# trust: honest speedups before/after and against the conventional single-call time, and stability, under the
#   trusted clock (benchmarks/trusted_timing.py), then the timing hacks with the static checks off and the sandbox tests from the child's side.
# protocols: the same kernels timed by several procedures, in this process and in a candidate's child
#   (benchmarks/experiments/timing_protocols.py): where the batch protocol's per-call times come from; then
#   benchmarks/experiments/ipc_mapping.cu (a child's kernels on buffers mapped over IPC, odd and whole-page sizes) and
#   benchmarks/experiments/reference_batch.py (a PyTorch reference's time per call in a batch and alone).
# The sandbox needs bwrap and libseccomp: where they are not installed, `bash benchmarks/tools/sandbox_tools.sh`
#   here first and carry .sandbox-tools/ (plus .carry-site/ from benchmarks/tools/carry_site.sh).
# Logs and JSON go to $OUT (or ./gpu-out). Prints a summary table at the end.
# Packages the GPU host lacks (Ray, DeepSpeed, tree-sitter, pydantic) come from .carry-site/site.tar.xz
#   (`bash benchmarks/tools/carry_site.sh` here, carry .carry-site/): unpacked into /tmp/site when Ray is not importable.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
if ! python3 -c "import ray" 2>/dev/null && [ -f .carry-site/site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .carry-site/site.tar.xz && export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export CUDAPERF_TEST_COMPILE_CACHE=/tmp/cudaperf-cache PYTHONUNBUFFERED=1
unpack_before() {  # the evaluator before (.before.tar.gz, benchmarks/tools/before_carry.sh) in /tmp/before, with the sandbox tools
  rm -rf /tmp/before && mkdir -p /tmp/before && tar -xzf .before.tar.gz -C /tmp/before && cp -r .sandbox-tools /tmp/before/ 2>/dev/null
}
steps=${*:-verify tests bench structure generation}
declare -A status
for step in $steps; do
  t0=$(date +%s)
  case $step in
    verify) timeout 280 python3 -m pipeline.cli verify --config configs/h200.yaml --out "$OUT/verify_h200.json" \
              compile.cache_dir=$CUDAPERF_TEST_COMPILE_CACHE eval.result_cache_dir= > "$OUT/verify.log" 2>&1 ;;
    tests) CUDAPERF_TEST_FAILURES="$OUT/test_failures.log" timeout 540 python3 -m pytest -m gpu -q -p no:cacheprovider ${GPU_TESTS:-tests} > "$OUT/tests.log" 2>&1 ;;
    trust) timeout 300 python3 benchmarks/trusted_timing.py --out "$OUT/trusted_timing_h200.json" > "$OUT/trust.log" 2>&1
           timeout 280 python3 -m pytest -m gpu -q -p no:cacheprovider -s tests/evaluation/test_trusted_timing_gpu.py \
             tests/evaluation/test_sandbox.py >> "$OUT/trust.log" 2>&1 ;;
    kernelbench|kernelbench_memory|kernelbench_baseline)
           rc_kb=0
           if [ $step != kernelbench_baseline ]; then
             timeout ${KB_MEMORY_S:-540} python3 benchmarks/kernelbench_memory.py \
               --kernelbench-dir .kernelbench --levels 1,2 --top 10 --answers benchmarks/fixtures/kernelbench_answers --ours \
               --config configs/h200.yaml --budget-s $(( ${KB_MEMORY_S:-540} - 30 )) --correct-trials 2 --perf-trials 5 \
               --out "$OUT/kernelbench_memory_h200.json" > "$OUT/kernelbench.log" 2>&1 || rc_kb=$?
           fi
           if [ $step != kernelbench_memory ]; then
             timeout 340 python3 benchmarks/kernelbench_baseline.py --kernelbench-dir .kernelbench \
               --level 1 --budget-s 320 --out "$OUT/kernelbench_baseline_h200.json" >> "$OUT/kernelbench.log" 2>&1 || rc_kb=$?
           fi
           (exit $rc_kb) ;;
    kernelbench_bench) timeout ${KB_BENCH_S:-540} python3 -m pipeline.cli bench --answers benchmarks/fixtures/kernelbench_answers \
             --suite kernelbench --kernelbench-dir .kernelbench --levels ${KB_LEVELS:-1} --config configs/h200.yaml \
             --baseline-json .kernelbench/results/timing --baseline-hardware H100_Modal --out "$OUT/kernelbench_bench" \
             eval.gate_profile=kernelbench compile.cache_dir=$PWD/.kb-cache > "$OUT/kernelbench_bench.log" 2>&1 ;;
    fidelity) timeout 250 python3 benchmarks/trusted_timing.py --stability-runs 2 --out "$OUT/trusted_timing_h200.json" \
                > "$OUT/trust.log" 2>&1
              KB_BENCH_S=${FIDELITY_KB_S:-270} OUT="$OUT" bash benchmarks/gpu_checks.sh kernelbench_bench > /dev/null 2>&1 ;;
    throughput) timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/evaluation/test_fused_check.py \
                  > "$OUT/fused_check_gpu.log" 2>&1; tail -3 "$OUT/fused_check_gpu.log"
                timeout ${GROUP_S:-220} python3 benchmarks/evaluator_throughput.py --group-only --out "$OUT/group_after.json" \
                  > "$OUT/group_after.log" 2>&1; tail -3 "$OUT/group_after.log"
                if [ -f .before.tar.gz ]; then  # the evaluator before the throughput work, same GPU, same call
                  unpack_before
                  here=$PWD; out=$(cd "$OUT" && pwd)  # from the old tree: Ray's workers import from the driver's directory first
                  (cd /tmp/before && CUDAPERF_ROOT=/tmp/before PYTHONPATH=/tmp/before:${PYTHONPATH:-} \
                    timeout ${GROUP_S:-220} python3 "$here/benchmarks/evaluator_throughput.py" --group-only \
                    --out "$out/group_before.json" > "$out/group_before.log" 2>&1)
                  tail -3 "$OUT/group_before.log"
                fi ;;
    group) conv=--with-conventional; [ "${GROUP_CONVENTIONAL:-1}" = 0 ] && conv=
           base=; [ -n "${GROUP_BASELINE:-}" ] && base="--timing-baseline $GROUP_BASELINE"
           if [ -f .before.tar.gz ] && [ "${GROUP_BEFORE:-1}" = 1 ]; then  # the evaluator before, same GPU, same call
             unpack_before
             here=$PWD; out=$(cd "$OUT" && pwd); mkdir -p "$out/before"  # run from the old tree: Ray's workers import
             (cd /tmp/before && CUDAPERF_ROOT=/tmp/before PYTHONPATH=/tmp/before:${PYTHONPATH:-} \
               timeout ${GROUP_BEFORE_S:-200} python3 "$here/benchmarks/evaluator_throughput.py" --group-only \
               --group-size ${GROUP_SIZE:-64} --group-kind copies --trace-dir "$out/before" --out "$out/group_before.json" > "$out/group_before.log" 2>&1)
             grep -E '^(ours|stages|lock trace|mode|exclusive|shared)' "$OUT/group_before.log" | cut -c1-400
           fi
           timeout ${GROUP_S:-560} python3 benchmarks/evaluator_throughput.py --group-only --group-size ${GROUP_SIZE:-64} \
             --group-kind ${GROUP_KIND:-both} \
             --group-rounds ${GROUP_ROUNDS:-both} --trace-dir "$(cd "$OUT" && pwd)" $base \
             $conv ${GROUP_MORE_WORKERS:+--more-workers $GROUP_MORE_WORKERS} --out "$OUT/group_kinds.json" > "$OUT/group_kinds.log" 2>&1
           rc_g=$?; grep -E '^(ours|timed rounds|stages|lock trace|mode|exclusive|shared|conventional)' "$OUT/group_kinds.log" | cut -c1-400
           [ -f "$OUT/group_before.json" ] && python3 benchmarks/group_before_after.py "$OUT/group_before.json" \
             "$OUT/group_kinds.json" --out "$OUT/group_after.json"
           (exit $rc_g) ;;
    builds) timeout ${KB_BUILD_S:-280} python3 benchmarks/kernelbench_build.py --limit ${KB_BUILD_N:-8} --workers 8 \
              --out "$OUT/kernelbench_build.json" > "$OUT/kernelbench_build.log" 2>&1; tail -3 "$OUT/kernelbench_build.log"
            if [ -f .before.tar.gz ]; then  # the compile pool's CPU per candidate on this host's CPUs, before and after
              unpack_before
              timeout 150 python3 benchmarks/evaluator_cpu_path.py --before-dir /tmp/before --workers 8 \
                --out "$OUT/evaluator_cpu_path_gpu_host.json" > "$OUT/cpu_path.log" 2>&1; tail -14 "$OUT/cpu_path.log"
            fi ;;
    timed_honest|timed_attacks)
           here=$PWD; out=$(cd "$OUT" && pwd); rc_t=0
           if [ -f .before.tar.gz ]; then
             unpack_before
           fi
           before() { (cd /tmp/before && CUDAPERF_ROOT=/tmp/before PYTHONPATH=/tmp/before:${PYTHONPATH:-} "$@"); }
           if [ $step = timed_honest ]; then
             [ -d /tmp/before ] && before timeout ${TIMED_S:-270} python3 "$here/benchmarks/trusted_timing.py" --stability-runs 0 \
               --skip-single-call --before "" --out "$out/trusted_timing_before.json" > "$out/timed_honest_before.log" 2>&1
             timeout ${TIMED_S:-270} python3 benchmarks/trusted_timing.py --stability-runs 0 --skip-single-call \
               --before "$([ -f "$out/trusted_timing_before.json" ] && echo "$out/trusted_timing_before.json")" \
               --out "$out/trusted_timing_after.json" > "$out/timed_honest.log" 2>&1 || rc_t=$?
           else
             timeout 200 python3 benchmarks/timed_attacks.py --out "$out/timed_attacks_after.json" > "$out/timed_attacks.log" 2>&1 || rc_t=$?
             [ -d /tmp/before ] && [ "${TIMED_BEFORE_ATTACKS:-1}" = 1 ] && before timeout 200 python3 \
               "$here/benchmarks/timed_attacks.py" --out "$out/timed_attacks_before.json" > "$out/timed_attacks_before.log" 2>&1
             [ "${GPU_TIMED_TESTS:-tests/evaluation/test_evaluator_gpu.py}" != none ] && timeout 170 python3 -m pytest -m gpu -q \
               -p no:cacheprovider ${GPU_TIMED_TESTS:-tests/evaluation/test_evaluator_gpu.py} > "$out/timed_tests.log" 2>&1 || rc_t=$?
           fi
           (exit $rc_t) ;;
    hardening) timeout 560 python3 benchmarks/hardening_gpu.py --out "$OUT/hardening_gpu.json" > "$OUT/hardening.log" 2>&1
               tail -32 "$OUT/hardening.log" ;;
    protocols) timeout 300 python3 benchmarks/experiments/timing_protocols.py --out "$OUT/timing_protocols_h200.json" --trials 12 \
                 > "$OUT/protocols.log" 2>&1
               nvcc -O2 -arch=sm_90 -o /tmp/ipc_mapping benchmarks/experiments/ipc_mapping.cu -lcuda \
                 && { timeout 60 /tmp/ipc_mapping; ODD_SIZE=1 timeout 60 /tmp/ipc_mapping; } > "$OUT/ipc_mapping_h200.jsonl" 2>> "$OUT/protocols.log"
               timeout 90 python3 benchmarks/experiments/reference_batch.py --out "$OUT/reference_batch_h200.json" >> "$OUT/protocols.log" 2>&1 ;;
    pareval) timeout ${PAREVAL_S:-540} python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_pareval.py \
               > "$OUT/pareval.log" 2>&1 ;;
    bench) timeout ${BENCH_S:-560} python3 benchmarks/evaluator_throughput.py --out "$OUT/evaluator_h200.json" > "$OUT/bench.log" 2>&1 ;;
    structure) timeout 200 python3 -m pipeline.structure.validate_gpu --out "$OUT/structure_h200.json" > "$OUT/structure.log" 2>&1 ;;
    generation) timeout 300 python3 benchmarks/generation_throughput.py --out "$OUT/generation_h200.json" \
                  > "$OUT/generation.log" 2>&1 ;;
    train) timeout 290 python3 -m pipeline.cli train --config configs/h200.yaml run.output_dir="$OUT/runs" \
             train.wandb_mode=disabled train.progress_bar=false compile.cache_dir=$CUDAPERF_TEST_COMPILE_CACHE \
             > "$OUT/train.log" 2>&1 ;;
    sft) timeout $(( ${SFT_S:-270} + 120 )) python3 -m pipeline.cli sft --config configs/sft_h200.yaml \
           sft.max_train_s=${SFT_S:-270} sft.heldout_source= run.output_dir="$OUT/runs" > "$OUT/sft.log" 2>&1 ;;
    train_sft) timeout ${TRAIN_SFT_S:-290} python3 -m pipeline.cli train --config configs/h200.yaml run.name=h200_sft \
                 model.path="$OUT/runs/sft_h200/sft/hf" tasks.source=generated:train rollout.max_new_tokens=1280 rollout.max_turns=2 \
                 model.max_model_len_tokens=2560 run.output_dir="$OUT/runs" train.wandb_mode=disabled \
                 train.progress_bar=false compile.cache_dir=$CUDAPERF_TEST_COMPILE_CACHE > "$OUT/train_sft.log" 2>&1 ;;
    measure) BUDGET_S=${MEASURE_S:-540} OUT="$OUT" bash benchmarks/tools/measure_h200.sh > "$OUT/measure_summary.log" 2>&1 ;;
    sft_bench) OUT="$OUT" SFT_S=${SFT_S:-270} LIMIT=${LIMIT:-40} bash benchmarks/tools/sft_h200.sh > "$OUT/sft_bench.log" 2>&1 ;;
    bounded) ( timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE tests/evaluation/test_sandbox.py \
                 tests/evaluation/test_sandbox_host_view.py tests/evaluation/test_bounded.py > "$OUT/bounded_sandbox.log" 2>&1
               timeout 200 python3 benchmarks/trusted_stage_limits.py --out "$OUT/trusted_stages_gpu_host.json" \
                 > "$OUT/bounded_stages.log" 2>&1 ) &
             timeout ${BOUNDED_GPU_S:-500} python3 -m pytest -m gpu -q -p no:cacheprovider -rfE --durations=8 \
               ${GPU_TESTS:-tests/evaluation} > "$OUT/bounded_gpu.log" 2>&1; rc_b=$?; wait; (exit $rc_b) ;;
    bounded_smoke) ( timeout 60 python3 -m pytest -q -x -p no:cacheprovider -rfE tests/evaluation/test_sandbox.py \
                       -k cannot_leave > "$OUT/smoke_sandbox.log" 2>&1 ) &
                   timeout ${SMOKE_S:-80} python3 benchmarks/hardening_gpu.py --honest-only \
                     --tasks ${SMOKE_TASKS:-c2cuda/saxpy,c2cuda/dot} --out "$OUT/hardening_smoke.json" > "$OUT/smoke.log" 2>&1
                   rc_s=$?; wait; (exit $rc_s) ;;
    agreement) timeout ${AGREE_S:-570} python3 benchmarks/kernelbench_agreement.py --kernelbench-dir .kernelbench \
                 --original-sizes .kernelbench/original-sizes --levels ${KB_LEVELS:-1,2} --sizes ${AGREE_SIZES:-original} \
                 ${AGREE_PROBLEMS:+--problems $AGREE_PROBLEMS} --budget-s ${AGREE_BUDGET_S:-480} --workers ${AGREE_WORKERS:-12} --out "$OUT/kernelbench_agreement.json" \
                 $([ "${AGREE_MEMORY:-0}" = 1 ] && echo --memory) compile.cache_dir=$PWD/.kb-cache > "$OUT/agreement.log" 2>&1
               rc_a=$?; grep -E '^(agreement|  against|  outside)' "$OUT/agreement.log" | cut -c1-400; (exit $rc_a) ;;
    multi_gpu) timeout 590 python3 benchmarks/multi_gpu.py --out "$OUT/multi_gpu.json" \
                 --parts "${MULTI_GPU_PARTS:-evaluators,sync,train}" > "$OUT/multi_gpu.log" 2>&1 ;;
  esac
  status[$step]="rc=$? $(( $(date +%s) - t0 ))s"
done
echo "==== summary ===="
for step in $steps; do printf '%-10s %s\n' "$step" "${status[$step]}"; done
[ -f "$OUT/verify.log" ] && tail -25 "$OUT/verify.log"
[ -f "$OUT/test_failures.log" ] && grep '^===' "$OUT/test_failures.log"
[ -f "$OUT/tests.log" ] && grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -40
[ -f "$OUT/trust.log" ] && grep -E "ratio after|stability|wrote|speedup=|passed|failed" "$OUT/trust.log" | tail -30
[ -f "$OUT/kernelbench.log" ] && grep -E "^(memory|baseline|ratio|outside|verdicts|compile|report|cudaperf)|GiB|tasks," "$OUT/kernelbench.log" | tail -40
[ -f "$OUT/kernelbench_bench.log" ] && grep -E "^\[[0-9]+/[0-9]+\]|^(compile|verdicts|report|against|speedup)" "$OUT/kernelbench_bench.log" | tail -50
[ -f "$OUT/protocols.log" ] && grep -A30 "^implementation" "$OUT/protocols.log"
[ -f "$OUT/timed_honest.log" ] && grep -E -A4 "^ratio|^candidate" "$OUT/timed_honest.log" | head -8 \
  && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('after:', d['evaluator_version'], d['verdicts'], d.get('ratio_summary'))" "$OUT/trusted_timing_after.json"
[ -f "$OUT/timed_attacks.log" ] && sed -n '/^==== timed attacks/,$p' "$OUT/timed_attacks.log"
[ -f "$OUT/timed_attacks_before.log" ] && sed -n '/^==== timed attacks/,$p' "$OUT/timed_attacks_before.log"
[ -f "$OUT/timed_tests.log" ] && grep -E "passed|failed|FAILED|Error" "$OUT/timed_tests.log" | tail -12
[ -f "$OUT/pareval.log" ] && grep -E "passed|failed|FAILED|Error" "$OUT/pareval.log" | tail -40
[ -f "$OUT/bench.log" ] && tail -14 "$OUT/bench.log"
[ -f "$OUT/structure.log" ] && tail -30 "$OUT/structure.log"
[ -f "$OUT/generation.log" ] && grep -E "tokens/s|wrote|Error" "$OUT/generation.log" | tail -8
[ -f "$OUT/train.log" ] && grep -E "^ *step |Error|error:|files in" "$OUT/train.log" | tail -12
[ -f "$OUT/sft.log" ] && grep -E "^sft|Error|error:" "$OUT/sft.log" | tail -8
[ -f "$OUT/runs/sft_h200/sft/sft_summary.json" ] && head -c 1500 "$OUT/runs/sft_h200/sft/sft_summary.json" && echo
[ -f "$OUT/train_sft.log" ] && grep -E "^ *step |Error|error:|verdicts" "$OUT/train_sft.log" | tail -12
[ -f "$OUT/measure_summary.log" ] && tail -20 "$OUT/measure_summary.log"
[ -f "$OUT/sft_bench.log" ] && tail -8 "$OUT/sft_bench.log"
[ -f "$OUT/bounded_sandbox.log" ] && grep -E "passed|failed|FAILED|Error|assert" "$OUT/bounded_sandbox.log" | tail -12
[ -f "$OUT/bounded_stages.log" ] && tail -14 "$OUT/bounded_stages.log"
[ -f "$OUT/bounded_gpu.log" ] && grep -E "passed|failed|FAILED|Error|^[0-9.]+s " "$OUT/bounded_gpu.log" | tail -24
[ -f "$OUT/smoke_sandbox.log" ] && grep -E "passed|failed|^E " "$OUT/smoke_sandbox.log" | head -12
[ -f "$OUT/smoke.log" ] && tail -9 "$OUT/smoke.log"
[ -f "$OUT/multi_gpu.log" ] && grep -E -A16 "^==== multi_gpu|^multi_gpu:" "$OUT/multi_gpu.log" | head -30
[ -f "$OUT/agreement.log" ] && grep -vE "^(compile |WARNING|  warnings)" "$OUT/agreement.log" | tail -70
exit 0
