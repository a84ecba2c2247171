#!/usr/bin/env bash
# The GPU checks and benchmarks of issue 8, from the repository root on the GPU machine, after
# bench/contraction/prepare_carry.sh filled .carry/kiln/ here (carry [".carry/kiln"]):
#   1. the contraction benchmark (bench.py): Linear layers vs cuBLAS, Gemma MLP block / ViT block /
#      CNN exported from PyTorch vs torch eager and torch.compile, the NVFP4 MLP;
#   2. CUDA conformance: kiln test-onnx --backend cuda over the ONNX node suite;
#   3. edges: the edge shapes of the templates (edge_check.py: sizes off every tile, M on both sides
#      of the small-M switch, fp16 and bf16) against torch;
#   4. sanitizer: compute-sanitizer memcheck and racecheck over sanitizer_cases.py's test folders
#      (every template configuration) and the conformance suites of step 2 (SAN_SUITES=debian,wheel).
# Results: $OUT (the device tool brings them back) -> bench/results/. KILN_COMMIT names the commit.
# Since session 22 the steps do not fit one 600 s device call (the bench step alone: ~470 s of exports
# and compiles, s22b): split them over calls with STEPS and BENCH_ONLY.
# STEPS=bench,conformance,edges,sanitizer chooses steps; BENCH_ONLY the bench sections; BENCH_ARGS more bench.py
# arguments (--profile: per-kernel times of each model, kiln and torch.compile); EDGE_KINDS the
# edge_check.py kinds (default all), EDGE_BF16 the conv cases also checked in bfloat16 (default all);
# RACECHECK_SETS=cases: racecheck over the template cases only (memcheck still over every set);
# SAN_BUILT: the template cases' libraries built ahead (prebuild_sanitizer_cases.sh: its folder or .tar.xz);
# SAN_BUILT_DEBIAN: the Debian node suite's (SUITE=debian prebuild_sanitizer_cases.sh).
# FI_SECTIONS (e.g. "mlp vit"; default none): bench sections run a second time with every kiln
# compile given --float-intermediates (float32 intermediates, as torch.compile computes), into
# contraction_<device>_<date><tag>_fi.md.
set -uo pipefail
OUT="${OUT:-bench/results}"
mkdir -p "$OUT"
carry="$PWD/.carry/kiln"
export LD_LIBRARY_PATH="$carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
steps="${STEPS:-bench,conformance,edges,sanitizer}"
date=$(date -u +%Y-%m-%d)
tag="${RUN_TAG:+_$RUN_TAG}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1

# bench_sections RESULTS_DIR LOG SECTIONS...: one bench.py process per section, so that a crash in
# one (with its Python stack, faulthandler) leaves the others' tables; then the sections' tables
# joined into one file. $KILN_COMPILE_FLAGS reaches every kiln compile.
bench_sections() {
  local results="$1" log="$2" section
  shift 2
  rm -rf "$results"
  for section in "$@"; do
    python3 -X faulthandler bench/contraction/bench.py --kiln "$carry/kiln" --out "$results" \
      --only "$section" --tag "$section" ${BENCH_ARGS:-} >> "$log" 2>&1 || echo "section $section failed: exit $?"
  done
}

if [[ ",$steps," == *",bench,"* ]]; then
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr ' ' '_')
  # shellcheck disable=SC2086
  bench_sections /tmp/kiln-contraction-results "$OUT/contraction_log$tag.txt" ${BENCH_ONLY:-linear mlp nvfp4 vit cnn}
  cat /tmp/kiln-contraction-results/contraction_*.md > "$OUT/contraction_${device}_${date}${tag}.md"
  grep -v "Warning\|warn(" "$OUT/contraction_log$tag.txt" | grep -E "^(linear|Gemma|ViT|CNN|section|profile|kiln compile failed|Traceback|Fatal|  File| +[0-9.]+ us )" | tail -n 80
  if [ -n "${FI_SECTIONS:-}" ]; then
    # shellcheck disable=SC2086
    KILN_COMPILE_FLAGS="${KILN_COMPILE_FLAGS:-} --float-intermediates" \
      bench_sections /tmp/kiln-contraction-results-fi "$OUT/contraction_log${tag}_fi.txt" $FI_SECTIONS
    cat /tmp/kiln-contraction-results-fi/contraction_*.md > "$OUT/contraction_${device}_${date}${tag}_fi.md"
    grep -E "^(Gemma|ViT|CNN|linear|section|Traceback)" "$OUT/contraction_log${tag}_fi.txt" | sed 's/^/--float-intermediates: /' | tail -n 20
  fi
fi

if [[ ",$steps," == *",conformance,"* ]]; then
  conformance="$OUT/cuda_conformance_${date}${tag}.txt"
  {
    echo "# kiln test-onnx --backend cuda, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), $date, commit ${KILN_COMMIT:-unknown}"
    echo "# command: kiln test-onnx .carry/kiln/node --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --skip-list tests/conformance/known_bad_reference.txt -v"
    start=$(date +%s)
    "$carry/kiln" test-onnx "$carry/node" --backend cuda --cuda-arch sm_90 --cuda-jobs 16 --cuda-work-dir /tmp/kiln-cuda-test \
      --skip-list tests/conformance/known_bad_reference.txt -v 2>&1
    echo "# wall time: $(( $(date +%s) - start )) s"
  } > "$conformance"
  grep -v '^PASS' "$conformance" | tail -n 30
  # The onnx wheel's node cases (tests/conformance/onnx_wheel_cases.py, written here from this
  # machine's onnx package) on the CUDA backend too.
  wheel="$OUT/cuda_conformance_wheel_${date}${tag}.txt"
  {
    echo "# onnx $(python3 -c 'import onnx; print(onnx.__version__)') node cases, kiln test-onnx --backend cuda, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), $date, commit ${KILN_COMMIT:-unknown}"
    python3 tests/conformance/onnx_wheel_cases.py /tmp/kiln-wheel-cases 2>&1 | tail -n 3  # its errors in the file too
    start=$(date +%s)
    timeout "${WHEEL_TIMEOUT:-300}" "$carry/kiln" test-onnx /tmp/kiln-wheel-cases --backend cuda --cuda-arch sm_90 --cuda-jobs 16 \
      --cuda-work-dir /tmp/kiln-cuda-wheel --skip-list tests/conformance/onnx_wheel_known_bad.txt -v 2>&1
    echo "# wall time: $(( $(date +%s) - start )) s"
  } > "$wheel"
  grep -v '^PASS' "$wheel" | tail -n 30
fi

if [[ ",$steps," == *",edges,"* ]]; then
  # The template edge shapes against an fp32 torch reference (no sanitizer: torch in the process).
  python3 bench/contraction/edge_check.py --kiln "$carry/kiln" ${EDGE_KINDS:+--kinds $EDGE_KINDS} \
    ${EDGE_BF16:+--bf16-cases $EDGE_BF16} > "$OUT/edge_check_${date}${tag}.txt" 2>&1
  echo "edge_check.py exit status $?"; tail -n 3 "$OUT/edge_check_${date}${tag}.txt"
fi

if [[ ",$steps," == *",sanitizer,"* ]]; then
  # compute-sanitizer memcheck and racecheck over (1) the test folders of sanitizer_cases.py, which
  # reach every template configuration the default schedule can pick, and (2) the conformance
  # suites named in SAN_SUITES (debian, wheel) as the conformance step ran them. Each set is built and
  # checked once without a sanitizer; the sanitizer passes reuse those libraries (--cuda-reuse-built).
  san="$OUT/sanitizer_${date}${tag}.txt"
  kt=("$carry/kiln" test-onnx --backend cuda --cuda-arch sm_90 --cuda-jobs 16)
  {
    echo "# compute-sanitizer over the contraction templates and the conformance suites, commit ${KILN_COMMIT:-unknown}, $date"
    echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); $(compute-sanitizer --version | tail -1)"
    python3 bench/contraction/sanitizer_cases.py /tmp/kiln-san-cases --kiln "$carry/kiln"
    # SAN_BUILT: the template cases' libraries built ahead on the dev machine (bench/contraction/
    # prebuild_sanitizer_cases.sh, carried); a unit whose source or kernel templates differ is rebuilt here.
    unpack() {  # prebuilt units (a folder or .tar.xz) into a work folder
      [ -n "$1" ] || return 0
      mkdir -p "$2"
      if [[ "$1" == *.tar.xz ]]; then tar -xJf "$1" -C "$2"; else cp -r "$1"/. "$2"/; fi
    }
    unpack "${SAN_BUILT:-}" /tmp/kiln-cuda-san
    unpack "${SAN_BUILT_DEBIAN:-}" /tmp/kiln-cuda-test  # the node suite's (SUITE=debian prebuild_sanitizer_cases.sh)
    sets=("/tmp/kiln-san-cases /tmp/kiln-cuda-san none")
    [[ ",${SAN_SUITES:-debian}," == *",debian,"* ]] &&
      sets+=("$carry/node /tmp/kiln-cuda-test tests/conformance/known_bad_reference.txt")
    if [[ ",${SAN_SUITES:-debian}," == *",wheel,"* ]]; then
      [[ -d /tmp/kiln-wheel-cases ]] || python3 tests/conformance/onnx_wheel_cases.py /tmp/kiln-wheel-cases > /dev/null
      sets+=("/tmp/kiln-wheel-cases /tmp/kiln-cuda-wheel tests/conformance/onnx_wheel_known_bad.txt")
    fi
    for tool in none memcheck racecheck; do
      for set in "${sets[@]}"; do
        read -r cases work skip <<< "$set"
        [[ $tool == racecheck && ${RACECHECK_SETS:-all} == cases && $cases != /tmp/kiln-san-cases ]] && continue
        skip_args=(); [[ "$skip" != none ]] && skip_args=(--skip-list "$skip")
        echo "## $tool: $cases"
        if [[ $tool == none ]]; then  # builds what the conformance step has not built, and checks it
          "${kt[@]}" "$cases" --cuda-work-dir "$work" --cuda-reuse-built "${skip_args[@]}" 2>&1 | grep -v '^PASS\|^built unit\|^reused unit' | tail -n 8
          continue
        fi
        s0=$(date +%s)
        # application-only: a unit that must be rebuilt runs nvcc, and the sanitizer waiting to attach
        # to nvcc's processes ends the pass ("No attachable process found", run s26a).
        timeout "${SAN_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --target-processes application-only --error-exitcode 99 "${kt[@]}" "$cases" \
          --cuda-work-dir "$work" --cuda-reuse-built "${skip_args[@]}" 2>&1 | grep -v '^reused unit' | tail -n 8
        echo "exit status: ${PIPESTATUS[0]} ($(( $(date +%s) - s0 )) s)"
      done
    done
  } > "$san"
  cat "$san"
fi
