#!/usr/bin/env bash
# The one device call of issue 12: tune three fp16 kernels on the GPU, then compare the tuned
# builds with the default ones, torch.compile and the copy bandwidth (bench_tune.py).
# Expects, in .carry/tune/ (ignored by git; made by bench/tune/README.md's recipe): the kiln
# binary built on the development machine, the shared libraries it needs (lib/), and
# make_models.py, bench_tune.py. Results go to $OUT.
set -uo pipefail
OUT="${OUT:-/tmp/kiln-tune-out}"
C="$PWD/.carry/tune"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1 KILN_PROGRESS=1
export CXX="${CXX:-$(command -v c++ || command -v g++ || command -v clang++)}"
export KILN_COMMIT="$(cat "$C/COMMIT" 2>/dev/null || echo unknown)"
kiln="$C/kiln"
start=$(date +%s)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -1
  echo "host compiler: $CXX: $($CXX --version | head -1)"
  echo "kiln commit: $KILN_COMMIT"
} | tee "$OUT/env.txt"
python3 "$C/make_models.py" /tmp/models --shapes 8192x4096 --ops layernorm_gelu,softmax
python3 "$C/make_models.py" /tmp/models --shapes 1024x32000 --ops softmax
models="/tmp/models/layernorm_gelu_8192x4096_float16.onnx /tmp/models/softmax_8192x4096_float16.onnx /tmp/models/softmax_1024x32000_float16.onnx"
for m in $models; do
  stem=$(basename "$m" .onnx)
  echo "== kiln tune $stem ($(( $(date +%s) - start )) s)"
  timeout "${TUNE_TIMEOUT:-100}" "$kiln" tune "$m" --target sm_90 --trials "${TRIALS:-48}" --batch 16 --gpus all \
    --build-jobs 16 --worker-timeout 90 -o "$OUT/records.jsonl" --work-dir /tmp/kiln-tune --report "$OUT/tune_$stem" \
    > "$OUT/tune_$stem.log" 2>&1
  echo "exit status $?"
  tr '\r' '\n' < "$OUT/tune_$stem.log" | grep -v '^$' | tail -n 12
done
for f in /tmp/kiln-tune/worker0/*.log; do echo "-- $f"; tail -n 3 "$f"; done > "$OUT/worker_logs.txt" 2>&1
echo "== bench ($(( $(date +%s) - start )) s)"
timeout $(( ${TOTAL:-400} - ($(date +%s) - start) )) python3 "$C/bench_tune.py" --kiln "$kiln" --records "$OUT/records.jsonl" \
  --out "$OUT" $models 2>&1 | tail -n 40
echo "== done ($(( $(date +%s) - start )) s)"
