#!/usr/bin/env bash
# One device call: build libkiln_quant with nvcc for the GPU here, check every kernel variant and
# shape against a reference on fresh random data, then time kiln against cuBLAS bf16 and
# PyTorch's int4 kernel. Writes bench/results/quant_<device>_<date>.md (and a copy under $OUT).
#   usage: bench/quant/run.sh            (from the repository root)
# Needs: nvcc, python3 with torch (CUDA), dlpack/dlpack.h (system or DLPACK_INCLUDE).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-/tmp/kiln_quant_build}
mkdir -p "$BUILD"
DLPACK_INCLUDE=${DLPACK_INCLUDE:-/usr/include}
[ -f "$DLPACK_INCLUDE/dlpack/dlpack.h" ] || DLPACK_INCLUDE=.carry/include
ARCH=${ARCH:-"-gencode=arch=compute_90,code=sm_90"}
LIB=${LIB:-}  # a libkiln_quant.so built beforehand (same sources) skips the build
if [ -n "$LIB" ] && python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$LIB"; then
  echo "== using prebuilt $LIB"
else
  echo "== build ($ARCH)"
  time nvcc -std=c++17 -O3 $ARCH -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Xptxas -warn-spills \
    -Iinclude -I"$DLPACK_INCLUDE" kernels/quant/w4_linear.cu -o "$BUILD/libkiln_quant.so"
  LIB="$BUILD/libkiln_quant.so"
fi
PYTHONUNBUFFERED=1 python3 bench/quant/bench.py --lib "$LIB" --command "bench/quant/run.sh" "$@"
