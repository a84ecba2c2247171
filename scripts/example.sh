#!/usr/bin/env bash
# The main job on the example model shipped in examples/ (README's first command, after
# ./setup.sh): build kiln, show what it infers for the model, quantize its MLP weights to NVFP4,
# and generate (and, with nvcc, build) kernels for it. Outputs go to out/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${KILN_BUILD_DIR:-$root/build}"
model="examples/gemma_mlp.onnx"
mkdir -p out

echo "== building kiln ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$build" kiln
kiln="$build/tools/kiln"

echo "== kiln inspect $model"
"$kiln" inspect "$model"

echo "== kiln quantize $model --format nvfp4 -o out/gemma_mlp.nvfp4.onnx"
"$kiln" quantize "$model" --format nvfp4 -o out/gemma_mlp.nvfp4.onnx

if "$kiln" compile --help >/dev/null 2>&1; then
  echo "== kiln compile $model -o out/gemma_mlp"
  "$kiln" compile "$model" -o out/gemma_mlp
fi
