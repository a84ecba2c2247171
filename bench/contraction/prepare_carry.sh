#!/usr/bin/env bash
# Gathers what the GPU machine needs for bench/contraction/device_run.sh into .carry/kiln/ (ignored
# by git): the kiln binary built here, the non-system shared libraries it links (ldd), and the ONNX
# node suite for the CUDA conformance run (NODE_SUITE=0 leaves it out).
# Usage: bench/contraction/prepare_carry.sh [BUILD_DIR] [DEST (default .carry/kiln)]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
dest="${2:-$root/.carry/kiln}"
rm -rf "$dest" && mkdir -p "$dest/lib"
strip -o "$dest/kiln" "$build/tools/kiln"
# Everything ldd resolves outside glibc/libstdc++ (the GPU machine has those, newer).
ldd "$build/tools/kiln" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
[ "${NODE_SUITE:-1}" = 0 ] || cp -r /usr/share/libonnx-testdata/data/node "$dest/node"
du -sh "$dest"
