#!/usr/bin/env bash
# The one GPU call of issue 8, from the repository root on the GPU machine, after
# bench/contraction/prepare_carry.sh filled .carry/kiln/ here (carry [".carry/kiln"]):
#   1. the contraction benchmark (bench.py): Linear layers vs cuBLAS, Gemma MLP block / ViT block /
#      CNN exported from PyTorch vs torch eager and torch.compile, the NVFP4 MLP;
#   2. CUDA conformance: kiln test-onnx --backend cuda over the ONNX node suite;
#   3. the edge shapes of the templates (edge_check.py: sizes off every tile, M on both sides of the
#      small-M switch, fp16 and bf16), then again under compute-sanitizer memcheck and racecheck, and
#      the suite's MatMul and Gemm cases under both tools.
# Results: $OUT (the device tool brings them back) -> bench/results/. KILN_COMMIT names the commit.
# STEPS=bench,conformance,sanitizer chooses steps; BENCH_ONLY the bench sections; BENCH_ARGS more bench.py
# arguments (--profile: per-kernel times of each model, kiln and torch.compile).
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
carry="$PWD/.carry/kiln"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
steps="${STEPS:-bench,conformance,sanitizer}"
date=$(date -u +%Y-%m-%d)
tag="${RUN_TAG:+_$RUN_TAG}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1

if [[ ",$steps," == *",bench,"* ]]; then
  # One process per section, so that a crash in one (with its Python stack, faulthandler) leaves
  # the others' tables; the sections' tables are joined into one results file.
  for section in ${BENCH_ONLY:-linear mlp nvfp4 vit cnn}; do
    python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out /tmp/kiln-contraction-results \
      --only "$section" --tag "$section" ${BENCH_ARGS:-} >> "$OUT/contraction_log$tag.txt" 2>&1 || echo "section $section failed: exit $?"
  done
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader | tr ' ' '_')
  cat /tmp/kiln-contraction-results/contraction_*.md > "$OUT/contraction_${device}_${date}${tag}.md"
  grep -v "Warning\|warn(" "$OUT/contraction_log$tag.txt" | grep -E "^(linear|Gemma|ViT|CNN|section|profile|kiln compile failed|Traceback|Fatal|  File| +[0-9.]+ us )" | tail -n 80
fi

if [[ ",$steps," == *",conformance,"* ]]; then
  conformance="$OUT/cuda_conformance_${date}${tag}.txt"
  {
    echo "# kiln test-onnx --backend cuda, $(nvidia-smi --query-gpu=name --format=csv,noheader), $date, commit ${KILN_COMMIT:-unknown}"
    echo "# command: kiln test-onnx .carry/kiln/node --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --skip-list tests/conformance/known_bad_reference.txt -v"
    start=$(date +%s)
    "$carry/kiln" test-onnx "$carry/node" --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --cuda-work-dir /tmp/kiln-cuda-test \
      --skip-list tests/conformance/known_bad_reference.txt -v 2>&1
    echo "# wall time: $(( $(date +%s) - start )) s"
  } > "$conformance"
  grep -v '^PASS' "$conformance" | tail -n 30
  # The onnx wheel's node cases (tests/conformance/onnx_wheel_cases.py, written here from this
  # machine's onnx package) on the CUDA backend too.
  wheel="$OUT/cuda_conformance_wheel_${date}${tag}.txt"
  {
    echo "# onnx $(python3 -c 'import onnx; print(onnx.__version__)') node cases, kiln test-onnx --backend cuda, $(nvidia-smi --query-gpu=name --format=csv,noheader), $date, commit ${KILN_COMMIT:-unknown}"
    python3 tests/conformance/onnx_wheel_cases.py /tmp/kiln-wheel-cases > /dev/null
    start=$(date +%s)
    timeout "${WHEEL_TIMEOUT:-300}" "$carry/kiln" test-onnx /tmp/kiln-wheel-cases --backend cuda --cuda-arch sm_90 --cuda-jobs 16 \
      --cuda-work-dir /tmp/kiln-cuda-wheel --skip-list tests/conformance/onnx_wheel_known_bad.txt -v 2>&1
    echo "# wall time: $(( $(date +%s) - start )) s"
  } > "$wheel"
  grep -v '^PASS' "$wheel" | tail -n 30
fi

if [[ ",$steps," == *",sanitizer,"* ]]; then
  san="$OUT/sanitizer_${date}${tag}.txt"
  mm=$(ls -d "$carry"/node/test_matmul* "$carry"/node/test_gemm* 2>/dev/null)
  {
    echo "# contraction template edge shapes and compute-sanitizer, commit ${KILN_COMMIT:-unknown}, $date"
    echo "## edge_check.py (no sanitizer)"
    python3 bench/contraction/edge_check.py --kiln "$carry/kiln" 2>&1 | tail -n 30
    for tool in memcheck racecheck; do
      echo "## $tool: edge_check.py"
      compute-sanitizer --tool "$tool" --error-exitcode 99 python3 bench/contraction/edge_check.py --kiln "$carry/kiln" 2>&1 | tail -n 6
      echo "exit status: ${PIPESTATUS[0]}"
      echo "## $tool: kiln test-onnx --backend cuda, MatMul and Gemm cases"
      compute-sanitizer --tool "$tool" --error-exitcode 99 "$carry/kiln" test-onnx $mm --backend cuda --cuda-arch sm_90 \
        --cuda-work-dir /tmp/kiln-cuda-san 2>&1 | tail -n 4
      echo "exit status: ${PIPESTATUS[0]}"
    done
  } > "$san"
  cat "$san"
fi
