#!/usr/bin/env bash
# The selective tier (cmake/selective.cmake): a runtime with only the CPU kernels that Silero VAD
# (silero_vad and silero_vad_16k_op15) and PaddleOCR's text-direction classifier
# (ch_ppocr_mobile_v2.0_cls) run, as a size-constrained deployment would build it: the op list
# tests/selective/ops.txt, -Oz with link-time optimisation, no exceptions, no compiler, CUDA
# backend, oneDNN, OpenBLAS, C API, run-time Loop control or AVX builds of the interpreter. The
# build fails past its size budget (KILN_RUNTIME_SIZE_BUDGET below, checked after the link by
# cmake/check_runtime_size.cmake). Then:
#   - the op list must be what `build/kiln inspect --ops` prints for the three artifacts, compiled
#     by the host's build/kiln (--arch none --cpu-layout nchw: a runtime without oneDNN runs
#     Convs as ONNX has them), so that it cannot go stale;
#   - the library is installed (cmake --install --component runtime) and stripped
#     (strip --strip-unneeded): its size, the default build's, and what it links;
#   - tests/selective/run_test_sets, linked to that library alone, runs each model on every
#     test set against onnxruntime's outputs (atol 1e-4, rtol 1e-3), on 1 and 2 threads;
#   - it must fail: on a reference from another test set (MISMATCH, exit 1), and at Model::Load on
#     an artifact that needs a kernel it lacks (Silero compiled --no-fuse: UNIMPLEMENTED, naming
#     the instruction and the op) and on one with a run-time Loop, whose control the op list does
#     not name (tests/selective/make_loop_model.py; `kiln inspect --ops` lists kiln.LoopBegin).
#
# Needs the normal build first (scripts/test.sh: build/kiln, build/testdata, build/venv). Builds in
# build/selective ($SELECTIVE_BUILD_DIR when set). Run from anywhere.
#   scripts/selective.sh [--build-only]   --build-only: configure and build, then stop (needs
#   nothing else; scripts/test.sh runs it in the background, niced, on the cores the tiers before
#   this one leave idle, and this tier then finds the build up to date)
set -euo pipefail

BUILD_ONLY=0
case "${1:-}" in
  "") ;;
  --build-only) BUILD_ONLY=1 ;;
  -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
  *) echo "selective.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${SELECTIVE_BUILD_DIR:-$ROOT/build/selective}"
OPS="$ROOT/tests/selective/ops.txt"
# The issue's goal, 300 KB (300,000 bytes): the build fails when the library grows past it (292,864
# bytes on 2026-12-04, benchmarks/results/2026-12-04-runtime-size.md).
BUDGET=300000
log() { echo "[selective] $*"; }
START=$SECONDS

MODELS=(silero_vad silero_vad_16k_op15 ch_ppocr_mobile_v2.0_cls)
((BUILD_ONLY)) || for f in build/kiln build/venv/bin/python "${MODELS[@]/#/build/testdata/}"; do
  [[ -e $f ]] || { log "error: no $f (run scripts/test.sh first)"; exit 1; }
done

log "configuring $BUILD (-Oz, LTO, no exceptions, the CPU kernels of $(grep -v '^#' "$OPS" | paste -sd' '))"
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=MinSizeRel -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON \
  -DKILN_SELECTED_OPS="$OPS" -DKILN_RUNTIME_SIZE_BUDGET=$BUDGET \
  -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_TRITON_BACKEND=OFF >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; log "error: configure failed (log: $BUILD/configure.log)"; exit 1; }
log "building libkiln_runtime.so and run_test_sets"
cmake --build "$BUILD" -j"$(nproc)" --target kiln_runtime_shared run_test_sets >"$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log"; log "error: build failed (log: $BUILD/build.log)"; exit 1; }
{ grep -h "bytes stripped" "$BUILD/build.log" || true; } | sed 's/^-- /[selective] built: /'
BUILT=$SECONDS
((BUILD_ONLY)) && { log "built in $((BUILT - START)) s"; exit 0; }

log "compiling the artifacts (host build/kiln, --arch none)"
WORK="$BUILD/cases"
rm -rf "$WORK"
mkdir -p "$WORK"
ARTIFACTS=()
for model in "${MODELS[@]}"; do
  build/kiln compile "build/testdata/$model/model.onnx" -o "$WORK/$model.kiln" --arch none --cpu-layout nchw -q >/dev/null
  ARTIFACTS+=("$WORK/$model.kiln")
done
ops() { grep -v '^#' "$1" | sort; }
build/kiln inspect --ops "${ARTIFACTS[@]}" >"$WORK/ops.txt"
if ! diff <(ops "$OPS") <(ops "$WORK/ops.txt") >/dev/null; then
  log "FAIL: tests/selective/ops.txt lists $(ops "$OPS" | paste -sd' '), but the artifacts run" \
    "$(ops "$WORK/ops.txt" | paste -sd' ') (build/kiln inspect --ops): update it"
  exit 1
fi
log "the op list is the artifacts' own: $(ops "$OPS" | paste -sd' ')"

rm -rf "$BUILD/install"
cmake --install "$BUILD" --component runtime --prefix "$BUILD/install" >/dev/null
LIB=$(readlink -f "$BUILD/install/lib/libkiln_runtime.so")
strip --strip-unneeded -o "$WORK/libkiln_runtime.stripped.so" "$LIB"
SIZE=$(stat -c %s "$WORK/libkiln_runtime.stripped.so")
DEFAULT=""
[[ -e build/libkiln_runtime.so ]] && strip --strip-unneeded -o "$WORK/default.stripped.so" build/libkiln_runtime.so &&
  DEFAULT=" (the default build's: $(stat -c %s "$WORK/default.stripped.so") bytes)"
log "libkiln_runtime.so, installed and stripped (strip --strip-unneeded): $SIZE bytes, budget $BUDGET$DEFAULT;" \
  "NEEDED: $(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')"

RUNNER="$BUILD/tests/run_test_sets"
for model in "${MODELS[@]}"; do
  for threads in 1 2; do
    out=$("$RUNNER" "$WORK/$model.kiln" --threads $threads "build/testdata/$model"/test_data_set_*) ||
      { echo "$out"; log "FAIL: $model on $threads threads"; exit 1; }
    log "$model, threads $threads: $(grep -c ': ok$' <<<"$out") outputs ok over" \
      "$(ls -d "build/testdata/$model"/test_data_set_* | wc -l) test sets"
  done
done

# It can fail: test set 0's inputs against test set 1's outputs.
WRONG="$WORK/wrong_reference"
mkdir -p "$WRONG"
cp build/testdata/silero_vad_16k_op15/test_data_set_0/input_*.pb build/testdata/silero_vad_16k_op15/test_data_set_1/output_*.pb "$WRONG/"
rc=0
out=$("$RUNNER" "$WORK/silero_vad_16k_op15.kiln" "$WRONG" 2>&1) || rc=$?
[[ $rc == 1 ]] && grep -q "MISMATCH$" <<<"$out" ||
  { echo "$out"; log "FAIL: another test set's reference gave exit $rc without a MISMATCH line"; exit 1; }
log "another test set's reference is rejected: $(grep -m1 'MISMATCH$' <<<"$out")"
build/kiln compile build/testdata/silero_vad_16k_op15/model.onnx -o "$WORK/unfused.kiln" --arch none --no-fuse -q >/dev/null
rc=0
out=$("$RUNNER" "$WORK/unfused.kiln" build/testdata/silero_vad_16k_op15/test_data_set_0 2>&1) || rc=$?
[[ $rc == 1 ]] && grep -qE "UNIMPLEMENTED: .* instruction [0-9]+ .* op '[A-Za-z]+' has no CPU kernel in this runtime" <<<"$out" ||
  { echo "$out"; log "FAIL: an artifact that needs a missing kernel gave exit $rc without naming it"; exit 1; }
log "an artifact that needs a kernel it lacks is refused at load: ${out#*: }"
build/venv/bin/python tests/selective/make_loop_model.py "$WORK/loop.onnx"
build/kiln compile "$WORK/loop.onnx" -o "$WORK/loop.kiln" --arch none -q >/dev/null
build/kiln inspect --ops "$WORK/loop.kiln" | grep -qx kiln.LoopBegin ||
  { log "FAIL: kiln inspect --ops lists no kiln.LoopBegin for an artifact with a run-time Loop"; exit 1; }
rc=0
out=$("$RUNNER" "$WORK/loop.kiln" "$WORK" 2>&1) || rc=$?
[[ $rc == 1 ]] && grep -qE "UNIMPLEMENTED: .* instruction [0-9]+ .* op 'kiln.LoopBegin', a run-time Loop's control, is not in this selective runtime" <<<"$out" ||
  { echo "$out"; log "FAIL: an artifact with a run-time Loop gave exit $rc without naming kiln.LoopBegin"; exit 1; }
log "an artifact with a run-time Loop is refused at load: ${out#*: }"
log "ok: build $((BUILT - START)) s, total $((SECONDS - START)) s"
