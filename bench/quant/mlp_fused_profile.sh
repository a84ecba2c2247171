#!/usr/bin/env bash
# ncu of one Gemma-2B MLP layer at M = 1 (nvfp4, bf16): the fused kernel against the two kernels
# of KILN_QUANT_MLP_FUSED=0 (bench/quant/mlp_fused.py --profile launches each path twice).
#   usage: LIB=libkiln_quant.so bench/quant/mlp_fused_profile.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?output directory}
mkdir -p "$OUT"
ncu --clock-control none -k regex:'w4_mlp_fused|w4_gemv' --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
  --csv --page details python3 bench/quant/mlp_fused.py --lib "$LIB" --profile > "$OUT/ncu_mlp_fused.csv" 2> "$OUT/ncu_mlp_fused.err" || echo "ncu failed: $?"
python3 - "$OUT/ncu_mlp_fused.csv" > "$OUT/ncu_mlp_fused.md" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
cols = rows[head]
want = ("Duration", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__throughput", "lts__t_sector_hit_rate", "smsp__inst_executed.sum",
        "smsp__issue_active", "Achieved Occupancy", "Memory Throughput", "Compute (SM) Throughput", "Stall", "Warp Cycles Per Issued")
ki, ni, vi, ui = cols.index("Kernel Name"), cols.index("Metric Name"), cols.index("Metric Value"), cols.index("Metric Unit")
ii = cols.index("ID")
last = None
for r in rows[head + 1:]:
    if len(r) <= vi:
        continue
    if r[ii] != last:
        print(f"\n### launch {r[ii]}: {r[ki][:110]}")
        last = r[ii]
    if any(w in r[ni] for w in want):
        print(f"- {r[ni]}: {r[vi]} {r[ui]}")
PY
