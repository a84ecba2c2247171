#!/usr/bin/env bash
# One device call over binaries built on the development machine and carried (the GPU machine's
# nvcc time is device time): each step runs only if its binary is there, and writes one results
# file under $OUT naming device, date, commit and command.
#   HOST_COST=.carry/hc/host_cost        bench/gemm/host_cost.cu (what an eager Hopper call costs the host)
#   HARNESS_BIN=.carry/h16/gemm_bench_fp16  gemm_bench.cu, fp16, sm_90a: mode $HARNESS_MODE (default wg),
#                                        then mode wgsmall under compute-sanitizer memcheck and racecheck
#   AB=1                                 bench/contraction/ab_run.sh with the carried .carry/kiln
#                                        (SECTIONS, ALT, KNOB passed through; HARNESS=0)
# env: OUT, KILN_COMMIT (the commit the binaries were built from), RUN_TAG.
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr ' ' '_')
date=$(date -u +%F)
tag="${RUN_TAG:-prebuilt}"
commit="${KILN_COMMIT:-unknown}"
header() {  # title, command
  echo "# $1, run $tag"
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1); date: $(date -u '+%F %T UTC')"
  echo "- commit: $commit (binary built from it on the development machine)"
  echo "- command: $2"
  echo
}
start=$(date +%s)
if [ -x "${HOST_COST:-}" ]; then
  res="$OUT/host_cost_${device}_${date}_${tag}.md"
  { header "Host cost of an eager Hopper GEMM call, split into its parts" "$HOST_COST"
    echo '```'; timeout 120 "$HOST_COST" 2>&1; echo "exit status $?"; echo '```'; } > "$res"
  cat "$res"
fi
if [ -x "${HARNESS_BIN:-}" ]; then
  mode="${HARNESS_MODE:-wg}"
  res="$OUT/gemm_${mode}_fp16_${device}_${date}_${tag}.md"
  header "kernels/gemm harness, mode $mode (fp16)" "gemm_bench $mode OUT.md" > "$res"
  timeout 300 "$HARNESS_BIN" "$mode" "$res" > /tmp/harness.log 2>&1
  echo "harness exit status $?" | tee -a "$res"
  grep -c "| ok |" "$res" | sed 's/^/checks ok: /'
  grep "| FAIL\|| fail" "$res" | head -20
  for tool in memcheck racecheck; do
    res="$OUT/gemm_wgsmall_${tool}_${device}_${date}_${tag}.md"
    header "kernels/gemm harness under compute-sanitizer $tool, mode wgsmall (fp16)" \
      "compute-sanitizer --tool $tool --print-limit 5 gemm_bench wgsmall OUT.md; the sanitizer's summary is at the end" > "$res"
    timeout 200 compute-sanitizer --tool "$tool" --print-limit 5 "$HARNESS_BIN" wgsmall "$res" 2>&1 | tail -6 >> "$res"
    echo "$tool exit status ${PIPESTATUS[0]}" | tee -a "$res"
    tail -3 "$res"
  done
fi
echo "prebuilt steps: $(( $(date +%s) - start )) s"
if [ "${AB:-0}" = 1 ]; then
  OUT="$OUT" KILN_COMMIT="$commit" RUN_TAG="$tag" HARNESS=0 bash bench/contraction/ab_run.sh
fi
echo "total $(( $(date +%s) - start )) s"
