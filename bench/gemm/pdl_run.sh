#!/usr/bin/env bash
# One device call: the Hopper GEMM under programmatic dependent launch (gemm_wgmma.cuh), checked,
# then measured in the hidden-style models with it on and off.
#   device call: command "KILN_COMMIT=<sha> OUT=$OUT bash bench/gemm/pdl_run.sh",
#                carry [".carry/gemm", ".carry/tune", ".carry/core"]
# Prepared here: .carry/gemm from `GEMM_ARCH=90a GEMM_TC_ALL=0 GEMM_STAGE=build
# GEMM_BUILD=$PWD/.carry/gemm bash bench/gemm/run.sh`; .carry/tune and .carry/core as
# bench/tune/README.md says.
# Steps (STEPS, default "checks models"):
#   checks: gemm_bench wgsmall, fp16 and bf16: every Hopper path on the edge shapes, then each one
#           launched right after a kernel that writes A late, with B marked a weight (b_early), and
#           the control row that shows the writer's next kernel did start early;
#   models: the Gemma layer at 16 and 816 tokens and the ViT block (ONLY: bench.py sections, e.g.
#           vit,cnn) compiled once, then kiln timed with SWITCH=0 and with the default, twice over
#           (SWITCH: KILN_GEMM_PDL, the templates' programmatic launches, or KILN_GEN_PDL, the
#           generated kernels');
#   conv:   the convolution and attention templates (see the step; carry .carry/conv).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-pdl-out}"
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
C="$PWD/.carry/tune"
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
commit="${KILN_COMMIT:-unknown}"
t0=$(date +%s)
steps=" ${STEPS:-checks models} "
if [[ $steps == *" checks "* ]]; then
  res="$OUT/gemm_pdl_checks_H200_$(date -u +%F)_${commit}.md"
  {
    echo "<!-- command: KILN_COMMIT=$commit bash bench/gemm/pdl_run.sh (STEPS=checks): .carry/gemm/gemm_bench_{0,1} wgsmall -->"
    echo "- device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); date $(date -u '+%F %T UTC'); commit $commit"
  } > "$res"
  for bf in 0 1; do
    echo "## gemm_bench_$bf wgsmall (BENCH_BF16=$bf)" >> "$res"
    timeout 240 .carry/gemm/gemm_bench_$bf wgsmall >> "$res" 2>&1
    echo "exit status $?" >> "$res"
  done
  echo "== checks: $(grep -c '| ok |' "$res") ok, $(grep -c 'FAIL' "$res") FAIL, PDL rows $(grep -c 'late writer' "$res"), controls $(grep -c 'PDL control' "$res") ($(( $(date +%s) - t0 )) s)"
  grep -m5 "FAIL\|exit status [1-9]" "$res"
fi
if [[ $steps == *" models "* ]]; then
  # Compiled once (the Gemma layer at TOKENS, the ViT block), then kiln alone under each
  # KILN_GEMM_PDL value of MODES (gemm_ptx.cuh: 0 plain launches, else programmatic; run s32b swept
  # a mask of variants since removed), each in its own process on the same libraries, twice over.
  python3 "$C/contraction_bench.py" --kiln "$C/kiln" --out "$OUT" --only "${ONLY:-vit}" --compile-only > "$OUT/bench_compile.log" 2>&1 &
  bc=$!
  python3 "$C/profile_layer.py" --kiln "$C/kiln" --out "$OUT" --bench "$C/contraction_bench.py" --tokens "${TOKENS:-16,816}" \
    --kiln-only --tag _compile 2>&1 | grep -v Warning
  wait $bc
  echo "== compiled ($(( $(date +%s) - t0 )) s): $(tail -1 "$OUT/bench_compile.log")"
  switch="${SWITCH:-KILN_GEMM_PDL}"
  for round in 1 2; do
    for mode in ${MODES:-0 1}; do
      echo "== round $round, $switch=$mode ($(( $(date +%s) - t0 )) s)"
      env "$switch=$mode" python3 "$C/profile_layer.py" --kiln "$C/kiln" --out "$OUT" --bench "$C/contraction_bench.py" \
        --tokens "${TOKENS:-16,816}" --reuse-built --kiln-only --tag "_r${round}_pdl$mode" 2>&1 | grep "tokens: relative"
      env "$switch=$mode" python3 "$C/contraction_bench.py" --kiln "$C/kiln" --out "$OUT" --only "${ONLY:-vit}" --reuse-built \
        --tag "r${round}_pdl$mode" 2>&1 | grep ": ok\|FAIL\|Error" | head -4
    done
  done
fi
if [[ $steps == *" conv "* ]]; then
  # The convolution and attention templates' programmatic launches: .carry/conv (bench/gemm/
  # conv_device_run.sh --prepare build .carry/conv --bench) runs the generated conv edge cases,
  # conv_bench's checks and the CNN; then the attention edge cases, and the ViT block and the CNN
  # with KILN_GEMM_PDL=0 and the default, twice over, on the libraries built there.
  KV="$PWD/.carry/conv"
  OUT="$OUT/conv" EDGE_BF16="${EDGE_BF16:-0,7,8,9}" bash "$KV/run.sh"
  (cd /tmp/convsrc && timeout 200 python3 bench/contraction/edge_check.py --kiln "$KV/kiln" --kinds mlp,attention,attention64 2>&1 | grep -v Warn) > "$OUT/edge_attention.txt"
  echo "== mlp and attention edge cases: $(grep -c '^ok' "$OUT/edge_attention.txt") ok; $(grep -vc '^ok' "$OUT/edge_attention.txt") other lines ($(( $(date +%s) - t0 )) s)"
  grep -v '^ok' "$OUT/edge_attention.txt" | tail -5
  export LD_LIBRARY_PATH="$KV/lib:$LD_LIBRARY_PATH"
  python3 /tmp/convsrc/bench/contraction/bench.py --kiln "$KV/kiln" --work /tmp/kiln-contraction-cnn --only vit --compile-only > "$OUT/vit_compile.log" 2>&1
  for round in 1 2; do
    for mode in 0 1; do
      echo "== round $round, KILN_GEMM_PDL=$mode ($(( $(date +%s) - t0 )) s)"
      KILN_GEMM_PDL=$mode python3 /tmp/convsrc/bench/contraction/bench.py --kiln "$KV/kiln" --work /tmp/kiln-contraction-cnn --out "$OUT" \
        --only vit,cnn --reuse-built --tag "conv_r${round}_pdl$mode" 2>&1 | grep ": ok\|FAIL\|Error" | head -8
    done
  done
fi
echo "== done ($(( $(date +%s) - t0 )) s)"
