#!/usr/bin/env bash
# Builds the bench library and the kiln extension on the GPU machine (no pip, no network) and runs
# bench_ffi.py. Expects DLPack's header under $DLPACK_INCLUDE (default .carry/dlpack) and, for the
# tvm_ffi row, wheels under .whl/. Usage: bench/ffi/run_device.sh OUTDIR COMMIT
set -euo pipefail
out="$1"; commit="${2:-unknown}"
dl="${DLPACK_INCLUDE:-.carry/dlpack}"
work=/tmp/kiln_bench; mkdir -p "$work/site/kiln"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$work/site" .whl/*.whl
fi
nvcc -O2 -std=c++20 -arch=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden -I include -I "$dl" \
  bench/ffi/bench_kernels.cu -o "$work/libkiln_bench.so"
py_inc="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
ext="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror -Wno-missing-field-initializers \
  -I include -I "$dl" -I "$py_inc" python/src/module.cpp -o "$work/site/kiln/_kiln$ext"
cp python/kiln/__init__.py "$work/site/kiln/"
PYTHONPATH="$work/site" PYTHONUNBUFFERED=1 python3 bench/ffi/bench_ffi.py --library "$work/libkiln_bench.so" \
  --out "$out" --commit "$commit" --command "bench/ffi/run_device.sh \$OUT $commit"
