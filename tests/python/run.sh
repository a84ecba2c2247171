#!/usr/bin/env bash
# The Python adapter tests (kiln.load, tvm_ffi.load_module) on the CPU: builds the fixture library
# (tests/python/fixture) into build-pytest/, installs the kiln package from the repository root,
# and runs pytest. test_compiled_cpu.py also runs `kiln compile --target cpu` once (the kiln binary
# of $KILN_BUILD_DIR, else the newest build*/tools/kiln). Tests needing apache-tvm-ffi skip with a
# message when it is missing.
# Usage: tests/python/run.sh [pytest args]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${KILN_PYTEST_BUILD:-$root/build-pytest}"
cmake -S "$root/tests/python" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug >/dev/null
ninja -C "$build" kiln_test_library >/dev/null
python3 -m pip install -q --disable-pip-version-check "$root" 2>&1 | { grep -v "Running pip as the 'root' user" || true; }
export KILN_TEST_LIBRARY="$build/libkiln_test_library.so"
# test_compiled_cpu.py compiles an example model with the kiln binary of the main build.
if [ -n "${KILN_BUILD_DIR:-}" ]; then export KILN_BINARY="$KILN_BUILD_DIR/tools/kiln"; fi
# With no arguments: these tests and tests/quant/test_modelopt_onnx.py (a Model Optimizer NVFP4
# ONNX through kiln quantize, against onnx.reference).
if [ $# -eq 0 ]; then set -- . ../quant/test_modelopt_onnx.py; fi
cd "$root/tests/python" && python3 -m pytest -q -rs "$@"
