#!/usr/bin/env bash
# Issue 10's model check on the GPU machine (bench/runtime/models_check.py): PyTorch-exported models
# (Gemma decoder layer, ViT block, small CNN; opset 17 and dynamo opset 18; fp32 and fp16) as model
# libraries, run from Python (kiln.load, GPU) and from the C++ example application built against
# the installed CMake package (CPU). Run from the repository root on the GPU machine after
# bench/runtime/models_carry.sh filled .carry/models/ here (carry [".carry/models"]).
# Writes $OUT/models_<device>_<date>.md.
set -uo pipefail
C="$PWD/.carry/models"
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$C/prefix/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$C/prefix/bin:/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
# The Python module (pip install . without fetching: its build needs are on this machine).
DLPACK_INCLUDE_DIR="$C/include" python3 -m pip install -q --no-build-isolation --no-deps . > /tmp/pip.log 2>&1 ||
  { tail -20 /tmp/pip.log; exit 1; }
# The example application, against the installed package (it compiles its own model at build time).
cmake -S examples/cpp -B /tmp/kiln-example -G Ninja -DCMAKE_PREFIX_PATH="$C/prefix" > /tmp/example.log 2>&1 &&
  cmake --build /tmp/kiln-example >> /tmp/example.log 2>&1 && /tmp/kiln-example/run_model | tail -2 ||
  { tail -20 /tmp/example.log; exit 1; }
python3 bench/runtime/models_check.py --kiln "$C/prefix/bin/kiln" --run-model /tmp/kiln-example/run_model \
  --out "$OUT/models_${device}_$(date -u +%F).md" --jobs 12 2>&1 | grep -v -i "warn"
