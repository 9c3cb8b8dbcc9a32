#!/usr/bin/env bash
# Measure the generated dataset on one H200 within a time budget, shard after shard:
#   BUDGET_S=540 SHARDS=1-7 bash benchmarks/tools/measure_h200.sh
# Continues from the Parquet files already in pipeline/assets/measured/ (copied to $OUT/measured first,
# so a shard's earlier rows are kept), writes $OUT/measured/shard-K-of-008.parquet, the log and
# `cudaperf data stats` of everything measured so far. Copy $OUT/measured/*.parquet back into
# pipeline/assets/measured/ to keep them; rerunning continues where the budget stopped.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/measured"
BUDGET_S=${BUDGET_S:-540}; SHARDS=${SHARDS:-0-7}; MARGIN_S=${MARGIN_S:-75}
export PYTHONUNBUFFERED=1
cp -n pipeline/assets/measured/*.parquet "$OUT/measured/" 2>/dev/null
t0=$(date +%s)
python3 -m pipeline.cli data measure --shard "$SHARDS/8" --minutes "$(python3 -c "print(($BUDGET_S - $MARGIN_S) / 60)")" \
  --out "$OUT/measured" compile.cache_dir=/tmp/cudaperf-cache data.gpu_workers="${GPU_WORKERS:-4}" ${MEASURE_ARGS:-} \
  > "$OUT/measure.log" 2>&1
echo "measure rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "tasks/min\)|^implementations|^wrote|budget|Error|error:" "$OUT/measure.log" | tail -30
timeout 100 python3 -m pipeline.cli data stats --measured "$OUT/measured" > "$OUT/stats.log" 2>&1
tail -25 "$OUT/stats.log"
