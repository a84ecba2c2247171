#!/usr/bin/env bash
# The one GPU call of issue 10, run from the repository root on the GPU machine with
# .carry/runtime/ holding: kiln (built on the development machine), lib/ (libkiln_runtime and the
# non-system libraries kiln needs), include/ (the runtime headers, DLPack), bench/ (this folder).
#   1. export the Gemma MLP block with torch (opset 17), its input and eager output;
#   2. kiln compile --model --target sm_90 (nvcc);
#   3. bench_runtime: checks (plain, graph capture, replay) and times, 4 threads x 4 streams;
#   4. ncu: the kernels' own times of one run (their sum is what graph replay is compared with);
#   5. torch.compile(mode="reduce-overhead") of the same block, timed in the same run.
# Writes $OUT/runtime_<device>_<date>.md.
set -uo pipefail
C="$PWD/.carry/runtime"
OUT="${OUT:-/tmp/kiln_rt_out}"
W=/tmp/kiln_rt
mkdir -p "$OUT" "$W"
export LD_LIBRARY_PATH="$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
export PYTHONUNBUFFERED=1
device="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "device: $device"
t0=$(date +%s)
# DTYPE=float16: the fp16 block (its contractions on the tensor-core templates).
dtype_flag=$([ "${DTYPE:-float32}" = float16 ] && echo --float16)
python3 "$C/bench/export_gemma_mlp.py" "$W" $dtype_flag > "$OUT/export.txt" 2>&1
tail -3 "$OUT/export.txt"
echo "[$(( $(date +%s) - t0 ))s] exported"
"$C/kiln" compile "$W/gemma_mlp_block.onnx" -o "$W/lib" --target sm_90 --model > "$OUT/compile.txt" 2>&1 ||
  "$C/kiln" inspect "$W/gemma_mlp_block.onnx" > "$OUT/inspect.txt" 2>&1
tail -4 "$OUT/compile.txt"
echo "[$(( $(date +%s) - t0 ))s] compiled"
g++ -O2 -std=c++20 "$C/bench/bench_runtime.cpp" -I"$C/include" -I"$C/include/kiln/third_party" -I/usr/local/cuda/include \
  -L"$C/lib" -lkiln_runtime -L/usr/local/cuda/lib64 -lcudart -lpthread -o "$W/bench_runtime" || exit 1
lib="$W/lib/libgemma_mlp_block.so"
"$W/bench_runtime" "$lib" "$W/x.bin" "$W/y_ref.bin" 2>&1 | tee "$OUT/bench_runtime.txt"
echo "[$(( $(date +%s) - t0 ))s] benched"
timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum "$W/bench_runtime" "$lib" "$W/x.bin" \
  "$W/y_ref.bin" --once > "$OUT/ncu.csv" 2> "$OUT/ncu_err.txt"
tail -3 "$OUT/ncu_err.txt"
echo "[$(( $(date +%s) - t0 ))s] ncu"
timeout 150 python3 "$C/bench/export_gemma_mlp.py" "$W" $dtype_flag --time 2>&1 | tail -2
echo "[$(( $(date +%s) - t0 ))s] torch"
cp "$W/torch.json" "$OUT/" 2>/dev/null
cp "$W/lib/main.cu" "$OUT/" 2>/dev/null
python3 "$C/bench/summarize.py" "$OUT" "$device" "${KILN_COMMIT:-unknown}" "${DTYPE:-float32}"
