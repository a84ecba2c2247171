#!/usr/bin/env bash
# One device call: build bench/gemm/wgmma_probe.cu, run it, then ncu one launch of the store
# epilogue at 1576x768x768 (speed of light, warp states, the SASS lines with the most stall
# samples). Results: $OUT/wgmma_probe_<device>_<date><tag>.md.  env: RUN_TAG, KILN_COMMIT.
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | tr ' ' '_')
res="$OUT/wgmma_probe_${device}_$(date -u +%F)${RUN_TAG:+_$RUN_TAG}.md"
build=/tmp/wgmma_probe
mkdir -p $build
cmd="nvcc -O3 -std=c++17 -lineinfo -gencode arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A -I kernels/gemm bench/gemm/wgmma_probe.cu -o $build/probe -lcublas"
{
  echo "# wgmma probe: where the Hopper GEMM's time goes at short K"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1)"
  echo "- date: $(date -u '+%F %T UTC')"
  echo "- commit: ${KILN_COMMIT:-unknown}"
  echo "- command: $cmd && $build/probe (cold: median of 20 single launches after an L2 flush; warm: mean of 50 back-to-back)"
  echo
} > "$res"
if [ -x "${PROBE_BIN:-}" ]; then cp "$PROBE_BIN" $build/probe; echo "(binary built on the development machine with that command)" >> "$res"
else $cmd || { echo "build failed"; exit 2; }; fi
timeout ${PROBE_TIMEOUT:-240} $build/probe >> "$res" 2>&1
echo "probe exit status $?" | tee -a "$res"
if [ "${PROBE_SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    echo "## compute-sanitizer --tool $tool $build/probe small" | tee -a "$res"
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 5 $build/probe small 2>&1 | tail -4 | tee -a "$res"
    echo "exit status: ${PIPESTATUS[0]}" | tee -a "$res"
  done
fi
if [ "${PROBE_NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  timeout 200 ncu --set full --import-source yes -k regex:wgmma_gemm_kernel -c 1 -o $build/rep -f $build/probe ncu > /dev/null 2>&1
  {
    echo; echo '## ncu, store epilogue, 1576x768x768, wgmma<128,128,6,pingpong>'; echo '```'
    ncu -i $build/rep.ncu-rep --page details --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy 2>&1 | grep -v "^    ---\|OPT\|INF\|WRN\|^          " | head -90
    echo '```'
  } >> "$res"
  ncu -i $build/rep.ncu-rep --page source --csv --print-source sass > $build/source.csv 2>/dev/null
  python3 - "$build/source.csv" >> "$res" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr = None
for i, r in enumerate(rows):
    if any("Source" == c or c.startswith("# Address") or c == "Address" for c in r):
        hdr, body = r, rows[i + 1:]
        break
if hdr is None:
    print("\n(no source table)"); print("\n".join(",".join(r) for r in rows[:5])); sys.exit()
print("\n## SASS lines with the most stall samples\n")
print("columns:", ", ".join(hdr[:40]))
def num(s):
    try: return float(s.replace(",", ""))
    except ValueError: return 0.0
key = next((j for j, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All")), None)
if key is None:
    print("(no stall sampling column)"); sys.exit()
total = sum(num(r[key]) for r in body if len(r) > key)
print(f"\ntotal samples {total:.0f}\n")
src = next((j for j, c in enumerate(hdr) if c == "Source"), 1)
top = sorted((r for r in body if len(r) > key), key=lambda r: -num(r[key]))[:40]
reasons = [j for j, c in enumerate(hdr) if c.startswith("stall_") or "Stall" in c and "Sampling" not in c]
for r in top:
    print(f"{num(r[key]):7.0f} {100*num(r[key])/max(total,1):5.1f}%  {r[0]:>8}  {r[src][:90]}")
PY
fi
