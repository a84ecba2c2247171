#!/usr/bin/env bash
# One GPU call for the contraction templates' Hopper path, every result checked before it is
# timed, optionally measuring a switch read from the environment (KNOB: an environment variable the
# kernels read, e.g. session 9's KILN_GEMM_STREAMK) on and off:
#   1. (unless HARNESS=0) the contraction harness's Hopper checks and M >= 816 timings (bench/gemm/run.sh, GEMM_MODE=wg,
#      both dtypes), and with KNOB the float16 ones again with KNOB=0;
#   2. bench.py's sections (SECTIONS, default linear,mlp,vit: models exported from PyTorch, kiln
#      vs cuBLAS / torch eager / torch.compile), compiled once, timed, and with KNOB timed again
#      with KNOB=0 (--reuse-built: the same libraries).
# OLD_KERNELS=DIR: a copy of another commit's kernels/ folder (`git archive <commit> kernels | tar -x -C
# .carry/old`, then carry .carry/old; DIR = .carry/old/kernels): each model compiled in step 2 is
# rebuilt with DIR's gemm/ and quant/ headers in place of this kiln's (one nvcc call with kiln's
# flags) and timed beside the default as mode "old"; the harness of step 1 is built from DIR too and
# its float16 binary run after the default one. (Replaces KNOB.)
# ALT=VAR=VALUE: step 2 also times the models once more with that setting in the environment (mode
# "alt"; e.g. ALT=KILN_GEMV_PDL=0).
# The harness builds beside the models' export and compile. From the repository root on the GPU
# machine, after bench/contraction/prepare_carry.sh (carry [".carry/kiln"]):
#   OUT=$OUT KILN_COMMIT=<commit> RUN_TAG=<tag> [KNOB=<variable>] [BENCH_ARGS=--profile] bash bench/contraction/ab_run.sh
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
knob="${KNOB:-}"
old_kernels="${OLD_KERNELS:-}"
[ -n "$old_kernels" ] && old_kernels=$(cd "$old_kernels" && pwd) && knob=
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
if [ -n "$old_kernels" ] && [ "${HARNESS:-1}" != 0 ]; then  # the old harness, float16 (sm_90a)
  mkdir -p /tmp/ab-gemm-old/bench/gemm && cp bench/gemm/gemm_bench.cu bench/gemm/bench_timer.cuh /tmp/ab-gemm-old/bench/gemm/
  rm -rf /tmp/ab-gemm-old/kernels && cp -r "$old_kernels" /tmp/ab-gemm-old/kernels
  nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DBENCH_BF16=0 -DBENCH_GEMV_ONLY=0 -DKILN_GEMM_SM90A -DBENCH_TC_ALL=0 \
    /tmp/ab-gemm-old/bench/gemm/gemm_bench.cu -o /tmp/ab-gemm-old/gemm_bench_0 -lcublas >> "$log" 2>&1 &
  harness_old=$!
fi
python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out /tmp/ab-compile --only "$sections" --compile-only \
  >> "$log" 2>&1 || echo "compile of $sections failed: exit $?" | tee -a "$log"
if [ -n "$old_kernels" ]; then  # every compiled model again, with the old kernel headers
  rm -rf /tmp/kiln-contraction-old && cp -r /tmp/kiln-contraction /tmp/kiln-contraction-old
  rebuilds=()
  for d in /tmp/kiln-contraction-old/*/; do
    lib=$(ls "$d"lib*.so 2> /dev/null | head -n 1)
    [ -n "$lib" ] && [ -d "$d/include/kiln/quant" ] || continue
    rm -rf "$d/include/kiln/gemm" "$d/include/kiln/quant" && cp -r "$old_kernels/gemm" "$old_kernels/quant" "$d/include/kiln/"
    rm -f "$lib"
    (nvcc -O3 -std=c++20 -shared -Xcompiler -fPIC -cudart shared --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
      -DKILN_GEMM_SM90A -I"$d/include" -o "$lib" "$d"*.cu >> "$log" 2>&1 || echo "old rebuild of $d failed" | tee -a "$log") &
    rebuilds+=($!)
  done
  for p in "${rebuilds[@]}"; do wait "$p"; done
fi
[ -z "$harness" ] || wait "$harness" || echo "harness build failed" | tee -a "$log"
[ -z "${harness_old:-}" ] || wait "$harness_old" || echo "old harness build failed" | tee -a "$log"
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
if [ -n "$old_kernels" ]; then
  gemm_off="$OUT/gemm_wg_${device}_${date}_${tag}_old.md"
  echo "# the harness built from OLD_KERNELS (float16), command of $gemm_on" > "$gemm_off"
  timeout 150 /tmp/ab-gemm-old/gemm_bench_0 wg "$gemm_off" > /dev/null 2>> "$log" || echo "harness (old kernels): failures" | tee -a "$log"
fi
grep -c "| ok |" "$gemm_on" $gemm_off | tee -a "$log"
grep -h "FAIL" "$gemm_on" $gemm_off | head -n 20 | tee -a "$log"
fi

alt="${ALT:-}"
for mode in default ${knob:+off} ${old_kernels:+old} ${alt:+alt}; do
  out="/tmp/ab-$mode"
  if [ "$mode" = old ]; then
    python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$out" --only "$sections" --reuse-built \
      --work /tmp/kiln-contraction-old --tag "${tag}_old" ${BENCH_ARGS:-} >> "$log" 2>&1 || echo "bench (old kernels) failed: exit $?" | tee -a "$log"
  elif [ "$mode" = alt ]; then
    env "$alt" python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$out" --only "$sections" --reuse-built \
      --tag "${tag}_alt" >> "$log" 2>&1 || echo "bench ($alt) failed: exit $?" | tee -a "$log"
  elif [ "$mode" = off ]; then
    env "$knob=0" python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$out" --only "$sections" --reuse-built \
      --tag "${tag}_${knob}0" >> "$log" 2>&1 || echo "bench ($knob=0) failed: exit $?" | tee -a "$log"
  else
    python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$out" --only "$sections" --reuse-built \
      --tag "$tag" ${BENCH_ARGS:-} >> "$log" 2>&1 || echo "bench failed: exit $?" | tee -a "$log"
  fi
  {
    echo "# ${knob:-${old_kernels:+old kernels}}: $mode${alt:+ (alt: $alt)} (commit ${KILN_COMMIT:-unknown}; command: KNOB=$knob OLD_KERNELS=${OLD_KERNELS:-} ALT=$alt SECTIONS=$sections bench/contraction/ab_run.sh)"
    cat "$out"/contraction_*.md
  } > "$OUT/contraction_${device}_${date}_${tag}_${mode}.md"
done
grep -hE "^\| (float16|bfloat16) \| .* \| 816 \||^\| (Gemma|ViT)" "$OUT"/contraction_*_"${tag}"_*.md | tee -a "$log"
echo "total $(( $(date +%s) - start )) s" | tee -a "$log"
