#!/usr/bin/env bash
# Gathers what bench/packed/device_run.sh needs into DEST (default .carry/packed/, ignored by git):
# the kiln binary and its non-system libraries (bench/contraction/prepare_carry.sh), the wheel case
# writer, the wheel's known-bad list, the packed case list and the large-case writer, so that the
# run reads this checkout's files whatever tree the device receives.
# Usage: bench/packed/prepare_carry.sh [BUILD_DIR] [DEST]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
dest="${2:-$root/.carry/packed}"
NODE_SUITE=0 "$root/bench/contraction/prepare_carry.sh" "$build" "$dest"
cp "$root/tests/conformance/onnx_wheel_cases.py" "$root/tests/conformance/onnx_wheel_known_bad.txt" \
  "$root/bench/packed/wheel_packed_cases.txt" "$root/bench/packed/write_large_cases.py" \
  "$root/bench/packed/device_run.sh" "$dest/"
du -sh "$dest"
