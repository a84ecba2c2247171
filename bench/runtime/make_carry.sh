#!/usr/bin/env bash
# Assembles what bench/runtime/device_run.sh needs on the GPU machine into DEST (default
# /work/main/.carry/runtime, ignored by git): the kiln binary and libkiln_runtime of BUILD, the
# non-system shared libraries kiln needs (ldd), the runtime headers with DLPack, and this folder.
# Usage: bench/runtime/make_carry.sh BUILD [DEST]
set -euo pipefail
build="$1"
dest="${2:-/work/main/.carry/runtime}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/include/kiln/runtime" "$dest/include/kiln/third_party/dlpack" "$dest/bench"
cp "$build/tools/kiln" "$dest/kiln"
strip "$dest/kiln" || true
cp "$build"/src/libkiln_runtime.so "$dest/lib/"
for lib in $(ldd "$build/tools/kiln" | awk '/=>/ {print $3}' | grep -E 'libprotobuf|libonnx|libfmt|libz\.'); do
  cp -L "$lib" "$dest/lib/"
done
cp "$root"/include/kiln/runtime/{Model.h,kiln_abi.h,kiln_model.h,validate.h,arena_plan.h} "$dest/include/kiln/runtime/"
cp /usr/include/dlpack/dlpack.h "$dest/include/kiln/third_party/dlpack/"
cp "$root"/bench/runtime/*.py "$root"/bench/runtime/*.cpp "$root"/bench/runtime/device_run.sh "$dest/bench/"
du -sh "$dest"
