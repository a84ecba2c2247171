#!/usr/bin/env bash
# One device call: where the three hidden-style models' time goes, kiln against torch.compile:
# profile_layer.py (the Gemma layer, TOKENS) and bench/contraction/bench.py --profile on the ViT block
# and the CNN, all compiled at once, then timed and profiled one after another.
#   device call: command "OUT=$OUT bash .carry/tune/profile_run.sh", carry [".carry/tune", ".carry/core"]
# Knobs: TOKENS (16,816), ONLY (bench.py --only: vit,cnn).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-profile-out}"
C="$PWD/.carry/tune"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
export KILN_COMMIT="$(cat "$C/COMMIT" 2>/dev/null || echo unknown)"
t0=$(date +%s)
python3 "$C/contraction_bench.py" --kiln "$C/kiln" --out "$OUT" --only "${ONLY:-vit,cnn}" --compile-only > "$OUT/bench_compile.log" 2>&1 &
bc=$!
python3 "$C/profile_layer.py" --kiln "$C/kiln" --out "$OUT" --bench "$C/contraction_bench.py" --tokens "${TOKENS:-16,816}" 2>&1 | grep -v Warning
wait $bc
echo "== bench.py compile: $(tail -1 "$OUT/bench_compile.log") ($(( $(date +%s) - t0 )) s)"
python3 "$C/contraction_bench.py" --kiln "$C/kiln" --out "$OUT" --only "${ONLY:-vit,cnn}" --reuse-built --profile --tag profile 2>&1 \
  | grep -v Warning | tee "$OUT/bench_profile.log" | grep -v "^\s*$" | head -150
echo "== done ($(( $(date +%s) - t0 )) s)"
