#!/usr/bin/env bash
# Builds the contraction-template harness (one binary per dtype, compiled in parallel), checks
# every configuration on edge shapes, then checks and times the Linear/MatMul shapes against
# cuBLAS and the read ceiling, appending everything to one results file.
#   bench/gemm/run.sh [results.md]      env: GEMM_ARCH (default 90; 90a builds the Hopper kernel too), GEMM_COMMIT,
#                                       GEMM_SANITIZE=1, GEMM_WERROR=1, GEMM_TIMEOUT (s per binary, 150),
#                                       GEMM_MODE (all | tc: every check, then only the M >= 816 timings |
#                                       wg: the Hopper kernel's checks and timings |
#                                       gemv: builds and runs only the small-M checks and timings), GEMM_TC_ALL=0 (build only
#                                       the variant-1 configurations mode wg uses: faster), GEMM_STAGE (build: only build the
#                                       binaries; run: only run those an earlier build left in GEMM_BUILD; default both)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../results/gemm_$(date -u +%F).md}
arch=${GEMM_ARCH:-90}
build=${GEMM_BUILD:-/tmp/gemm_bench_build}
mkdir -p "$build"
pids=()
gemv_only=0
[ "${GEMM_MODE:-all}" = gemv ] && gemv_only=1
stage=${GEMM_STAGE:-both}
for bf in 0 1; do
  [ "$stage" = run ] && break
  nvcc -O3 -std=c++17 -gencode arch=compute_$arch,code=sm_$arch ${GEMM_WERROR:+--Werror=all-warnings} -DBENCH_BF16=$bf -DBENCH_GEMV_ONLY=$gemv_only \
    $([ "$arch" = 90a ] && echo -DKILN_GEMM_SM90A) -DBENCH_TC_ALL=${GEMM_TC_ALL:-1} \
    "$here/gemm_bench.cu" -o "$build/gemm_bench_$bf" -lcublas &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "build failed"; exit 2; }; done
[ "$stage" = build ] && exit 0
commit=${GEMM_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)}
{
  echo "# kernels/gemm: check-then-time"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)"
  echo "- date: $(date -u '+%F %T UTC')"
  echo "- commit: $commit"
  echo "- command: bench/gemm/run.sh (nvcc -O3 -std=c++17 -gencode arch=compute_$arch,code=sm_$arch -DBENCH_BF16=0/1 -DBENCH_GEMV_ONLY=$gemv_only gemm_bench.cu -lcublas$([ "$arch" = 90a ] && echo ' -DKILN_GEMM_SM90A') -DBENCH_TC_ALL=${GEMM_TC_ALL:-1}; gemm_bench ${GEMM_MODE:-all})"
  [ "$stage" = run ] && echo "- binaries: built earlier in $build (GEMM_STAGE=run): the nvcc line above holds only if GEMM_ARCH and GEMM_TC_ALL are those of that build"
} > "$out"
status=0
for bf in 0 1; do timeout "${GEMM_TIMEOUT:-150}" "$build/gemm_bench_$bf" "${GEMM_MODE:-all}" "$out" || status=1; done
if [ "${GEMM_SANITIZE:-0}" = 1 ]; then
  small=small
  [ "$gemv_only" = 1 ] && small=gemv-small
  for tool in memcheck racecheck; do
    echo "## compute-sanitizer --tool $tool (fp16, the edge checks under 2M MACs: gemm_bench $small)" | tee -a "$out"
    timeout 60 compute-sanitizer --tool $tool --print-limit 5 "$build/gemm_bench_0" $small 2>&1 | tail -5 | tee -a "$out"
  done
fi
exit $status
