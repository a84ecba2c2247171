#!/usr/bin/env bash
# One device call: build libkiln_quant (unless LIB names a prebuilt one) and the read-ceiling
# kernel with nvcc for the GPU here; ncu instruction counts and stall reasons of the GEMV variants
# and M in bench/quant/profile.py's RUNS (checked first; NCU_TIMEOUT seconds, default 150); then check every kernel variant and shape against a reference on fresh
# random data and time kiln against the read ceiling, cuBLAS bf16 and PyTorch's int4 kernel.
# Writes bench/results/quant_<device>_<date>.md and ncu_gemv.md (and copies under $OUT).
#   usage: bench/quant/run.sh            (from the repository root)
# Needs: nvcc, python3 with torch (CUDA), dlpack/dlpack.h (system or DLPACK_INCLUDE); ncu optional
# (NCU=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-/tmp/kiln_quant_build}
mkdir -p "$BUILD"
OUTDIR=${OUT:-$BUILD}
DLPACK_INCLUDE=${DLPACK_INCLUDE:-/usr/include}
[ -f "$DLPACK_INCLUDE/dlpack/dlpack.h" ] || DLPACK_INCLUDE=.carry/include
# sm_90a (with KILN_GEMM_SM90A, as kiln builds sm_90): GEMM variant 3 (wgmma) for M >= 17.
ARCH=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A"}
LIB=${LIB:-}  # a libkiln_quant.so built beforehand (same sources) skips the build
if [ -n "$LIB" ] && python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$LIB"; then
  echo "== using prebuilt $LIB"
else
  echo "== build ($ARCH)"
  time nvcc -std=c++17 -O3 $ARCH -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Xptxas -warn-spills \
    -Iinclude -I"$DLPACK_INCLUDE" kernels/quant/w4_linear.cu -o "$BUILD/libkiln_quant.so"
  LIB="$BUILD/libkiln_quant.so"
fi
nvcc -std=c++17 -O3 $ARCH -shared -Xcompiler -fPIC -Xcompiler -fvisibility=hidden bench/quant/read_ceiling.cu -o "$BUILD/libkiln_read.so"
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$LIB" | python3 bench/quant/sass_count.py "$OUTDIR/sass_gemv78.md" || echo "sass count failed"
fi
if [ "${NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
  echo "== ncu: GEMV variants of profile.py's RUNS, nvfp4 bf16"
  timeout "${NCU_TIMEOUT:-150}" ncu --clock-control none -k regex:w4_gemv --section WarpStateStats \
    --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
    --page raw --csv --print-units base python3 bench/quant/profile.py --lib "$LIB" > "$OUTDIR/ncu_gemv.csv" || echo "ncu failed: $?"
  python3 bench/quant/profile.py --report "$OUTDIR/ncu_gemv.csv" --out "$OUTDIR/ncu_gemv.md" || echo "ncu report failed"
fi
PYTHONUNBUFFERED=1 python3 bench/quant/bench.py --lib "$LIB" --read-lib "$BUILD/libkiln_read.so" --command "bench/quant/run.sh" "$@"
