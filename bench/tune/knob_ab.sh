#!/usr/bin/env bash
# One device call: one knob's values on issue 12's memory-bound kernels. For each value in VALUES,
# KNOB=value is set in every record of RECORDS (the other knobs as recorded) and bench_tune.py
# builds and times the three kernels with those records (checked against PyTorch float32, against
# torch.compile, eager and a copy of the same bytes, in this run on this GPU). Needs .carry/tune/
# as README.md says. Results: $OUT/<KNOB>_<value>/bench_tune.md.
# env: KNOB, VALUES, RECORDS (default .carry/tune/records.jsonl), MODELS (default: the three kernels).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-tune-knob}"
C="$PWD/.carry/tune"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
export KILN_COMMIT="$(cat "$C/COMMIT" 2>/dev/null || echo unknown)"
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 "$C/make_models.py" /tmp/models --shapes 8192x4096 --ops layernorm_gelu,softmax > /dev/null
python3 "$C/make_models.py" /tmp/models --shapes 1024x32000 --ops softmax > /dev/null
models="${MODELS:-/tmp/models/layernorm_gelu_8192x4096_float16.onnx /tmp/models/softmax_8192x4096_float16.onnx /tmp/models/softmax_1024x32000_float16.onnx}"
for v in $VALUES; do
  records="/tmp/knob_${KNOB}_$v.jsonl"
  python3 - "${RECORDS:-$C/records.jsonl}" "$KNOB" "$v" "$records" <<'PY'
import json, sys
src, knob, value, dst = sys.argv[1:]
with open(src) as f, open(dst, "w") as out:
    for line in f:
        r = json.loads(line)
        r["knobs"][knob] = int(value)
        out.write(json.dumps(r) + "\n")
PY
  echo "== $KNOB=$v ($(( $(date +%s) - start )) s)"
  python3 "$C/bench_tune.py" --kiln "$C/kiln" --records "$records" --out "$OUT/${KNOB}_$v" --work "/tmp/kiln-knob-$v" \
    $models 2>&1 | grep -E "^\| (layernorm|softmax)"
done
echo "== done ($(( $(date +%s) - start )) s)"
