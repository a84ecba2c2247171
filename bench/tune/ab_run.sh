#!/usr/bin/env bash
# One device call: an A/B of kiln builds on issue 12's memory-bound kernels. For each kiln binary
# named in KILNS (files in .carry/tune/, prepared as README.md says, e.g. "kiln_old kiln"),
# bench_tune.py with the tuning records RECORDS (default: .carry/tune/records.jsonl): each model
# built with the default schedules and with the records, checked against PyTorch float32, timed
# against torch.compile, eager and a copy of the same bytes, in this one run on this GPU.
# Each binary's commit in .carry/tune/COMMIT_<kiln>. Results: $OUT/<kiln>/bench_tune.md.
# env: KILNS, RECORDS, MODELS (default: the three kernels).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-tune-ab}"
C="$PWD/.carry/tune"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 "$C/make_models.py" /tmp/models --shapes 8192x4096 --ops layernorm_gelu,softmax > /dev/null
python3 "$C/make_models.py" /tmp/models --shapes 1024x32000 --ops softmax > /dev/null
models="${MODELS:-/tmp/models/layernorm_gelu_8192x4096_float16.onnx /tmp/models/softmax_8192x4096_float16.onnx /tmp/models/softmax_1024x32000_float16.onnx}"
for k in ${KILNS:-kiln}; do
  export KILN_COMMIT="$(cat "$C/COMMIT_$k" 2>/dev/null || echo unknown)"  # bench_tune.py's header names it
  echo "== $k ($KILN_COMMIT; $(( $(date +%s) - start )) s)"
  python3 "$C/bench_tune.py" --kiln "$C/$k" --records "${RECORDS:-$C/records.jsonl}" --out "$OUT/$k" --work "/tmp/kiln-tune-bench-$k" \
    $models 2>&1 | tail -n 8
done
echo "== done ($(( $(date +%s) - start )) s)"
