#!/usr/bin/env bash
# On a GPU host: what the CUDA driver (and torch's CUDA runtime) reads of /proc and /sys inside the child's sandbox,
# and whether the narrowed sandbox still works. One call of the device machine:
#   bash benchmarks/experiments/sandbox_gpu_probe.sh     (carry .carry-site and .sandbox-tools; writes to $OUT;
#   from a checkout that holds this script and the narrowed sandbox)
# 1. the evaluator's sandbox tests and GPU tests (in the background, from the start: the KernelBench builds take
#    most of the time); 2. sandbox_gpu_probe.py, every variant; 3. the "wide" (as before), "built" and "torch"
#    variants under strace -f (.sandbox-tools/bin/strace): the /proc, /sys and /dev paths each process opened, and
#    the table of paths the child read under "wide" that failed under the narrowed variants.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
if ! python3 -c "import pydantic" 2>/dev/null && [ -f .carry-site/site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .carry-site/site.tar.xz
  export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export CUDAPERF_TEST_COMPILE_CACHE=/tmp/cudaperf-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader > "$OUT/gpu.txt" 2>&1
( timeout "${TESTS_S:-250}" python3 -m pytest -q -x -p no:cacheprovider -rfE tests/evaluation/test_sandbox.py \
    tests/evaluation/test_sandbox_host_view.py > "$OUT/tests_sandbox.log" 2>&1
  timeout "${GPU_TESTS_S:-240}" python3 -m pytest -m gpu -q -x -p no:cacheprovider -rfE --durations=5 \
    tests/evaluation/test_evaluator_gpu.py > "$OUT/tests_gpu.log" 2>&1 ) &
tests=$!
timeout "${PROBE_S:-60}" python3 benchmarks/experiments/sandbox_gpu_probe.py > "$OUT/probe.txt" 2>&1
orig=(-E LD_LIBRARY_PATH); [ -n "${LD_LIBRARY_PATH+x}" ] && orig=(-E "LD_LIBRARY_PATH=$LD_LIBRARY_PATH")
for v in wide built torch wide_torch; do
  LD_LIBRARY_PATH=$PWD/.sandbox-tools/lib timeout "${TRACE_S:-45}" .sandbox-tools/bin/strace -f -qq -e trace=%file "${orig[@]}" \
    -o "/tmp/trace-$v.txt" python3 benchmarks/experiments/sandbox_gpu_probe.py --only "$v" > "$OUT/probe-strace-$v.txt" 2>&1
  grep -E '"/(proc|sys|dev)' "/tmp/trace-$v.txt" > "$OUT/trace-$v.txt"
done
python3 - "$OUT" > "$OUT/needs.txt" <<'EOF'
import re, sys, collections
out = sys.argv[1]
def paths(v):  # path -> set of outcomes, from the sandboxed child's lines (the trusted side reads /proc/<pid>/...)
    seen = collections.defaultdict(set)
    for line in open(f"{out}/trace-{v}.txt", errors="replace"):
        m = re.search(r'"(/(?:proc|sys)[^"]*)".*= (-?\d+|-1 (\w+))', line)
        if m and not re.match(r"/proc/\d{3,}/", m.group(1)):
            seen[re.sub(r"/\d+(?=/|$)", "/N", m.group(1))].add(m.group(3) or "ok")
    return seen
wide = paths("wide")
for v in ("built", "torch"):
    got = paths(v)
    print(f"--- {v}: paths read under 'wide' that failed here")
    for p in sorted(wide):
        if "ok" in wide[p] and "ok" not in got.get(p, set()):
            print(f"{p:70} wide={sorted(wide[p])} {v}={sorted(got.get(p, {'not tried'}))}")
print("--- wide: every /proc and /sys path the child touched"); [print(p, sorted(s)) for p, s in sorted(wide.items())]
EOF
wait $tests
echo "=== card"; cat "$OUT/gpu.txt"; echo "=== probe"; cat "$OUT/probe.txt" | cut -c1-300
echo "=== tests"; tail -n 4 "$OUT/tests_sandbox.log"; tail -n 12 "$OUT/tests_gpu.log"
echo "=== needs"; sed -n '/--- wide: every/q;p' "$OUT/needs.txt" | cut -c1-200
