#!/usr/bin/env bash
# Pack the wheels of .whl/ (from ../shared/device/wheels.sh) as one xz archive of their installed files,
# .carry-site/site.tar.xz (about 36 MB against 50 MB of wheels), so that they travel to the GPU host beside
# the project and the other carried folders within the transfer limit. `bash benchmarks/gpu_checks.sh`
# unpacks it into /tmp/site there when Ray is not importable. Run from the project root:
#   bash benchmarks/tools/carry_site.sh
set -euo pipefail
ls .whl/*.whl >/dev/null 2>&1 || { echo "no wheels in .whl/: run bash ../shared/device/wheels.sh first" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for w in .whl/*.whl; do unzip -q -o "$w" -d "$tmp"; done   # unzip keeps the executables' mode bits
mkdir -p .carry-site
grep -qx '/.carry-site/' .git/info/exclude 2>/dev/null || echo '/.carry-site/' >> .git/info/exclude
tar -C "$tmp" -cf - . | xz -T0 -6 > .carry-site/site.tar.xz
du -h .carry-site/site.tar.xz
