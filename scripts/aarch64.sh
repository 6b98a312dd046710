#!/usr/bin/env bash
# The aarch64 tier (docs/edge.md): cross-compiles the runtime alone for 64-bit Arm with Debian's
# cross toolchain (cmake/toolchains/aarch64-linux-gnu.cmake; no compiler, no OpenBLAS: the
# portable GEMM, no CUDA) with its runner, kiln-run, and runs them under qemu-user on artifacts
# the host's build/kiln compiles (--arch none, with native code for aarch64, which each run must
# say it ran): `kiln-run run --expected` on Silero VAD (3 test
# sets), the PaddleOCR direction classifier and PP-OCRv4 det, each on 1 and 2 threads, against
# onnxruntime's outputs in the ONNX test layout (atol 1e-4, rtol 1e-3, as tests/e2e); a
# perturbed reference that it must reject; tests/stress/context_stress on Silero (8 threads x 24
# runs at three shapes, every output equal to a serial run's).
# Prints the stripped sizes of the aarch64 libkiln_runtime.so and kiln-run, and what the library
# links (NEEDED).
#
# Needs the normal build first (scripts/test.sh: build/kiln, build/venv, build/testdata).
# Installs g++-aarch64-linux-gnu and qemu-user when missing. Builds in build/aarch64
# ($AARCH64_BUILD_DIR when set). Run from anywhere.
#   scripts/aarch64.sh [--build-only]   --build-only: install, configure and build, then stop
#   (needs nothing else; scripts/test.sh runs it in the background, niced, on the cores the tiers
#   before this one leave idle, and this tier then finds the build up to date)
set -euo pipefail

BUILD_ONLY=0
case "${1:-}" in
  "") ;;
  --build-only) BUILD_ONLY=1 ;;
  -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
  *) echo "aarch64.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${AARCH64_BUILD_DIR:-$ROOT/build/aarch64}"
PY=build/venv/bin/python
log() { echo "[aarch64] $*"; }
START=$SECONDS

MODELS=(silero_vad_16k_op15 ch_ppocr_mobile_v2.0_cls ch_PP-OCRv4_det)
((BUILD_ONLY)) || for f in build/kiln "$PY" "${MODELS[@]/#/build/testdata/}"; do
  [[ -e $f ]] || { log "error: no $f (run scripts/test.sh first)"; exit 1; }
done

bash scripts/install-debs.sh aarch64 g++-aarch64-linux-gnu qemu-user

log "configuring $BUILD (aarch64-linux-gnu-g++ -O2, runtime alone, no BLAS, no CUDA)"
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DKILN_BUILD_COMPILER=OFF -DKILN_WITH_BLAS=OFF -DKILN_WITH_ONEDNN=OFF -DKILN_BUILD_BENCHMARKS=OFF >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; log "error: configure failed (log: $BUILD/configure.log)"; exit 1; }
log "building libkiln_runtime.so, kiln-run and context_stress"
cmake --build "$BUILD" -j"$(nproc)" --target kiln_runtime_shared kiln-run context_stress \
  >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; log "error: build failed (log: $BUILD/build.log)"; exit 1; }
BUILT=$SECONDS
((BUILD_ONLY)) && { log "built in $((BUILT - START)) s"; exit 0; }

LIB="$BUILD/libkiln_runtime.so"
aarch64-linux-gnu-strip -o "$BUILD/libkiln_runtime.stripped.so" "$LIB"
log "libkiln_runtime.so for aarch64, stripped: $(stat -c %s "$BUILD/libkiln_runtime.stripped.so") bytes;" \
  "NEEDED: $(aarch64-linux-gnu-readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')"
aarch64-linux-gnu-strip -o "$BUILD/kiln-run.stripped" "$BUILD/kiln-run"
log "kiln-run for aarch64 (the runtime linked in), stripped: $(stat -c %s "$BUILD/kiln-run.stripped") bytes"

log "compiling the artifacts (host build/kiln, --arch none --cpu-targets aarch64: native code for aarch64)"
WORK="$BUILD/cases"
rm -rf "$WORK"
mkdir -p "$WORK"
for model in "${MODELS[@]}"; do
  build/kiln compile "build/testdata/$model/model.onnx" -o "$WORK/$model.kiln" --arch none --cpu-targets aarch64 -q >/dev/null
done
QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
RUNNER=("${QEMU[@]}" "$BUILD/kiln-run" run --device cpu --atol 1e-4 --rtol 1e-3)
# Each test set on one and on two threads (the GEMM split over threads runs too).
for model in "${MODELS[@]}"; do
  for set in "build/testdata/$model"/test_data_set_*; do
    for threads in 1 2; do
      t=$SECONDS
      out=$("${RUNNER[@]}" "$WORK/$model.kiln" --inputs "$set" --expected "$set" --threads "$threads" 2>&1) ||
        { echo "$out"; log "FAIL: $model $(basename "$set") on $threads threads"; exit 1; }
      grep -q '^device: .*generated kernels as native code (aarch64)' <<<"$out" ||
        { echo "$out"; log "FAIL: $model did not run its aarch64 native code"; exit 1; }
      log "$model $(basename "$set"), threads $threads: $(grep -c '^expected: .*: ok$' <<<"$out") outputs ok" \
        "[$((SECONDS - t)) s under qemu]"
    done
  done
done
# The check can fail: a reference moved by 0.01 must be reported and exit 1.
PERTURBED="$WORK/perturbed"
mkdir -p "$PERTURBED"
cp build/testdata/silero_vad_16k_op15/test_data_set_0/*.pb "$PERTURBED/"
"$PY" - "$PERTURBED/output_0.pb" <<'EOF_PY'
import sys
import onnx
from onnx import numpy_helper
t = onnx.TensorProto()
t.ParseFromString(open(sys.argv[1], "rb").read())
a = numpy_helper.to_array(t).copy()
a.flat[0] += 0.01
open(sys.argv[1], "wb").write(numpy_helper.from_array(a, t.name).SerializeToString())
EOF_PY
rc=0
out=$("${RUNNER[@]}" "$WORK/silero_vad_16k_op15.kiln" --inputs "$PERTURBED" --expected "$PERTURBED" 2>&1) || rc=$?
[[ $rc == 1 ]] && grep -q "^expected: .*: MISMATCH$" <<<"$out" ||
  { echo "$out"; log "FAIL: a perturbed reference gave exit $rc without a MISMATCH line"; exit 1; }
log "a perturbed reference is rejected: $(grep -m1 'MISMATCH$' <<<"$out")"
t=$SECONDS
log "context_stress on Silero VAD under qemu: 8 threads x 24 runs, three shapes"
"${QEMU[@]}" "$BUILD/tests/context_stress" "$WORK/silero_vad_16k_op15.kiln" --threads 8 --runs 24 \
  --shape input:1x576 --shape input:4x448 --shape input:32x703 | tail -3
log "context_stress: $((SECONDS - t)) s under qemu"
log "ok: build $((BUILT - START)) s, total $((SECONDS - START)) s"
