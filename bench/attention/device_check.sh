#!/usr/bin/env bash
# One GPU call: build attn_check for sm_90, check every case against the fp32 CPU reference, time
# the kernel only if every check passes, then time torch SDPA on the same shapes.
# Run from the repository root of a tree holding kernels/gemm/attention.cuh and bench/attention/.
set -uo pipefail
OUT="${OUT:-/tmp/attn_out}"; mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "commit ${KILN_COMMIT:-unknown}"
  nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I kernels/gemm bench/attention/attn_check.cu -o /tmp/attn_check || exit 1
  /tmp/attn_check && python3 bench/attention/sdpa_time.py
} 2>&1 | tee "$OUT/attention_check.txt"
