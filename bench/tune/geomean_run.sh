#!/usr/bin/env bash
# One device call (issue 12's second goal): kiln tune, default settings and 64 trials, on the three
# hidden-style models, each tuned as one function: the Gemma-2B decoder layer (gemma_layer.py, 16
# tokens), the ViT block and the small CNN (hidden_models.py); each report's default and best time
# are measured in the same tuning run; the geometric mean of the three speed-ups in summary.md.
# Expects .carry/tune/ and .carry/core/ as bench/tune/README.md makes them, plus
# .carry/tune/contraction_bench.py (a copy of bench/contraction/bench.py, whose modules are exported).
#   device call: command "OUT=$OUT bash .carry/tune/geomean_run.sh", carry [".carry/tune", ".carry/core"]
# Knobs: TRIALS (64), GPUS (all), LIMIT (seconds a model, 240), MODELS ("gemma_layer vit cnn").
set -uo pipefail
OUT="${OUT:-/tmp/kiln-geomean-out}"
C="$PWD/.carry/tune"
mkdir -p "$OUT" /tmp/models
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
export CXX="${CXX:-$(command -v c++ || command -v g++)}"
export KILN_COMMIT="$(cat "$C/COMMIT" 2>/dev/null || echo unknown)"
S="$OUT/summary.md"
{
  echo "# kiln tune on the hidden-style models, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '```'
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  echo "cores: $(nproc); kiln commit: $KILN_COMMIT; trials ${TRIALS:-64}; gpus ${GPUS:-all}"
  echo '```'
} > "$S"
python3 "$C/gemma_layer.py" /tmp/models/gemma_layer.onnx --tokens 16 2>&1 | tail -1 | tee -a "$S"
python3 "$C/hidden_models.py" /tmp/models --bench "$C/contraction_bench.py" 2>&1 | grep -v Warning | tail -2 | tee -a "$S"
for m in ${MODELS:-gemma_layer vit cnn}; do
  t0=$(date +%s)
  timeout "${LIMIT:-240}" "$C/kiln" tune "/tmp/models/$m.onnx" --target sm_90 --trials "${TRIALS:-64}" --gpus "${GPUS:-all}" \
    -o "$OUT/records_$m.jsonl" --work-dir "/tmp/tune_$m" --report "$OUT/report_$m" > "/tmp/tune_$m.log" 2>&1
  rc=$?
  { echo; echo "## $m: exit $rc, $(( $(date +%s) - t0 )) s"; echo; cat "$OUT/report_$m.md" 2>/dev/null | grep -v '^model:\|^# kiln'
    echo '```'; cat "/tmp/tune_$m/rounds.log" 2>/dev/null; tr '\r' '\n' < "/tmp/tune_$m.log" | grep -v '^\s*$' | tail -n 3; echo '```'; } >> "$S"
  echo "$m: exit $rc"
done
python3 - "$OUT" >> "$S" <<'PY'
import json, math, os, sys
out = sys.argv[1]
rows = []
for m in os.environ.get("MODELS", "gemma_layer vit cnn").split():
    p = os.path.join(out, "report_%s.json" % m)
    if not os.path.exists(p):
        rows.append((m, None)); continue
    for r in json.load(open(p)):
        rows.append(("%s/%s" % (m, r["kernel"]), r["speedup"] or None))
print("\n## Speed-ups (tuned best / default, measured in the same tuning run)\n")
for name, s in rows:
    print("- %s: %s" % (name, "%.3fx" % s if s else "no result"))
got = [s for _, s in rows if s]
if got:
    print("\ngeometric mean over %d kernels: **%.3fx** (goal 1.3x)" % (len(got), math.exp(sum(map(math.log, got)) / len(got))))
PY
tail -n 6 "$S"
