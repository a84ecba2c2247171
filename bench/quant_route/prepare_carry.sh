#!/usr/bin/env bash
# Fills /work/main/.carry/quantroute (ignored by git) for bench/quant_route/device_run.sh: the
# stripped kiln of BUILD_DIR, its non-system shared libraries, and a tar of this checkout's bench/
# (the device runs /work/main's checkout; the carried bench/ is this branch's).
# Usage: bench/quant_route/prepare_carry.sh [BUILD_DIR] [DEST]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
dest="${2:-/work/main/.carry/quantroute}"
rm -rf "$dest" && mkdir -p "$dest/lib"
strip -o "$dest/kiln" "$build/tools/kiln"
ldd "$build/tools/kiln" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
tar -cf "$dest/src.tar" -C "$root" bench
du -sh "$dest"
