#!/usr/bin/env bash
# Builds the libFuzzer target over the ONNX loader with clang (ASan + UBSan) in build-fuzz/ and
# runs it for a bounded time over a seed corpus of node-test models and the examples.
# Exits non-zero when the fuzzer finds a crash (the reproducer is left in build-fuzz/crashes/).
#   fuzz/run.sh [SECONDS]   (default 60)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
build="${KILN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${KILN_FUZZ_JOBS:-2}"

mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
ninja -C "$build" -j"$jobs" onnx_loader_fuzzer

# Seeds: small node-test models covering attributes, initializers, symbolic dims and several ops.
corpus="$build/corpus"
mkdir -p "$corpus" "$build/crashes"
nodes=/usr/share/libonnx-testdata/data/node
for t in test_add_bcast test_conv_with_strides_padding test_constant test_gemm_default_no_bias \
         test_layer_normalization_4d_axis0 test_softmax_axis_1 test_slice test_maxpool_2d_pads \
         test_batchnorm_epsilon test_cast_FLOAT_to_FLOAT16 test_reshape_reduced_dims test_if \
         test_loop11 test_castlike_FLOAT_to_STRING test_optional_has_element; do
  [ -f "$nodes/$t/model.onnx" ] && cp "$nodes/$t/model.onnx" "$corpus/$t.onnx"
done
for m in "$root"/examples/*.onnx; do
  [ -f "$m" ] && cp "$m" "$corpus/"
done

# libFuzzer exits non-zero on a crash, a leak, a timeout or running out of memory.
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
"$build/fuzz/onnx_loader_fuzzer" "$corpus" \
  -dict="$root/fuzz/onnx.dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$build/crashes/" -print_final_stats=1
