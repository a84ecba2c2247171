#!/usr/bin/env bash
# kiln.QuantLinear's 4-bit kernels inside TensorRT plugin packages, checked by kiln's plugin harness
# on the GPU (issue 8). No TensorRT library is needed: the harness drives each IPluginV3 itself.
#   build (dev machine, TensorRT headers at TENSORRT_ROOT): bench/quant_route/plugin_harness.sh build [KILN]
#     a Gemma-style MLP (tests/package/make_models.py, hidden 256, intermediate 512, symbolic
#     batch and seq: every projection has N % 16 == 0 and K % 128 == 0, so all three take the
#     4-bit path), `kiln quantize --format nvfp4`, then `kiln plugins --op-types QuantLinear` for
#     fp32, fp16 and bf16, built into .carry/qplug/ (ignored by git; carry it).
#   run (GPU machine): OUT=$OUT bench/quant_route/plugin_harness.sh run  -> $OUT/plugin_harness.txt
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/.carry/qplug"
case "${1:-}" in
build)
  kiln="${2:-$root/build/tools/kiln}"
  : "${TENSORRT_ROOT:?set TENSORRT_ROOT to a TensorRT 10 tree with include/NvInfer.h}"
  rm -rf "$dest" && mkdir -p "$dest"
  python3 - "$root/tests/package" "$dest/mlp.onnx" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import onnx
from make_models import mlp
onnx.save(mlp(hidden=256, inter=512), sys.argv[2])
PY
  "$kiln" quantize "$dest/mlp.onnx" -o "$dest/mlp_nvfp4.onnx" --format nvfp4
  "$kiln" plugins "$dest/mlp_nvfp4.onnx" -o "$dest/pkg" --op-types QuantLinear --target sm_90 -j 2
  grep -o "launch_linear_epilogue<kiln::quant::gpu::Format::NvFp4, [a-z_0-9]*>" "$dest"/pkg/*/*_kernels.cu | sed 's|.*/pkg/|4-bit kernels: |'
  find "$dest/pkg/build" -name CMakeFiles -type d -prune -exec rm -rf {} +  # objects: not needed to run, 25 MB
  git -C "$root" rev-parse --short HEAD > "$dest/COMMIT"
  du -sh "$dest"
  ;;
run)
  OUT="${OUT:-/tmp/qplug}"
  mkdir -p "$OUT"
  {
    echo "# kiln plugins --op-types QuantLinear (NVFP4), plugin harness on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%Y-%m-%dT%H:%MZ), kiln $(cat "$dest/COMMIT")"
    status=0
    bash "$root/tests/package/run_harness.sh" "$dest/pkg" || status=$?
    echo "harness exit $status"
  } 2>&1 | tee "$OUT/plugin_harness.txt"
  ;;
*) echo "usage: $0 build [KILN] | run" >&2; exit 2 ;;
esac
