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

echo "== kiln compile $model -o out/gemma_mlp_cpu --target cpu   (C++ reference kernels, built with the host compiler)"
rm -rf out/gemma_mlp_cpu
"$kiln" compile "$model" -o out/gemma_mlp_cpu --target cpu

echo "== kiln compile $model -o out/gemma_mlp_cuda --target sm_90,sm_110   (CUDA kernels, built with nvcc)"
rm -rf out/gemma_mlp_cuda
"$kiln" compile "$model" -o out/gemma_mlp_cuda --target sm_90,sm_110
ls out/gemma_mlp_cuda
