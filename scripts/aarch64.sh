#!/usr/bin/env bash
# The aarch64 tier (README "Edge"): cross-compiles the runtime alone for 64-bit Arm with Debian's
# cross toolchain (cmake/toolchains/aarch64-linux-gnu.cmake; no compiler, no OpenBLAS: the
# portable GEMM, no CUDA) with its runtime-only test programs, and runs them under qemu-user on
# artifacts the host's build/kiln compiles (--arch none): tests/edge/artifact_check on Silero VAD
# (3 test sets), the PaddleOCR direction classifier and PP-OCRv4 det, each on 1 and 2 threads,
# against onnxruntime's outputs (atol 1e-4, rtol 1e-3, as tests/e2e); a perturbed reference that
# it must reject; tests/stress/context_stress on Silero (8 threads x 24 runs at three shapes,
# every output equal to a serial run's).
# Prints the stripped size of the aarch64 libkiln_runtime.so and what it links (NEEDED).
#
# Needs the normal build first (scripts/test.sh: build/kiln, build/venv, build/testdata).
# Installs g++-aarch64-linux-gnu and qemu-user when missing. Builds in build/aarch64
# ($AARCH64_BUILD_DIR when set). Run from anywhere.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${AARCH64_BUILD_DIR:-$ROOT/build/aarch64}"
PY=build/venv/bin/python
log() { echo "[aarch64] $*"; }
START=$SECONDS

MODELS=(silero_vad_16k_op15 ch_ppocr_mobile_v2.0_cls ch_PP-OCRv4_det)
for f in build/kiln "$PY" "${MODELS[@]/#/build/testdata/}"; do
  [[ -e $f ]] || { log "error: no $f (run scripts/test.sh first)"; exit 1; }
done

bash scripts/install-debs.sh aarch64 g++-aarch64-linux-gnu qemu-user

log "configuring $BUILD (aarch64-linux-gnu-g++ -O2, runtime alone, no BLAS, no CUDA)"
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DKILN_BUILD_COMPILER=OFF -DKILN_WITH_BLAS=OFF -DKILN_BUILD_BENCHMARKS=OFF >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; log "error: configure failed (log: $BUILD/configure.log)"; exit 1; }
log "building libkiln_runtime.so, artifact_check and context_stress"
cmake --build "$BUILD" -j"$(nproc)" --target kiln_runtime_shared artifact_check context_stress \
  >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; log "error: build failed (log: $BUILD/build.log)"; exit 1; }
BUILT=$SECONDS

LIB="$BUILD/libkiln_runtime.so"
aarch64-linux-gnu-strip -o "$BUILD/libkiln_runtime.stripped.so" "$LIB"
log "libkiln_runtime.so for aarch64, stripped: $(stat -c %s "$BUILD/libkiln_runtime.stripped.so") bytes;" \
  "NEEDED: $(aarch64-linux-gnu-readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')"

log "compiling the artifacts (host build/kiln, --arch none) and exporting the test sets"
WORK="$BUILD/cases"
rm -rf "$WORK"
mkdir -p "$WORK"
CASES=()
for model in "${MODELS[@]}"; do
  build/kiln compile "build/testdata/$model/model.onnx" -o "$WORK/$model.kiln" --arch none -q >/dev/null
  for set in "build/testdata/$model"/test_data_set_*; do
    n=${set##*_}
    "$PY" tests/edge/export_case.py "build/testdata/$model" "$WORK/$model-$n" --set "$n" >/dev/null
    CASES+=("$model $model-$n")
  done
done
"$PY" tests/edge/export_case.py build/testdata/silero_vad_16k_op15 "$WORK/perturbed" --perturb >/dev/null

QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
# Each test set on one and on two threads (the GEMM split over threads runs too).
for c in "${CASES[@]}"; do
  read -r model case <<<"$c"
  for threads in 1 2; do
    t=$SECONDS
    out=$("${QEMU[@]}" "$BUILD/tests/artifact_check" "$WORK/$model.kiln" "$WORK/$case" --threads "$threads" 2>&1) ||
      { echo "$out"; log "FAIL: $case on $threads threads"; exit 1; }
    log "$case, $threads threads: $(echo "$out" | tail -1) [$((SECONDS - t)) s under qemu]"
  done
done
# The check can fail: a reference moved by 0.01 must be reported and exit 1.
rc=0
out=$("${QEMU[@]}" "$BUILD/tests/artifact_check" "$WORK/silero_vad_16k_op15.kiln" "$WORK/perturbed" 2>&1) || rc=$?
[[ $rc == 1 ]] && grep -q "^output output: .* MISMATCH$" <<<"$out" ||
  { echo "$out"; log "FAIL: a perturbed reference gave exit $rc without a MISMATCH line"; exit 1; }
log "a perturbed reference is rejected: $(grep MISMATCH <<<"$out")"

t=$SECONDS
log "context_stress on Silero VAD under qemu: 8 threads x 24 runs, three shapes"
"${QEMU[@]}" "$BUILD/tests/context_stress" "$WORK/silero_vad_16k_op15.kiln" --threads 8 --runs 24 \
  --shape input:1x576 --shape input:4x448 --shape input:32x703 | tail -3
log "context_stress: $((SECONDS - t)) s under qemu"
log "ok: build $((BUILT - START)) s, total $((SECONDS - START)) s"
