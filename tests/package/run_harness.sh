#!/bin/bash
# Runs kiln's TensorRT plugin harness and each package's test program over `kiln plugins` output
# folders. Usage: run_harness.sh [--no-gpu] OUT_DIR...  (each built with TensorRT headers present).
# Without a GPU (or with --no-gpu) only the IPluginV3 interface checks run; they need no libnvinfer.
set -u
flag=""
if [ "${1:-}" = "--no-gpu" ]; then flag="--no-gpu"; shift; fi
status=0
for dir in "$@"; do
  lib=$(ls "$dir"/build/lib*_plugins.so 2>/dev/null | head -1)
  if [ -z "$lib" ] || [ ! -x "$dir/build/kiln_plugin_harness" ]; then
    echo "SKIP $dir: not built (kiln plugins needs nvcc and TENSORRT_ROOT to build)"; continue
  fi
  echo "=== $dir ($(basename "$lib"))"
  "$dir/build/kiln_plugin_harness" $flag "$lib" "$dir"/*/testdata/case_*.txt || status=1
  if [ -z "$flag" ] && nvidia-smi > /dev/null 2>&1; then
    for t in "$dir"/build/*/test_*; do
      p=$(basename "$t"); p=${p#test_}
      "$t" "$dir/$p/testdata" || status=1
    done
  fi
done
exit $status
