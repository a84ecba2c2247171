#!/usr/bin/env bash
# One device call: kiln tune on small Conv3x3 + BatchNorm + Relu models (onnx package, fp16, fixed
# shapes), so that the conv_wgmma knob's two values are built, checked against the CPU backend and
# timed on the GPU; the reports (default, best, knobs) in summary.md.
#   device call: command "OUT=$OUT bash .carry/tune/conv_knob_run.sh", carry [".carry/tune"]
# Knobs: SHAPES (N,C,H,W,OC; default "8,64,28,28,64 4,64,14,14,128"), TRIALS (8).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-conv-knob-out}"
C="$PWD/.carry/tune"
mkdir -p "$OUT" /tmp/convknob
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="/usr/local/cuda/bin:$PATH"
export KILN_COMMIT="$(cat "$C/COMMIT" 2>/dev/null || echo unknown)"
S="$OUT/summary.md"
echo "# kiln tune, conv_wgmma knob, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), kiln $KILN_COMMIT, $(date -u +%FT%RZ)" > "$S"
for shape in ${SHAPES:-8,64,28,28,64 4,64,14,14,128}; do
  python3 - "$shape" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
n, c, h, w, oc = map(int, sys.argv[1].split(","))
rng = np.random.default_rng(0)
f16 = lambda a: numpy_helper.from_array(a.astype(np.float16))
inits = [f16(rng.standard_normal((oc, c, 3, 3)) * 0.05), f16(rng.uniform(0.5, 1.5, oc)), f16(rng.standard_normal(oc) * 0.1),
         f16(rng.standard_normal(oc) * 0.1), f16(rng.uniform(0.5, 1.5, oc))]
for t, name in zip(inits, ["w", "scale", "bias", "mean", "var"]):
    t.name = name
nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="bn"),
         helper.make_node("Relu", ["b"], ["y"], name="relu")]
g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [n, c, h, w])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "/tmp/convknob/conv_%s.onnx" % sys.argv[1].replace(",", "x"))
PY
  m="/tmp/convknob/conv_${shape//,/x}.onnx"
  t0=$(date +%s)
  timeout 200 "$C/kiln" tune "$m" --target sm_90 --trials "${TRIALS:-8}" -o "$OUT/records_${shape//,/x}.jsonl" \
    --work-dir "/tmp/convknob/work_${shape//,/x}" --report "$OUT/report_${shape//,/x}" > "/tmp/convknob/log_${shape//,/x}.txt" 2>&1
  rc=$?
  { echo; echo "## ${shape} (N,C,H,W,OC): exit $rc, $(( $(date +%s) - t0 )) s"; echo; grep -v '^model:\|^# kiln' "$OUT/report_${shape//,/x}.md" 2>/dev/null
    echo '```'; grep -h '"status"' "$OUT/records_${shape//,/x}.jsonl" 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r.get("knobs"), r.get("status"), r.get("median_us"), (r.get("error") or "")[:200])'
    tr '\r' '\n' < "/tmp/convknob/log_${shape//,/x}.txt" | grep -v '^\s*$' | tail -n 4; echo '```'; } >> "$S"
done
cat "$S"
