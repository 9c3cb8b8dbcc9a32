#!/usr/bin/env bash
# The SFT warm start on one H200, then the benchmark of its checkpoint on held-out c2cuda tasks:
#   bash benchmarks/tools/sft_h200.sh   (HELDOUT=generated:test, SFT_S=270, SAMPLES=2, LIMIT=0 = every task by default)
# Writes runs/sft_h200/ and $OUT (default gpu-out); prints the SFT summary and the verdict histogram.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
HELDOUT=${HELDOUT:-generated:test}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 420 python3 -m pipeline.cli sft --config configs/sft_h200.yaml sft.max_train_s=${SFT_S:-270} \
  sft.heldout_source= run.output_dir="$OUT/runs" > "$OUT/sft.log" 2>&1
echo "sft rc=$? $(( $(date +%s) - t0 ))s"
t1=$(date +%s)
timeout 300 python3 -m pipeline.cli bench --model "$OUT/runs/sft_h200/sft/hf" --suite c2cuda --tasks "$HELDOUT" \
  --samples ${SAMPLES:-2} --limit ${LIMIT:-0} --config configs/sft_h200.yaml --out "$OUT/bench_c2cuda" > "$OUT/bench.log" 2>&1
echo "bench rc=$? $(( $(date +%s) - t1 ))s"
grep -E "^sft|Error|error:" "$OUT/sft.log" | tail -8
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
s = json.loads((out / "runs/sft_h200/sft/sft_summary.json").read_text())
print("SFT:", {k: s.get(k) for k in ("parameters", "sequences", "tokens_per_epoch", "steps", "tokens_trained",
                                     "train_s", "first_loss", "last_loss")})
r = json.loads((out / "bench_c2cuda/report.json").read_text())["summary"]
print("bench:", r["tasks"], "tasks,", r["samples"], "samples; verdicts:", r["verdicts"])
print(f"compile {r['compile_rate']:.1%}  execute {r['execute_rate']:.1%}  correct {r['correct_rate']:.1%}  "
      f"fast_1 {r['fast_p']['1']:.1%}  pass@k {r['pass_at_k']}")
PY
tail -5 "$OUT/bench.log"
