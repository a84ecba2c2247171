#!/usr/bin/env bash
# The one GPU call of issue 9 (packed 4-/2-bit tensors on the CUDA backend), from the repository
# root on the GPU machine, after bench/packed/prepare_carry.sh filled .carry/packed/ here
# (carry [".carry/packed"]):
#   1. the packed cases: the onnx wheel's 82 node cases with int4/uint4/int2/uint2/float4e2m1
#      tensors (wheel_packed_cases.txt; skipped on CUDA before) and the large race-check cases of
#      write_large_cases.py (131327-element packed tensors, scattered writes);
#   2. the whole wheel set (1884 cases), as bench/contraction/device_run.sh runs it.
# Results in $OUT (the device tool brings them back) -> bench/results/. KILN_COMMIT names the commit.
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
carry="$PWD/.carry/packed"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
date=$(date -u +%Y-%m-%d)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1
onnx_version=$(python3 -c 'import onnx; print(onnx.__version__)')
python3 "$carry/onnx_wheel_cases.py" /tmp/kiln-wheel-cases > /dev/null
python3 "$carry/write_large_cases.py" /tmp/kiln-packed-large
skip="$carry/onnx_wheel_known_bad.txt"

packed="$OUT/cuda_conformance_packed_${date}.txt"
{
  echo "# packed 4-/2-bit cases on the CUDA backend: onnx $onnx_version wheel's packed node cases (bench/packed/wheel_packed_cases.txt)"
  echo "# and bench/packed/write_large_cases.py; $gpu, $date, commit ${KILN_COMMIT:-unknown}"
  echo "# command: kiln test-onnx <82 wheel packed cases> /tmp/kiln-packed-large/* --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --skip-list tests/conformance/onnx_wheel_known_bad.txt -v"
  start=$(date +%s)
  cases=$(sed 's|^|/tmp/kiln-wheel-cases/|' "$carry/wheel_packed_cases.txt")
  timeout 100 "$carry/kiln" test-onnx $cases /tmp/kiln-packed-large/* --backend cuda --cuda-arch sm_90 --cuda-jobs 16 \
    --cuda-work-dir /tmp/kiln-cuda-packed --skip-list "$skip" -v 2>&1
  echo "# exit status: $?; wall time: $(( $(date +%s) - start )) s"
} > "$packed"
grep -v '^PASS' "$packed" | tail -n 25

wheel="$OUT/cuda_conformance_wheel_${date}_packed.txt"
{
  echo "# onnx $onnx_version node cases, kiln test-onnx --backend cuda, $gpu, $date, commit ${KILN_COMMIT:-unknown}"
  echo "# command: kiln test-onnx /tmp/kiln-wheel-cases --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --skip-list tests/conformance/onnx_wheel_known_bad.txt -v"
  start=$(date +%s)
  timeout "${WHEEL_TIMEOUT:-170}" "$carry/kiln" test-onnx /tmp/kiln-wheel-cases --backend cuda --cuda-arch sm_90 --cuda-jobs 16 \
    --cuda-work-dir /tmp/kiln-cuda-wheel --skip-list "$skip" -v 2>&1
  echo "# exit status: $?; wall time: $(( $(date +%s) - start )) s"
} > "$wheel"
grep -v '^PASS' "$wheel" | grep -v '^built unit' | tail -n 30

# compute-sanitizer memcheck over the large packed cases only (never a whole suite), when the call
# has time left: out-of-bounds or misaligned word accesses of store_packed would show here.
if (( SECONDS < ${SANITIZER_BEFORE_S:-200} )); then
  san="$OUT/sanitizer_packed_${date}.txt"
  {
    echo "# compute-sanitizer --tool memcheck, kiln test-onnx /tmp/kiln-packed-large/* --backend cuda; $gpu, $date, commit ${KILN_COMMIT:-unknown}"
    timeout 80 compute-sanitizer --tool memcheck --error-exitcode 99 "$carry/kiln" test-onnx /tmp/kiln-packed-large/* \
      --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --cuda-work-dir /tmp/kiln-cuda-packed-san 2>&1 | tail -n 8
    echo "# exit status: ${PIPESTATUS[0]}"
  } > "$san"
  cat "$san"
else
  echo "no time left for the memcheck step ($SECONDS s elapsed)"
fi
