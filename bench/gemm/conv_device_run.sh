#!/usr/bin/env bash
# One GPU call for the convolution kernels (conv_wgmma.cuh, conv_patch.cuh, conv_implicit_gemm.cuh),
# checks first:
#   1. bench/contraction/edge_check.py --kinds conv (generated code, fp16/bf16, vs torch fp32),
#   2. bench/gemm/conv_bench.cu, built as kiln builds sm_90 (sm_90a, -DKILN_GEMM_SM90A: the Hopper
#      kernel is in it): each kernel checked against a direct fp32 convolution, then timed,
#   3. bench/contraction/bench.py --only cnn --profile (the CNN and its layers vs cuDNN/torch.compile),
#   4. ncu of one conv kernel on the 128->128 layer (the first whose name matches $NCU_KERNEL, default
#      regex:conv_), if NCU=1 and time is left.
# Here:  bash bench/gemm/conv_device_run.sh --prepare BUILD_DIR /work/main/.carry/NAME
#        (kiln of BUILD_DIR and its libraries, a tar of this checkout's bench/ and kernels/, this script)
# There: run tool, carry [".carry/NAME"], command `KILN_COMMIT=<sha> bash .carry/NAME/run.sh`
#        (KILN_COMPILE_FLAGS=--conv-wgmma: the generated code of steps 1 and 3 tries the Hopper kernel);
#        results under $OUT (device.txt, edge_conv.txt, conv_bench.md, cnn_log.txt, res/, ncu_128_128.txt).
#        EDGE=0 leaves step 1 out (it compiles ~40 models: 2-3 minutes; EDGE_BF16=1,5,..: only those conv
#        cases in bfloat16), BENCH=0 step 2; CNN_PRECOMPILE=1
#        compiles step 3's models beside step 1's; a conv_bench in the carry
#        (`--prepare BUILD_DIR DEST --bench`: built here for sm_90a, seconds) is used instead of
#        building it there.
set -uo pipefail
if [ "${1:-}" = --prepare ]; then
  root="$(cd "$(dirname "$0")/../.." && pwd)"
  dest="${3:-/work/main/.carry/conv}"
  NODE_SUITE=0 bash "$root/bench/contraction/prepare_carry.sh" "${2:-$root/build}" "$dest" > /dev/null || exit 1
  tar -cf "$dest/src.tar" -C "$root" bench kernels
  cp "$0" "$dest/run.sh"
  if [ "${4:-}" = --bench ]; then
    (cd "$root/bench/gemm" && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A conv_bench.cu \
      -o "$dest/conv_bench" -lcuda) || exit 1
    strip "$dest/conv_bench" 2> /dev/null || true
  fi
  du -sh "$dest"
  exit 0
fi
carry="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
src=/tmp/convsrc; rm -rf $src; mkdir -p $src; tar -xf "$carry/src.tar" -C $src; cd $src
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
t0=$(date +%s)
if [ -x "$carry/conv_bench" ]; then
  cp "$carry/conv_bench" /tmp/conv_bench; echo "nvcc: conv_bench from the carry" > /tmp/nvcc.log
else
  (cd bench/gemm && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A conv_bench.cu -o /tmp/conv_bench -lcuda > /tmp/nvcc.log 2>&1; echo "nvcc rc $?" >> /tmp/nvcc.log) &
fi
# CNN_PRECOMPILE=1: bench.py's compiles (--compile-only) run beside step 1's, step 3 then reuses them.
cnn_work=/tmp/kiln-contraction-cnn; reuse=()
if [ "${CNN_PRECOMPILE:-0}" = 1 ]; then
  python3 bench/contraction/bench.py --kiln "$carry/kiln" --work $cnn_work --only cnn --compile-only > "$OUT/cnn_compile_log.txt" 2>&1 &
  reuse=(--reuse-built)
fi
if [ "${EDGE:-1}" = 1 ]; then
  { echo "# edge_check.py --kinds conv, KILN_COMPILE_FLAGS=${KILN_COMPILE_FLAGS:-}, commit ${KILN_COMMIT:-?}, $(date -u)"; timeout ${EDGE_T:-140} python3 bench/contraction/edge_check.py --kiln "$carry/kiln" --kinds conv ${EDGE_BF16:+--bf16-cases $EDGE_BF16} 2>&1 | grep -v Warn; } > "$OUT/edge_conv.txt"
  echo "edge done $(( $(date +%s) - t0 )) s; ok lines: $(grep -c '^ok' "$OUT/edge_conv.txt")"; grep -v "^ok" "$OUT/edge_conv.txt" | tail -8
fi
wait; tail -3 /tmp/nvcc.log
if [ "${BENCH:-1}" = 1 ]; then
  { echo "<!-- commit ${KILN_COMMIT:-?}, $(date -u), conv_bench (checks, then L2-flushed timings) -->"; timeout ${BENCH_T:-60} /tmp/conv_bench 2>&1; } > "$OUT/conv_bench.md"; echo "conv_bench rc $? at $(( $(date +%s) - t0 )) s"
  grep -c "| ok" "$OUT/conv_bench.md"; grep -E "FAIL|bad at" "$OUT/conv_bench.md" | head -12; grep -E " \| [0-9.]+ \| ([0-9.]+|-) \|$" "$OUT/conv_bench.md" | head -70
fi
timeout ${CNN_T:-110} python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --work $cnn_work ${reuse[@]+"${reuse[@]}"} --out "$OUT/res" --only cnn --tag cnn --profile > "$OUT/cnn_log.txt" 2>&1
echo "cnn rc $? at $(( $(date +%s) - t0 )) s"
grep -v "Warning\|warn(" "$OUT/cnn_log.txt" | grep -E "^(CNN|conv layer|profile|  +[0-9.]+ us|Traceback|kiln compile failed|exports)" | cut -c1-150 | head -40
left=$(( ${TOTAL_T:-300} - ($(date +%s) - t0) ))
if [ "${NCU:-0}" = 1 ] && [ $left -gt 15 ]; then
  timeout $left ncu --kernel-name "${NCU_KERNEL:-regex:conv_}" --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats /tmp/conv_bench ncu > "$OUT/ncu_128_128.txt" 2>&1
  echo "ncu rc $?"; grep -E "Duration|Throughput|Registers|Achieved Occupancy|Warp Cycles" "$OUT/ncu_128_128.txt" | head -30
fi
