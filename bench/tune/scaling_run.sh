#!/usr/bin/env bash
# One device call on a 2-GPU machine (issue 12): how long `kiln tune` takes on a Gemma-2B decoder
# layer exported from PyTorch, with two GPUs and all the host's cores, then with one GPU and the
# 16 cores a one-GPU machine has (taskset), same model, same trials, fresh work folders (nothing
# reused); then the memory-bound kernels tuned on both GPUs and compared (bench_tune.py) with their
# default builds, torch.compile and the copy bandwidth.
# Expects .carry/tune/ and .carry/core/ as bench/tune/README.md makes them (kiln, lib/, the
# bench/tune scripts; bench/core/bench.py, which bench_tune.py loads).
#   device call: command "OUT=$OUT bash .carry/tune/scaling_run.sh", carry [".carry/tune", ".carry/core"]
# Knobs: TOKENS (16), TRIALS (64), T2/T1 (seconds allowed to the two-GPU and one-GPU runs), MEM=0 leaves
# the memory-bound kernels out, PHASE=2gpu or 1gpu runs only that tuning run (and nothing after it),
# HALF=0 skips the run on half the host's physical cores (run where those are not cpus 0-15),
# KILN=path another kiln binary (an A/B in one call), RUN_NAME=x prefixes the runs' names and work
# folders (two kilns in one call), PATIENCE=n passes --patience n (rounds without a 1% gain before
# stopping; a high one makes both runs measure all TRIALS: one GPU's rounds are half as long, so
# with the default it may stop after 48 of 64 where two GPUs cannot).
set -uo pipefail
OUT="${OUT:-/tmp/kiln-tune-out}"
C="$PWD/.carry/tune"
mkdir -p "$OUT" /tmp/models
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1 KILN_PROGRESS=1
export CXX="${CXX:-$(command -v c++ || command -v g++)}"
export KILN_COMMIT="$(cat "$C/COMMIT" 2>/dev/null || echo unknown)"
kiln="${KILN:-$C/kiln}"
P="${RUN_NAME:-}"
TOKENS=${TOKENS:-16} TRIALS=${TRIALS:-64}
S="$OUT/summary.md"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
{
  echo "# kiln tune scaling run, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '```'
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  echo "cores: $(nproc); $(lscpu | grep -m1 'Model name'); $(lscpu | grep -m1 'Thread(s) per core'); $(lscpu | grep -m1 '^Core(s) per socket'); $(lscpu | grep -m1 '^Socket(s)')"
  lscpu -e=CPU,CORE,SOCKET 2>/dev/null | head -n 40 | paste -sd ' '  # which logical CPUs share a core (taskset 0-15 in the one-GPU run)
  nvcc --version | tail -1
  echo "kiln commit: $KILN_COMMIT; binary: $kiln; host compiler: $($CXX --version | head -1)"
  echo '```'
} > "$S"

[ -f /tmp/models/gemma_layer.onnx ] || python3 "$C/gemma_layer.py" /tmp/models/gemma_layer.onnx --tokens "$TOKENS" 2>&1 | tail -2 | tee -a "$S"

# name, taskset cpus ("" for all), gpus, seconds allowed
tune_run() {
  local name=$1 cpus=$2 gpus=$3 limit=$4 t0 rc
  t0=$(date +%s.%N)
  local pre=()
  [ -n "$cpus" ] && pre=(taskset -c "$cpus")
  timeout "$limit" "${pre[@]}" "$kiln" tune /tmp/models/gemma_layer.onnx --target sm_90 --trials "$TRIALS" --gpus "$gpus" \
    ${PATIENCE:+--patience "$PATIENCE"} -o "$OUT/gemma_${name}.jsonl" --work-dir "/tmp/tune_$name" --report "/tmp/report_$name" \
    > "/tmp/tune_$name.log" 2>&1
  rc=$?
  local t=$(python3 -c "import time,sys; print('%.1f' % (time.time() - float(sys.argv[1])))" "$t0")
  {
    echo
    echo "## $name: gpus $gpus, cpus ${cpus:-all ($(nproc))}: exit $rc, wall $t s (limit $limit s)"
    echo
    cat "/tmp/report_$name.md" 2>/dev/null
    echo '```'
    tr '\r' '\n' < "/tmp/tune_$name.log" | grep -v '^\s*$' | tail -n 6
    echo '```'
    echo "worker records and log (first round):"
    echo '```'
    for f in /tmp/tune_$name/worker*/*_round0.jsonl; do echo "-- $f"; head -n 2 "$f" | cut -c1-700; done
    for f in /tmp/tune_$name/worker*/*_round0.log; do echo "-- $f"; tail -n 5 "$f" | cut -c1-700; done
    echo '```'
    echo "where each worker's time went (every round), and each round's build by kiln tune (rounds.log):"
    echo '```'
    cat "/tmp/tune_$name/rounds.log" 2>/dev/null
    grep -H "tune-worker:" /tmp/tune_$name/worker*/*_round*.log 2>/dev/null | sed "s|/tmp/tune_$name/||"
    echo '```'
  } >> "$S"
  echo "$name: exit $rc, $t s"
}
if [ "${PHASE:-both}" != 1gpu ]; then
  echo "== two GPUs ($(elapsed) s)"
  tune_run "${P}2gpu" "" all "${T2:-150}"
fi
if [ "${PHASE:-both}" != 2gpu ]; then
  echo "== one GPU, 16 cores ($(elapsed) s)"
  tune_run "${P}1gpu" 0-15 0 "${T1:-200}"
  # Half the host as a one-GPU machine of it would be: half its physical cores, each with all its
  # hardware threads (differs from 0-15 where the host has two threads a core numbered apart).
  half=$(lscpu -p=CPU,CORE 2>/dev/null | grep -v '^#' | python3 -c "
import sys
rows = [tuple(map(int, l.split(','))) for l in sys.stdin if l.strip()]
cores = sorted({c for _, c in rows})
keep = set(cores[:len(cores) // 2])
print(','.join(str(cpu) for cpu, c in rows if c in keep))")
  if [ "${HALF:-1}" = 1 ] && [ -n "$half" ] && [ "$half" != "$(seq -s, 0 15)" ]; then
    echo "== one GPU, half the host's cores: $half ($(elapsed) s)"
    tune_run "${P}1gpu_half" "$half" 0 "${T1:-200}"
  fi
fi
for d in /tmp/tune_${P}2gpu /tmp/tune_${P}1gpu /tmp/tune_${P}1gpu_half; do
  echo "$d: $(ls "$d"/objects/*.o 2>/dev/null | wc -l) template objects, $(ls "$d"/build/cand_*.so "$d"/worker*/cand_*.so 2>/dev/null | wc -l) candidate libraries"
done | tee -a "$S"

if [ "${MEM:-1}" = 0 ] || [ "${PHASE:-both}" != both ]; then echo "== done ($(elapsed) s)" | tee -a "$S"; exit 0; fi
echo "== memory-bound kernels ($(elapsed) s)"
python3 "$C/make_models.py" /tmp/models --shapes 8192x4096 --ops layernorm_gelu,softmax > /dev/null
python3 "$C/make_models.py" /tmp/models --shapes 1024x32000 --ops softmax > /dev/null
models="/tmp/models/layernorm_gelu_8192x4096_float16.onnx /tmp/models/softmax_8192x4096_float16.onnx /tmp/models/softmax_1024x32000_float16.onnx"
for m in $models; do
  left=$(( 540 - $(elapsed) ))
  [ "$left" -lt 60 ] && { echo "skipped $m: $left s left" | tee -a "$S"; continue; }
  timeout $(( left > 100 ? 100 : left )) "$kiln" tune "$m" --target sm_90 --trials 48 --gpus all -o "$OUT/records_mem.jsonl" \
    --work-dir /tmp/tune_mem --report "/tmp/report_$(basename "$m" .onnx)" > /tmp/tune_mem.log 2>&1
  echo "tune $(basename "$m"): exit $?" | tee -a "$S"
  cat "/tmp/report_$(basename "$m" .onnx).md" >> "$S" 2>/dev/null
done
left=$(( 585 - $(elapsed) ))
if [ "$left" -gt 40 ]; then
  timeout "$left" python3 "$C/bench_tune.py" --kiln "$kiln" --records "$OUT/records_mem.jsonl" --out "$OUT" $models 2>&1 | tail -n 8
else
  echo "bench_tune skipped: $left s left" | tee -a "$S"
fi
echo "== done ($(elapsed) s)" | tee -a "$S"
