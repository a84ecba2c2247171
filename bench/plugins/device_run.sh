#!/usr/bin/env bash
# One device call for the GPU side of the adapters and the plugin benchmark:
#   1. tests/python/test_compiled_gpu.py: the CUDA library of examples/gemma_mlp.onnx (a function
#      with device workspace) through kiln.load and tvm_ffi.load_module with torch tensors;
#   2. bench/plugins/bench_plugins.py over four `kiln plugins` packages of the examples;
#   3. a build of libkiln_quant (sm_90) and a count of its TVM-FFI exports.
# Expects, carried (ignored by git), made on the development machine with the kiln of this commit:
#   .carry/tffi/gemma_cuda  kiln compile examples/gemma_mlp.onnx -o ... --target sm_90 --no-build
#   .carry/tffi/pk/{gemma_nodes,gemma_fused,cnn_nodes,cnn_fused}  kiln plugins ... --no-build
#                           (the four commands of bench/results/plugins/README.md)
#   .carry/dlpack           DLPack's header;  .whl/  the apache-tvm-ffi wheel
# Usage (repository root, GPU machine): bench/plugins/device_run.sh OUTDIR [SIZES]
set -uo pipefail
out="$1"; sizes="${2:-batch=32,seq=1024}"
carry=.carry/tffi; dl=.carry/dlpack; site=/tmp/kiln_site
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
mkdir -p "$site/kiln" "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
py_inc="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
ext="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-missing-field-initializers \
  -I include -I "$dl" -I "$py_inc" python/src/module.cpp -o "$site/kiln/_kiln$ext" || exit 1
cp python/kiln/__init__.py "$site/kiln/"
export PYTHONPATH="$site"

( timeout 150 nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC,-fvisibility=hidden -gencode=arch=compute_90,code=sm_90 \
    -I include -I "$dl" kernels/quant/w4_linear.cu -o /tmp/libkiln_quant.so > /tmp/quant_build.log 2>&1
  echo "rc=$?" >> /tmp/quant_build.log ) &
quant=$!

g="$carry/gemma_cuda"
nvcc -O3 -std=c++20 -shared -Xcompiler -fPIC -cudart shared --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 \
  -I "$g/include" -o /tmp/libgemma_mlp.so "$g/gemma_mlp.cu" "$g/kiln_module.cu" || exit 1
echo "== tests/python/test_compiled_gpu.py" | tee "$out/gpu_tests.txt"
(cd tests/python && KILN_CUDA_GEMMA_LIBRARY=/tmp/libgemma_mlp.so python3 -m pytest -q -rs -v test_compiled_gpu.py 2>&1) \
  | tee -a "$out/gpu_tests.txt"

pk="$carry/pk"
python3 bench/plugins/bench_plugins.py "$pk/gemma_nodes" "$pk/gemma_fused" "$pk/cnn_nodes" "$pk/cnn_fused" \
  --sizes "$sizes" --arch 90 --command "bench/plugins/device_run.sh \$OUT $sizes" 2>&1 | tee "$out/bench_log.txt"
for d in gemma_nodes gemma_fused cnn_nodes cnn_fused; do
  cp "$pk/$d/report.md" "$out/report_$d.md"; cp "$pk/$d/report.json" "$pk/report_$d.json"
done
tar -C "$pk" -cf "$out/reports_json.tar" report_gemma_nodes.json report_gemma_fused.json report_cnn_nodes.json report_cnn_fused.json

wait $quant
{ echo "== libkiln_quant (sm_90) TVM-FFI exports"; cat /tmp/quant_build.log
  [ -f /tmp/libkiln_quant.so ] && nm -D --defined-only /tmp/libkiln_quant.so | grep -c ' __tvm_ffi_w4' && \
  python3 -c "import tvm_ffi; m = tvm_ffi.load_module('/tmp/libkiln_quant.so'); f = m.w4_linear_nvfp4_bf16; print('tvm_ffi.load_module: w4_linear_nvfp4_bf16 ->', f)"
} 2>&1 | tee -a "$out/gpu_tests.txt"
