#!/usr/bin/env bash
# ncu profile of the M >= 17 GEMM variants (nvfp4, bf16; bench/quant/profile.py checks each call
# first) and the SASS opcode histogram of GEMM variant 4's kernel (nvfp4, bf16, 64 tokens).
#   usage: LIB=<libkiln_quant.so> OUT=<dir> bench/quant/profile_gemm.sh
# KILN_PROFILE_RUNS picks the variants and M (default g3:51,g4:51,g3:816,g4:816).
set -euo pipefail
cd "$(dirname "$0")/../.."
export KILN_PROFILE_RUNS=${KILN_PROFILE_RUNS:-g3:51,g4:51,g3:816,g4:816}
timeout "${NCU_TIMEOUT:-150}" ncu --clock-control none -k regex:w4_wgmma --section WarpStateStats \
  --metrics smsp__inst_executed.sum,smsp__thread_inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  --page raw --csv --print-units base python3 bench/quant/profile.py --lib "$LIB" > "$OUT/ncu_gemm.csv" || echo "ncu failed: $?"
python3 bench/quant/profile.py --report "$OUT/ncu_gemm.csv" --out "$OUT/ncu_gemm.md" || echo "ncu report failed"
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$LIB" | python3 -c '
import collections, re, sys
text = sys.stdin.read()
name = "_ZN4kiln5quant3gpu18w4_wgmma_rs_kernelILNS1_6FormatE0E13__nv_bfloat16Li64E"
i = text.find("Function : " + name)
body = text[i:text.find("Function : ", i + 10)] if i >= 0 else ""
ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", body))
print("GEMM variant 4 nvfp4 bf16 BN=64 SASS:", sum(ops.values()), "instructions;", ", ".join(f"{k} {v}" for k, v in ops.most_common(24)))
' | tee "$OUT/sass_gemm4.txt"
fi
