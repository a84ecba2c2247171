#!/usr/bin/env bash
# One call on a 2-GPU machine (nvidia-h200-x2) for issues 12 and 8 together:
#   1. kiln tune of the exported Gemma layer with both GPUs and all cores (bench/tune/scaling_run.sh
#      PHASE=2gpu), alone on the machine;
#   2. then at once, on disjoint halves of the machine:
#      - the same tuning with GPU 0 and cores 0-15 (PHASE=1gpu: what a one-GPU machine has);
#      - on GPU 1 and cores 16-31, bench/contraction/device_run.sh with the steps in CONTRACTION_STEPS
#        (its environment: BENCH_ONLY, EDGE_KINDS, SAN_SUITES, ...).
# Carry: .carry/tune, .carry/core (bench/tune/README.md) and .carry/kiln (bench/contraction/prepare_carry.sh).
# Results: $OUT/tune2/, $OUT/tune1/ (summary.md, records), $OUT/contraction/ (device_run.sh's files).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-two-gpu}"
mkdir -p "$OUT/tune2" "$OUT/tune1" "$OUT/contraction"
start=$(date +%s)
OUT="$OUT/tune2" PHASE=2gpu MEM=0 bash .carry/tune/scaling_run.sh 2>&1 | tail -n 4
echo "== both halves ($(( $(date +%s) - start )) s)"
OUT="$OUT/tune1" PHASE=1gpu MEM=0 bash .carry/tune/scaling_run.sh > "$OUT/tune1/log.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=1 OUT="$OUT/contraction" STEPS="${CONTRACTION_STEPS:-bench,edges,conformance,sanitizer}" \
  taskset -c 16-31 bash bench/contraction/device_run.sh > "$OUT/contraction/log.txt" 2>&1
echo "contraction steps done ($(( $(date +%s) - start )) s)"; tail -n 25 "$OUT/contraction/log.txt"
wait
echo "== done ($(( $(date +%s) - start )) s)"; tail -n 4 "$OUT/tune1/log.txt"
