#!/usr/bin/env bash
# One GPU call for the contraction templates' Hopper path, every result checked before it is
# timed, optionally measuring a switch read from the environment (KNOB: an environment variable the
# kernels read, e.g. session 9's KILN_GEMM_STREAMK) on and off:
#   1. (unless HARNESS=0) the contraction harness's Hopper checks and M >= 816 timings (bench/gemm/run.sh, GEMM_MODE=wg,
#      both dtypes), and with KNOB the float16 ones again with KNOB=0;
#   2. bench.py's sections (SECTIONS, default linear,mlp,vit: models exported from PyTorch, kiln
#      vs cuBLAS / torch eager / torch.compile), compiled once, timed, and with KNOB timed again
#      with KNOB=0 (--reuse-built: the same libraries).
# The harness builds beside the models' export and compile. From the repository root on the GPU
# machine, after bench/contraction/prepare_carry.sh (carry [".carry/kiln"]):
#   OUT=$OUT KILN_COMMIT=<commit> RUN_TAG=<tag> [KNOB=<variable>] [BENCH_ARGS=--profile] bash bench/contraction/ab_run.sh
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
knob="${KNOB:-}"
tag="${RUN_TAG:-ab}"
sections="${SECTIONS:-linear,mlp,vit}"
carry="$PWD/.carry/kiln"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr ' ' '_')
date=$(date -u +%F)
log="$OUT/ab_log_${tag}.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1 | tee "$log"

start=$(date +%s)
harness=
[ "${HARNESS:-1}" = 0 ] || GEMM_ARCH=90a GEMM_MODE=wg GEMM_TC_ALL=0 GEMM_STAGE=build GEMM_BUILD=/tmp/ab-gemm GEMM_COMMIT="${KILN_COMMIT:-unknown}" \
  bash bench/gemm/run.sh /dev/null >> "$log" 2>&1 &
[ "${HARNESS:-1}" = 0 ] || harness=$!
python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out /tmp/ab-compile --only "$sections" --compile-only \
  >> "$log" 2>&1 || echo "compile of $sections failed: exit $?" | tee -a "$log"
[ -z "$harness" ] || wait "$harness" || echo "harness build failed" | tee -a "$log"
echo "built in $(( $(date +%s) - start )) s" | tee -a "$log"

if [ "${HARNESS:-1}" != 0 ]; then
gemm_on="$OUT/gemm_wg_${device}_${date}_${tag}.md"
GEMM_ARCH=90a GEMM_MODE=wg GEMM_STAGE=run GEMM_BUILD=/tmp/ab-gemm GEMM_COMMIT="${KILN_COMMIT:-unknown}" bash bench/gemm/run.sh "$gemm_on" \
  > /dev/null 2>> "$log" || echo "harness (knob default): failures, see $gemm_on" | tee -a "$log"
gemm_off=
if [ -n "$knob" ]; then
  gemm_off="$OUT/gemm_wg_${device}_${date}_${tag}_${knob}0.md"
  echo "# the float16 binary of $gemm_on again, with $knob=0" > "$gemm_off"
  env "$knob=0" timeout 150 /tmp/ab-gemm/gemm_bench_0 wg "$gemm_off" > /dev/null 2>> "$log" || echo "harness ($knob=0): failures" | tee -a "$log"
fi
grep -c "| ok |" "$gemm_on" $gemm_off | tee -a "$log"
grep -h "FAIL" "$gemm_on" $gemm_off | head -n 20 | tee -a "$log"
fi

for mode in default ${knob:+off}; do
  out="/tmp/ab-$mode"
  if [ "$mode" = off ]; then
    env "$knob=0" python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$out" --only "$sections" --reuse-built \
      --tag "${tag}_${knob}0" >> "$log" 2>&1 || echo "bench ($knob=0) failed: exit $?" | tee -a "$log"
  else
    python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$out" --only "$sections" --reuse-built \
      --tag "$tag" ${BENCH_ARGS:-} >> "$log" 2>&1 || echo "bench failed: exit $?" | tee -a "$log"
  fi
  {
    echo "# ${knob:-no knob}: $mode (commit ${KILN_COMMIT:-unknown}; command: KNOB=$knob SECTIONS=$sections bench/contraction/ab_run.sh)"
    cat "$out"/contraction_*.md
  } > "$OUT/contraction_${device}_${date}_${tag}_${mode}.md"
done
grep -hE "^\| (float16|bfloat16) \| .* \| 816 \||^\| (Gemma|ViT)" "$OUT"/contraction_*_"${tag}"_*.md | tee -a "$log"
echo "total $(( $(date +%s) - start )) s" | tee -a "$log"
