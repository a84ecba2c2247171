#!/usr/bin/env bash
# Fills /work/main/.carry/quantroute (ignored by git) for bench/quant_route/device_run.sh: the
# stripped kiln of BUILD_DIR, its non-system shared libraries, and a tar of this checkout's bench/
# (the device runs /work/main's checkout; the carried bench/ is this branch's).
# Usage: bench/quant_route/prepare_carry.sh [BUILD_DIR] [DEST]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
dest="${2:-/work/main/.carry/quantroute}"
NODE_SUITE=0 bash "$root/bench/contraction/prepare_carry.sh" "$build" "$dest" > /dev/null
tar -cf "$dest/src.tar" -C "$root" bench
du -sh "$dest"
