#!/usr/bin/env bash
# One call on a 2-GPU machine (nvidia-h200-x2) for issues 12 and 8 together:
#   1. kiln tune of the exported Gemma layer with both GPUs and all cores (bench/tune/scaling_run.sh
#      PHASE=2gpu), alone on the machine;
#   2. then at once, on disjoint halves of the machine:
#      - the same tuning with GPU 0 and cores 0-15 (PHASE=1gpu: what a one-GPU machine has);
#      - on GPU 1 and cores 16-31, bench/contraction/device_run.sh with the steps in CONTRACTION_STEPS
#        (its environment: BENCH_ONLY, EDGE_KINDS, SAN_SUITES, ...).
# Carry: .carry/tune, .carry/core (bench/tune/README.md) and .carry/kiln (bench/contraction/prepare_carry.sh).
# Results (the device tool brings back at most 8 files): $OUT/tune.md (both tuning summaries, each
# appended as its run ends), $OUT/tune_1gpu.jsonl, and device_run.sh's files in $OUT/contraction/
# (its log stays in /tmp).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-two-gpu}"
mkdir -p "$OUT/contraction"
start=$(date +%s)
OUT=/tmp/kiln-tune2 PHASE=2gpu MEM=0 bash .carry/tune/scaling_run.sh 2>&1 | tail -n 4
cat /tmp/kiln-tune2/summary.md >> "$OUT/tune.md"
echo "== both halves ($(( $(date +%s) - start )) s)"
( OUT=/tmp/kiln-tune1 PHASE=1gpu MEM=0 bash .carry/tune/scaling_run.sh > /tmp/kiln-tune1.log 2>&1
  cat /tmp/kiln-tune1/summary.md >> "$OUT/tune.md"; cp /tmp/kiln-tune1/gemma_1gpu.jsonl "$OUT/tune_1gpu.jsonl" ) &
CUDA_VISIBLE_DEVICES=1 OUT="$OUT/contraction" STEPS="${CONTRACTION_STEPS:-bench,edges,conformance,sanitizer}" \
  taskset -c 16-31 bash bench/contraction/device_run.sh > /tmp/kiln-contraction.log 2>&1
echo "contraction steps done ($(( $(date +%s) - start )) s)"; tail -n 25 /tmp/kiln-contraction.log
wait
echo "== done ($(( $(date +%s) - start )) s)"; tail -n 4 /tmp/kiln-tune1.log
