#!/usr/bin/env bash
# Installs everything kiln needs on a fresh Debian 12 machine (the CUDA 13 toolkit is assumed
# present, as on the development and CI machines). Safe to run again.
set -euo pipefail
debs=(
  cmake ninja-build g++ clang libclang-rt-14-dev   # build; clang for the libFuzzer target
  libprotobuf-dev protobuf-compiler                 # ONNX protobuf classes, generated from the onnx wheel's schema
  libonnx-testdata                                  # ONNX backend node tests: the conformance suite
  libdlpack-dev                                     # DLTensor, the kernel contract's tensor type
  nlohmann-json3-dev                                # signatures, reports, tuning records
  libcli11-dev                                      # the kiln command line
  libfmt-dev                                        # formatting of messages and generated code
  libgtest-dev                                      # unit tests
)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# onnx (Python): its onnx-ml.proto is the schema kiln's protobuf classes are generated from at
# build time (src/onnx/OnnxProto.cmake); it also builds the example models and writes its node
# test cases for the conformance suite. numpy checks results.
python3 -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/requirements-dev.txt"
