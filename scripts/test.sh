#!/usr/bin/env bash
# The whole test suite (the README's test command; CI runs exactly this through .ci/run):
# installs what is missing, builds with warnings as errors, runs the unit tests, the ONNX node
# conformance suite on the CPU backend, the Python tests and a bounded fuzzing run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${KILN_BUILD_DIR:-$root/build-ci}"
jobs="$(nproc)"

step() { printf '\n==== %s ====\n' "$*"; }

step "setup"
bash ./setup.sh

step "configure and build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON >/dev/null
ninja -C "$build" -j"$jobs"

step "unit tests"
# 1200 s a test: the generated-CUDA compile checks (three architectures through nvcc) are the longest;
# ConvTemplate's ran 545 s beside the others on CI's two cores (2026-11-28), too near 600.
(cd "$build" && ctest --output-on-failure -j"$jobs" --timeout 1200)

step "C++ example against the installed CMake package (examples/cpp)"
# Installs to a temporary prefix, builds examples/cpp with find_package(kiln) (kiln_add_model runs
# the installed kiln at build time), and runs it: outputs against the CPU backend's, 4 threads,
# the memory-plan bound. tests/python/test_model_library.py runs the same application on its models.
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/install" >/dev/null
cmake -S examples/cpp -B "$prefix/example" -G Ninja -DCMAKE_PREFIX_PATH="$prefix/install" >/dev/null
ninja -C "$prefix/example" >/dev/null
"$prefix/example/run_model"
export KILN_EXAMPLE_RUN_MODEL="$prefix/example/run_model"

# One conformance suite on the CPU backend: every case passes or is skipped with its reason,
# and the pass count stays at or above the suite's floor file.
conformance() {  # name, cases dir, floor file, skip list (known-bad reference data)
  local name="$1" cases="$2" floor_file="$3" skip_list="$4" report="$build/conformance-$1.txt"
  "$build/tools/kiln" test-onnx "$cases" --skip-list "$skip_list" \
    | tee "$report" | grep -v '^PASS' | tail -n 400
  local summary passed failed floor
  summary="$(tail -n 1 "$report")"
  passed="$(echo "$summary" | sed -E 's/^([0-9]+) passed.*/\1/')"
  failed="$(echo "$summary" | sed -E 's/.* ([0-9]+) failed.*/\1/')"
  floor="$(cat "$floor_file")"
  if [ "$failed" != "0" ]; then echo "conformance ($name): $failed cases failed"; exit 1; fi
  if [ "$passed" -lt "$floor" ]; then
    echo "conformance ($name): $passed passed, below the floor of $floor ($floor_file)"
    exit 1
  fi
  echo "conformance ($name): $passed passed (floor $floor)"
  summaries+=("$name: $summary")
}
summaries=()

step "ONNX node conformance, CPU backend: Debian's libonnx-testdata"
conformance debian /usr/share/libonnx-testdata/data/node tests/conformance/cpu_floor.txt \
  tests/conformance/known_bad_reference.txt

step "ONNX node conformance, CPU backend: the onnx wheel's node cases"
wheel_cases="$(mktemp -d)"
trap 'rm -rf "$wheel_cases" "$prefix"' EXIT  # replaces the example's trap: both folders
python3 tests/conformance/onnx_wheel_cases.py "$wheel_cases"
conformance onnx-wheel "$wheel_cases" tests/conformance/onnx_wheel_floor.txt \
  tests/conformance/onnx_wheel_known_bad.txt

for extra in tests/python/run.sh fuzz/run.sh; do
  if [ -x "$extra" ]; then
    step "$extra"
    KILN_BUILD_DIR="$build" "./$extra"
  fi
done

step "all tests"
printf '%s\n' "${summaries[@]}"
