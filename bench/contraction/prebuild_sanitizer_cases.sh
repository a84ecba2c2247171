#!/usr/bin/env bash
# Builds the template cases of sanitizer_cases.py on the dev machine (no GPU needed to build), so
# that device_run.sh's sanitizer step spends its device time under the sanitizer, not in nvcc
# (building them there takes minutes of a 10-minute call; s25c ran out of time). The libraries go to DEST
# (default .carry/san-built, ignored by git) and DEST.tar.xz; carry the archive and pass
# SAN_BUILT=.carry/san-built.tar.xz.
# The cases are written again on the GPU machine from the same seed: a unit is reused there only
# when its generated source and kiln's kernel templates are unchanged (build_stamp), else rebuilt.
# SUITE=debian builds the Debian node suite's units instead (the set device_run.sh's conformance and
# sanitizer steps build into /tmp/kiln-cuda-test, with the same skip list; about 10 minutes here):
# DEST defaults to .carry/san-built-debian, carried and passed as SAN_BUILT_DEBIAN.
# Usage: [SUITE=cases|debian] bench/contraction/prebuild_sanitizer_cases.sh [KILN (default build/tools/kiln)] [DEST]
# Builds 16 translation units, as device_run.sh's --cuda-jobs 16 does (before session 29, when every case
# compiled every template path, the 102 cases took the better part of an hour on 2 cores; since then the
# GPU machine's 16 cores build all 114 in about 76 s, run s29c2, so this prebuild matters less).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
kiln="${1:-$root/build/tools/kiln}"
suite="${SUITE:-cases}"
case "$suite" in
  cases) dest="${2:-$root/.carry/san-built}"; skip=() ;;
  debian) dest="${2:-$root/.carry/san-built-debian}"; skip=(--skip-list "$root/tests/conformance/known_bad_reference.txt") ;;
  *) echo "SUITE must be cases or debian, not '$suite'" >&2; exit 2 ;;
esac
written="$(mktemp -d)"
trap 'rm -rf "$written"' EXIT
if [ "$suite" = cases ]; then
  cases="$written"
  python3 "$root/bench/contraction/sanitizer_cases.py" "$cases" --kiln "$kiln"
else
  cases=/usr/share/libonnx-testdata/data/node  # the suite prepare_carry.sh carries as .carry/kiln/node
fi
rm -rf "$dest" && mkdir -p "$dest"
# The run pass fails on a machine without a GPU (every case: no CUDA device); the build pass is
# what is wanted, and a unit that fails to build says FAILED.
"$kiln" test-onnx "$cases" --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --cuda-work-dir "$dest" "${skip[@]}" 2>&1 |
  grep -E '^built unit|FAILED' || true
built=$(ls "$dest"/libunit*.so.stamp 2>/dev/null | wc -l)
rm -rf "$dest/include" "$dest"/*.log
# The libraries are mostly zeros and constants: xz took session 25's 57 MB to 15 MB, under
# the device tool's 64 MiB carry with .carry/kiln beside it.
tar -C "$dest" -cJf "$dest.tar.xz" .
echo "$built of 16 units built into $dest ($(du -sh "$dest" | cut -f1)); carry $dest.tar.xz ($(du -sh "$dest.tar.xz" | cut -f1))"
[ "$built" = 16 ]
