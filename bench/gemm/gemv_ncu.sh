#!/usr/bin/env bash
# ncu of the small-M kernel against the read kernel of the same bytes (by default M = 1, B [K, N] as MatMul
# weights: 16384x2048, 2048x16384, 4096x4096; `gemm_bench gemvprofile`), on the GPU machine:
# DRAM bytes and throughput, L2 read sectors and hit rate, achieved occupancy, and where the warps
# stall, so that the gemv's ~0.78 of the read kernel's rate at N = 2048 / 4096 (bench/gemm/NOTES.md,
# session 17) can be read against the read kernel's own counters.
# GEMV_PROFILE_M (1..16, default 1) and GEMV_PROFILE_B (kn, the default, or nk) choose the calls
# profiled; the third group says what the gemv's warps issue (instructions, issue slots, tensor
# pipe, L1) and why they wait when the pipes are full (math and MIO throttles); the fourth, the
# other stall reasons per issue (short scoreboard, fixed-latency wait, not selected, LG throttle...).
#   bench/gemm/gemv_ncu.sh [results.md]     env: GEMM_COMMIT, GEMV_PROFILE_M, GEMV_PROFILE_B
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../results/gemv_ncu_$(date -u +%F).md}
build=${GEMM_BUILD:-/tmp/gemm_bench_build}
mkdir -p "$build"
nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -DBENCH_BF16=0 -DBENCH_GEMV_ONLY=1 -DBENCH_TC_ALL=1 \
  "$here/gemm_bench.cu" -o "$build/gemm_bench_gemv" -lcublas || { echo "build failed"; exit 2; }
# Three groups, one ncu run each, so that a metric this ncu lacks costs only its group.
groups=(
  gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
  lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_op_read_hit_rate.pct,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
  smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio
  $(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' short_scoreboard wait not_selected selected lg_throttle dispatch_stall no_instruction branch_resolving drain imc_miss tex_throttle sleeping | sed 's/,$//')
)
m=${GEMV_PROFILE_M:-1}
layout=${GEMV_PROFILE_B:-kn}
[ "$layout" = kn ] || [ "$layout" = nk ] || { echo "GEMV_PROFILE_B must be kn or nk, not $layout"; exit 2; }
{
  if [ "$layout" = kn ]; then b_text="[K, N]"; else b_text="[N, K]"; fi
  echo "# ncu: small-M kernel against the read kernel of the same bytes (fp16, M = $m, B $b_text)"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  echo "- date: $(date -u '+%F %T UTC'); commit: ${GEMM_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "- command: GEMV_PROFILE_M=$m GEMV_PROFILE_B=$layout bench/gemm/gemv_ncu.sh (ncu --metrics <group> -k regex:'read_kernel|gemv' --csv gemm_bench gemvprofile, per group below);"
  echo "  per shape (16384x2048, 2048x16384, 4096x4096) two read-kernel launches, then two of the default gemv (<16,4> above N = 4096, else <16,16>)"
  for metrics in "${groups[@]}"; do
    echo
    echo '```'
    GEMV_PROFILE_M=$m GEMV_PROFILE_B=$layout ncu --metrics "$metrics" -k regex:'read_kernel|gemv' --csv "$build/gemm_bench_gemv" gemvprofile 2>&1 |
      grep -v '^==PROF==' | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
# The harness prints a line of its own before ncu'"'"'s table: the header is the first row naming "Metric Name".
at = next((i for i, r in enumerate(rows) if "Metric Name" in r), None)
if at is None:
    print("\n".join(",".join(r) for r in rows)); sys.exit(0)
for r in rows[:at]:
    print(",".join(r))
head, rows = rows[at], rows[at:]
i_id, i_k, i_m, i_u, i_v = (head.index(c) for c in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"))
for r in rows[1:]:
    print(f"{r[i_id]:>3} {r[i_k][:40]:40} {r[i_m]:72} {r[i_v]:>14} {r[i_u]}")
'
    echo '```'
  done
} > "$out"
cat "$out"
