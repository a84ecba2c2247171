#!/usr/bin/env bash
# The one device call of issue 2 items 7 and 9, run from the repository root on the GPU machine:
#   1. CUDA conformance: `kiln test-onnx --backend cuda` over the ONNX node suite;
#   2. the core benchmark (bench/core/bench.py).
# Expects, carried in .carry-cg/ (ignored by git; see bench/core/README.md): the kiln binary built on
# the development machine, the shared libraries it needs (lib/), and the node suite (node/).
# Results go to $OUT (the device tool brings them back) and are committed to bench/results/.
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.carry-cg/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
kiln="$PWD/.carry-cg/kiln"
date=$(date -u +%Y-%m-%d)
tag="${RUN_TAG:+_$RUN_TAG}"  # RUN_TAG=3: cuda_conformance_<date>_3.txt, core_<device>_<date>_3.md
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1

conformance="$OUT/cuda_conformance_${date}${tag}.txt"
{
  echo "# kiln test-onnx --backend cuda, $(nvidia-smi --query-gpu=name --format=csv,noheader), $date, commit ${KILN_COMMIT:-unknown}"
  echo "# command: kiln test-onnx .carry-cg/node --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --skip-list tests/conformance/known_bad_reference.txt -v"
  start=$(date +%s)
  "$kiln" test-onnx .carry-cg/node --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --cuda-work-dir /tmp/kiln-cuda-test \
    --skip-list tests/conformance/known_bad_reference.txt -v 2>&1
  echo "# wall time: $(( $(date +%s) - start )) s"
} > "$conformance"
grep -v '^PASS' "$conformance" | tail -n 60

python3 bench/core/bench.py --kiln "$kiln" --out "$OUT" ${RUN_TAG:+--tag "$RUN_TAG"} 2>&1 | tee "$OUT/bench_log.txt" | tail -n 40
