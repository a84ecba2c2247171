#!/usr/bin/env bash
# One GPU call for the fused-attention lowering (issue 8), from the repository root of the GPU
# machine with .carry/attn/ filled by bench/attention/prepare_lowering_carry.sh (kiln, its
# libraries, src.tar = this branch's bench/, kernels/gemm/, tests/conformance/):
#   1. STEPS has "kernel": bench/attention/device_check.sh (the kernel against its CPU reference,
#      then timed with torch SDPA);
#   2. "edges": edge_check.py --kinds attention,attention64 (the fused node's fallback and
#      tensor-core paths, odd sequence lengths, fp16/bf16, vs fp32 torch);
#   3. "vit": bench.py --only vit --profile (checked vs the fp32 module, then timed with
#      torch.compile; per-kernel profile) and the ViT's `kiln inspect --kernels`;
#   4. "conformance": kiln test-onnx --backend cuda on the onnx wheel's fp16/bf16 attention cases.
# Results under $OUT. KILN_COMMIT names the commit.
set -uo pipefail
carry="$PWD/.carry/attn"
OUT="${OUT:-/tmp/attn_out}"; mkdir -p "$OUT"
src=/tmp/attn_src; rm -rf "$src"; mkdir -p "$src"; tar -xf "$carry/src.tar" -C "$src"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
steps="${STEPS:-kernel,edges,vit,conformance}"
cd "$src"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
echo "commit ${KILN_COMMIT:-unknown}, $(date -u)" | tee -a "$OUT/device.txt"
if [[ ",$steps," == *",kernel,"* ]]; then
  OUT="$OUT" timeout 100 bash bench/attention/device_check.sh > /dev/null 2>&1; tail -n 25 "$OUT/attention_check.txt"
fi
if [[ ",$steps," == *",edges,"* ]]; then
  timeout 90 python3 bench/contraction/edge_check.py --kiln "$carry/kiln" --kinds attention,attention64 > "$OUT/edge_attention.txt" 2>&1
  echo "edge_check exit $?"; tail -n 30 "$OUT/edge_attention.txt"
fi
if [[ ",$steps," == *",vit,"* ]]; then
  timeout 150 python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$OUT" --only vit --profile --tag vit \
    > "$OUT/vit_log.txt" 2>&1
  echo "bench exit $?"; grep -v "Warning\|warn(" "$OUT/vit_log.txt" | tail -n 60
  "$carry/kiln" inspect --kernels /tmp/kiln-contraction/vit.onnx 2>&1 | sed -n '/^kernels/,$p' | cut -c1-260 > "$OUT/vit_kernels.txt"
  cat "$OUT/vit_kernels.txt"
fi
if [[ ",$steps," == *",conformance,"* ]]; then
  python3 tests/conformance/onnx_wheel_cases.py /tmp/attn_wheel > /dev/null 2>&1
  cases=$(ls -d /tmp/attn_wheel/*attention* | grep -E "fp16|bf16")
  timeout 60 "$carry/kiln" test-onnx $cases --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --cuda-work-dir /tmp/attn_cuda \
    --skip-list tests/conformance/onnx_wheel_known_bad.txt -v > "$OUT/cuda_attention_cases.txt" 2>&1
  echo "conformance exit $?"; grep -v '^PASS' "$OUT/cuda_attention_cases.txt" | tail -n 20
fi
