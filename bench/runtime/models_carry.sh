#!/usr/bin/env bash
# Fills .carry/models/ (ignored by git) for bench/runtime/models_run.sh: the installed CMake package
# of the build here (cmake --install), kiln's non-system shared libraries (ldd) beside
# libkiln_runtime, and DLPack's header for the Python module's build.
# Usage: bench/runtime/models_carry.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
dest="$root/.carry/models"
rm -rf "$dest" && mkdir -p "$dest/include"
cmake --install "$build" --prefix "$dest/prefix" > /dev/null
strip "$dest/prefix/bin/kiln"
ldd "$build/tools/kiln" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/prefix/lib/"; done
cp -r /usr/include/dlpack "$dest/include/"
du -sh "$dest"
