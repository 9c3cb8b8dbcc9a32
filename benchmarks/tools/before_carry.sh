#!/usr/bin/env bash
# The checkout at REV (default: evaluator version 14, the last before the wall and the throughput work) as .before.tar.gz, for gpu_checks.sh
# throughput to measure before and after on the same GPU in one call:  bash benchmarks/tools/before_carry.sh [REV]
set -euo pipefail
cd "$(dirname "$0")/../.."
# the evaluator's code only (no benchmarks, tests, docs, the tiny policy or measured data): small enough to carry
git archive --format=tar.gz -o .before.tar.gz "${1:-9d4c712}" pipeline actors configs setup.py ':!pipeline/assets/tiny_sft' ':!pipeline/assets/measured'
ls -l .before.tar.gz
