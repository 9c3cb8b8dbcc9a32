#!/usr/bin/env bash
# Fill .sandbox-tools/ (ignored by git) with bubblewrap, strace and the libraries they and the
# child's seccomp filter need, taken from Debian packages, for hosts where they are not
# installed (the GPU host): bin/bwrap, bin/strace, lib/libseccomp.so.2, lib/libcap.so.2, ...
# Every file is a plain copy (symlinks resolved), since copying the tree to another host may
# drop symlinks. pipeline/evaluation/child/sandbox.py finds bwrap there when it is not on PATH (with
# lib/ on bwrap's LD_LIBRARY_PATH only), and seccomp.py finds lib/libseccomp.so.2.
# Usage: bash benchmarks/tools/sandbox_tools.sh [OUT_DIR]   (apt-get download and dpkg -x; no root needed)
# Check on the target host: .sandbox-tools/bin/bwrap --version (with LD_LIBRARY_PATH=.sandbox-tools/lib).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-.sandbox-tools}
work=$(mktemp -d)
chmod 1777 "$work"  # apt-get download writes as the _apt user
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q bubblewrap libseccomp2 libcap2 libselinux1 libpcre2-8-0 strace libunwind8 >/dev/null)
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
mkdir -p "$OUT/bin" "$OUT/lib"
for tool in bwrap strace; do
  install -m 755 "$(readlink -f "$work/root/usr/bin/$tool")" "$OUT/bin/$tool"
done
for lib in libseccomp.so.2 libcap.so.2 libpsx.so.2 libselinux.so.1 libpcre2-8.so.0 libunwind.so.8 \
           libunwind-ptrace.so.0 libunwind-x86_64.so.8 libunwind-aarch64.so.8; do
  src=$(find "$work/root" -name "$lib" | head -n 1)
  if [ -n "$src" ]; then install -m 644 "$(readlink -f "$src")" "$OUT/lib/$lib"; fi
done
LD_LIBRARY_PATH="$OUT/lib" "$OUT/bin/bwrap" --version
echo "sandbox tools in $OUT: $(ls "$OUT/bin" "$OUT/lib" | grep -v : | tr '\n' ' ')"
