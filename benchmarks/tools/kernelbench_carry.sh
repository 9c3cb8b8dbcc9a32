#!/usr/bin/env bash
# Copy a KernelBench release (problems, original sizes, published baseline timings) into .kernelbench/,
# which git ignores, so a GPU host that cannot see it gets it with the working tree:
#   bash benchmarks/tools/kernelbench_carry.sh [SOURCE]     (default ../shared/kernelbench)
# `bash benchmarks/gpu_checks.sh kernelbench` reads it from there.
set -euo pipefail
src=${1:-../shared/kernelbench}
[ -d "$src/KernelBench" ] || { echo "kernelbench_carry: $src/KernelBench does not exist; pass the directory holding KernelBench/ and results/" >&2; exit 2; }
rm -rf .kernelbench && mkdir -p .kernelbench
cp -r "$src/KernelBench" .kernelbench/
[ -d "$src/original-sizes" ] && cp -r "$src/original-sizes" .kernelbench/
[ -d "$src/results" ] && cp -r "$src/results" .kernelbench/
du -sh .kernelbench
