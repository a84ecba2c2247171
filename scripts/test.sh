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
(cd "$build" && ctest --output-on-failure -j"$jobs" --timeout 600)

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

step "ONNX node conformance, CPU backend"
nodes=/usr/share/libonnx-testdata/data/node
"$build/tools/kiln" test-onnx "$nodes" --skip-list tests/conformance/known_bad_reference.txt | tee "$build/conformance-cpu.txt" | grep -v '^PASS' | tail -n 400
summary="$(tail -n 1 "$build/conformance-cpu.txt")"
passed="$(echo "$summary" | sed -E 's/^([0-9]+) passed.*/\1/')"
failed="$(echo "$summary" | sed -E 's/.* ([0-9]+) failed.*/\1/')"
floor="$(cat tests/conformance/cpu_floor.txt)"
if [ "$failed" != "0" ]; then echo "conformance: $failed cases failed"; exit 1; fi
if [ "$passed" -lt "$floor" ]; then
  echo "conformance: $passed passed, below the floor of $floor (tests/conformance/cpu_floor.txt)"
  exit 1
fi
echo "conformance: $passed passed (floor $floor)"

for extra in tests/python/run.sh fuzz/run.sh; do
  if [ -x "$extra" ]; then
    step "$extra"
    KILN_BUILD_DIR="$build" "./$extra"
  fi
done

step "all tests"
echo "$summary"
