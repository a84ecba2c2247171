#!/usr/bin/env bash
# Fills DEST (default /work/main/.carry/attn, ignored by git) for bench/attention/lowering_run.sh:
# the stripped kiln of BUILD_DIR and its non-system libraries (bench/contraction/prepare_carry.sh,
# NODE_SUITE=0), and a tar of this checkout's bench/, kernels/gemm/ and tests/conformance/.
# Usage: bench/attention/prepare_lowering_carry.sh [BUILD_DIR] [DEST]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
dest="${2:-/work/main/.carry/attn}"
NODE_SUITE=0 bash "$root/bench/contraction/prepare_carry.sh" "$build" "$dest" > /dev/null
tar -cf "$dest/src.tar" -C "$root" bench kernels/gemm tests/conformance
du -sh "$dest"
