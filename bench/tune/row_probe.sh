#!/usr/bin/env bash
# Issue 12's row-kernel probe (row_probe.cu): launch grids and hand-edited LayerNorm+GELU rows
# against the kernels kiln generates, timed in one process on one GPU.
#   build (dev machine, no GPU needed): bench/tune/row_probe.sh build [KILN (default build/tools/kiln)]
#     writes the models (make_models.py), the kernels kiln generates for them with the records
#     below, and one probe binary per kernel into .carry/probe/ (ignored by git; carry it).
#   run (GPU machine): OUT=$OUT bench/tune/row_probe.sh run   -> $OUT/row_probe.md
# Records: s16c's best knobs (ab_records_s16c.jsonl), and for softmax 1024x32000 another row
# width (512 threads, 128 cached bytes) written here with the same kernel key; the ln_tuned
# variants take s27f's records (64 threads). Transform i32: the generated kernel's index
# arithmetic in 32 bits (int64_t -> int and no L suffixes inside the __global__ function), a
# probe of what 32-bit indexing in generated code would give. Transform fastreduce: the prologue's
# block_allreduce without its leading barrier and with up to 8 warps' partials summed in order by
# every thread (a probe of a cheaper reduction). The oldreduce copies of runs s28d, s28h and s28i
# (the one-barrier reduction of kiln 61bd4be..6fcc2d0 put back to main's) are in this script at
# 69d0d8b. The *_s28c variants take s28c's records, the *_default ones kiln's default schedule.
# VARIANTS="a b" builds only those.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
probe="$root/.carry/probe"
case "${1:-}" in
build)
  kiln="${2:-$root/build/tools/kiln}"
  rm -rf "$probe" && mkdir -p "$probe/models" "$probe/bin"
  python3 "$root/bench/tune/make_models.py" "$probe/models" --shapes 8192x4096 --ops layernorm_gelu,softmax > /dev/null
  python3 "$root/bench/tune/make_models.py" "$probe/models" --shapes 1024x32000 --ops softmax > /dev/null
  # name | model | records transform (knobs of the 1024x32000 softmax, or s27f) | kernel | op | rows | cols | threads | source transform
  all_variants=(
    "ln_8192x4096|layernorm_gelu_8192x4096_float16|-|layernorm_gelu_k0_y|LAYERNORM_GELU|8192|4096|128|-"
    "softmax_8192x4096|softmax_8192x4096_float16|-|softmax_k0_y|SOFTMAX|8192|4096|128|-"
    "softmax_1024x32000|softmax_1024x32000_float16|-|softmax_k0_y|SOFTMAX|1024|32000|256|-"
    "softmax_1024x32000_t512|softmax_1024x32000_float16|512,128|softmax_k0_y|SOFTMAX|1024|32000|512|-"
    "ln_tuned|layernorm_gelu_8192x4096_float16|s27f|layernorm_gelu_k0_y|LAYERNORM_GELU|8192|4096|64|-"
    "ln_tuned_i32|layernorm_gelu_8192x4096_float16|s27f|layernorm_gelu_k0_y|LAYERNORM_GELU|8192|4096|64|i32"
    "ln_tuned_fastreduce|layernorm_gelu_8192x4096_float16|s27f|layernorm_gelu_k0_y|LAYERNORM_GELU|8192|4096|64|fastreduce"
    "ln_s28c|layernorm_gelu_8192x4096_float16|s28c|layernorm_gelu_k0_y|LAYERNORM_GELU|8192|4096|64|-"
    "ln_default|layernorm_gelu_8192x4096_float16|default|layernorm_gelu_k0_y|LAYERNORM_GELU|8192|4096|256|-"
    "softmax_8192x4096_default|softmax_8192x4096_float16|default|softmax_k0_y|SOFTMAX|8192|4096|256|-"
    "softmax_8192x4096_s28c|softmax_8192x4096_float16|s28c|softmax_k0_y|SOFTMAX|8192|4096|64|-"
    "softmax_1024x32000_s28c|softmax_1024x32000_float16|s28c|softmax_k0_y|SOFTMAX|1024|32000|512|-"
  )
  variants=()
  for v in "${all_variants[@]}"; do
    [ -z "${VARIANTS:-}" ] || [[ " $VARIANTS " == *" ${v%%|*} "* ]] && variants+=("$v")
  done
  pids=()
  for v in "${variants[@]}"; do
    IFS='|' read -r name model knobs kernel op rows cols threads transform <<< "$v"
    records="$root/bench/tune/ab_records_s16c.jsonl"
    if [ "$knobs" = s27f ]; then
      records="$root/bench/results/tune_records_H200_2026-11-29_s27f_3148e60.jsonl"
    elif [ "$knobs" = default ]; then
      records="$probe/records_empty.jsonl" && : > "$records"  # no record: kiln's default schedule
    elif [ "$knobs" = s28c ]; then
      records="$root/bench/results/tune_records_H200_2026-11-29_s28c_61bd4be.jsonl"
    elif [ "$knobs" != - ]; then
      records="$probe/records_$name.jsonl"
      python3 - "$root/bench/tune/ab_records_s16c.jsonl" "$records" "$knobs" <<'PY'
import json, sys
src, dst, knobs = sys.argv[1:]
threads, cache = (int(v) for v in knobs.split(","))
with open(src) as f, open(dst, "w") as out:
    for line in f:
        r = json.loads(line)
        if r["shape"].startswith("1024x32000"):
            r["knobs"].update(row_threads=threads, row_cache_bytes=cache)
        out.write(json.dumps(r) + "\n")
PY
    fi
    "$kiln" compile "$probe/models/$model.onnx" -o "$probe/src_$name" --no-build --records "$records" > "$probe/src_$name.log"
    grep -q "__launch_bounds__($threads)" "$probe/src_$name/"*.cu || { echo "$name: the generated kernel is not $threads threads wide" >&2; exit 1; }
    src="$(ls "$probe/src_$name"/*.cu | grep -v kiln_module.cu)"
    if [ "$transform" = i32 ]; then
      perl -pe 'if (/^__global__/ .. /^}/) { s/int64_t/int/g; s/(\d)L\b/$1/g }' \
        "$src" > "$src.i32" && mv "$src.i32" "$src"
      grep -q "for (int i0_i1_f" "$src" || { echo "$name: the i32 transform did not apply" >&2; exit 1; }
    fi
    if [ "$transform" = fastreduce ]; then
      python3 - "$probe/src_$name/include/kiln/codegen/runtime/kiln_cuda.cuh" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
old = """  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  return warp_allreduce<Kind>(v);"""
new = """  if (lane == 0) partial[warp] = v;  // probe: no leading barrier (the generated row has one before each reduction)
  __syncthreads();
  if (warps <= 8) {  // probe: a few partials summed in order by every thread, not a 32-lane butterfly
    v = partial[0];
    for (int w = 1; w < warps; ++w) v = combine<Kind>(v, partial[w]);
    return v;
  }
  v = lane < warps ? partial[lane] : identity;
  return warp_allreduce<Kind>(v);"""
assert old in text, "block_allreduce changed: update the fastreduce transform"
open(path, "w").write(text.replace(old, new))
PY
    fi
    nvcc -O3 -std=c++20 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -DKILN_GEMM_SM90A \
      -I "$probe/src_$name/include" -DGENERATED="\"$src\"" -DKERNEL="$kernel" -DOP_$op -DROWS="$rows" -DCOLS="$cols" \
      -DTHREADS="$threads" -o "$probe/bin/$name" "$root/bench/tune/row_probe.cu" "$probe/src_$name/kiln_module.cu" &
    pids+=($!)
    if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  git -C "$root" rev-parse --short HEAD > "$probe/COMMIT"
  du -sh "$probe"
  ;;
run)
  OUT="${OUT:-/tmp/row-probe}"
  mkdir -p "$OUT"
  export PATH="/usr/local/cuda/bin:$PATH"
  {
    echo "# row probe on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%Y-%m-%dT%H:%MZ), kiln $(cat "$probe/COMMIT")"
    for b in "$probe"/bin/*; do
      echo; echo "## $(basename "$b")"; echo
      "$b" || echo "(exit $?)"
    done
    # NCU="name ...": ncu of those binaries' generated kernel at a block per row (variant 3).
    for name in ${NCU:-}; do
      echo; echo "## ncu: $name, generated kernel, a block per row"; echo; echo '```'
      PROBE_PROFILE=3 ncu --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section SchedulerStats --section WarpStateStats --section InstructionStats \
        --section MemoryWorkloadAnalysis "$probe/bin/$name" 2>&1 | grep -v "^==PROF==" || echo "(ncu exit $?)"
      echo '```'
    done
  } 2>&1 | tee "$OUT/row_probe.md"
  ;;
*) echo "usage: $0 build [KILN] | run" >&2; exit 2 ;;
esac
