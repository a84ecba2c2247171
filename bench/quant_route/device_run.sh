#!/usr/bin/env bash
# One GPU call for kiln.QuantLinear routed to kernels/quant/ (issue 8): the nvfp4 section of
# bench/contraction/bench.py (the Gemma MLP block exported from PyTorch, `kiln quantize --format
# nvfp4`, `kiln compile`, checked against torch, then timed against the fp16 block under torch
# eager and torch.compile), with the kiln binary of .carry/quantroute (a tar of this branch's
# bench/ and the stripped kiln + libs, made by bench/quant_route/prepare_carry.sh); and/or
# bench/quant_route/plugin_check.py (a `kiln plugins --op-types QuantLinear` package's kernel
# library built, checked against torch, timed against torch eager fp16).
# bench/quant_route/edge_check.py: NVFP4/INT4 x fp16/bf16 layers off the kernels' tiles at M on
# both sides of the GEMV/GEMM switch, against torch on the quantized bytes.
# STEPS=bench,edges,plugin chooses the steps (default bench); BENCH_ARGS more bench.py arguments.
set -uo pipefail
OUT="${OUT:-/tmp/quantroute-out}"
mkdir -p "$OUT"
carry="$PWD/.carry/quantroute"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
work=/tmp/quantroute && rm -rf "$work" && mkdir -p "$work" && tar -xf "$carry/src.tar" -C "$work"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/device.txt"
cd "$work"
if [[ "${STEPS:-bench}" == *bench* ]]; then
  timeout 250 python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$OUT" --only nvfp4 --tag nvfp4 \
    --work /tmp/quantroute-work ${BENCH_ARGS:-} > "$OUT/contraction_log.txt" 2>&1 || echo "bench exit $?"
  grep -E "^(Gemma|kiln compile failed|Traceback|  File|profile| +[0-9.]+ us )" "$OUT/contraction_log.txt" | cut -c1-200 | tail -n 60
fi
if [[ "${STEPS:-bench}" == *edges* ]]; then
  timeout 240 python3 bench/quant_route/edge_check.py --kiln "$carry/kiln" --work /tmp/quantroute-edges > "$OUT/edge_check.txt" 2>&1 ||
    echo "edge check exit $?"
  tail -n 40 "$OUT/edge_check.txt"
fi
if [[ "${STEPS:-bench}" == *plugin* ]]; then
  timeout 150 python3 bench/quant_route/plugin_check.py --kiln "$carry/kiln" --work /tmp/quantroute-plugin > "$OUT/plugin_check.txt" 2>&1 ||
    echo "plugin check exit $?"
  cat "$OUT/plugin_check.txt" | tail -n 20
fi
[[ -d /tmp/quantroute-work/mlp_nvfp4 ]] && tar --exclude="*.so" --exclude=include -cf "$OUT/generated_mlp_nvfp4.tar" -C /tmp/quantroute-work mlp_nvfp4 mlp_nvfp4.log 2>/dev/null
grep -n "// kernel\|launch_linear_epilogue" /tmp/quantroute-work/mlp_nvfp4/*.cu 2>/dev/null | cut -c1-220 | head -8
