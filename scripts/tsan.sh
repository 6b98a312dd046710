#!/usr/bin/env bash
# The ThreadSanitizer tier: tests/stress/context_stress.cc (8 threads, each with its own
# ExecutionContext on one shared Model, up to 1,000 runs each, every output checked bit for bit)
# built with clang -fsanitize=thread and run on real models, one of them compiled --precision fp16. Fails on any TSan report, any
# mismatch and any error.
#
# Needs the normal build first (scripts/test.sh: build/kiln compiles the artifact, and
# build/testdata holds the model). Builds only the runtime and the stress program, in
# build/tsan ($TSAN_BUILD_DIR when set). Run from anywhere.
#   scripts/tsan.sh [--build-only]   --build-only: install, configure and build, then stop (needs
#   nothing else; scripts/test.sh runs it in the background, niced, on the cores the tiers before
#   this one leave idle, and this tier then finds the build up to date)
set -euo pipefail

BUILD_ONLY=0
case "${1:-}" in
  "") ;;
  --build-only) BUILD_ONLY=1 ;;
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  *) echo "tsan.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${TSAN_BUILD_DIR:-$ROOT/build/tsan}"
log() { echo "[tsan] $*"; }

((BUILD_ONLY)) || for f in build/kiln build/testdata/silero_vad_16k_op15/model.onnx build/testdata/ch_ppocr_mobile_v2.0_cls/model.onnx; do
  [[ -e $f ]] || { log "error: no $f (run scripts/test.sh first)"; exit 1; }
done

# clang, the sanitizer runtimes (libclang-rt) and llvm-symbolizer (file:line in reports).
bash scripts/install-debs.sh tsan clang libclang-rt-14-dev llvm

log "configuring $BUILD (clang, -fsanitize=thread, -O1)"
mkdir -p "$BUILD"
# -O1 and line tables only, as scripts/sanitize.sh: fast to build, symbolized reports.
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKILN_SANITIZE=thread \
  -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_C_FLAGS="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DKILN_BUILD_BENCHMARKS=OFF >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; log "error: configure failed"; exit 1; }
log "building context_stress (the runtime and tests/stress/context_stress.cc only)"
cmake --build "$BUILD" -j"$(nproc)" --target context_stress >"$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log"; log "error: build failed (log: $BUILD/build.log)"; exit 1; }
((BUILD_ONLY)) && { log "built context_stress in $BUILD"; exit 0; }

# The artifacts come from the normal build's compiler: only the runtime needs the sanitizer.
# Silero VAD (LSTM, convolutions, fused programs) with a symbolic batch and sequence length:
# three shapes, so each context rebinds between calls, the largest big enough for the
# convolutions to split over the contexts' worker threads. Then, shorter, the PaddleOCR
# direction classifier, whose depthwise and pointwise convolutions, pooling and fused
# activations all split over the workers (a run costs ~45 ms under TSan, 8x1000 would take
# minutes).
log "compiling the artifacts"
build/kiln compile "$ROOT/build/testdata/silero_vad_16k_op15/model.onnx" -o "$BUILD/silero.kiln" --arch none -q
build/kiln compile "$ROOT/build/testdata/ch_ppocr_mobile_v2.0_cls/model.onnx" -o "$BUILD/cls.kiln" --arch none -q
# fp16: kernels without half support run on float32 copies in each context's workspace
# (runtime/kernels/widen.h).
build/kiln compile "$ROOT/build/testdata/silero_vad_16k_op15/model.onnx" -o "$BUILD/silero_fp16.kiln" --arch none -q \
  --precision fp16

# The suppressions: oneDNN's own calls only (tests/stress/tsan_suppressions.txt says why).
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$ROOT/tests/stress/tsan_suppressions.txt ${TSAN_OPTIONS:-}"
# stress NAME ARTIFACT ARGS...: runs context_stress under TSan; fails on a report, a mismatch or an error.
stress() {
  local name=$1 log="$BUILD/context_stress_$1.log"
  shift
  log "context_stress $name under ThreadSanitizer: $*"
  set +e
  "$BUILD/tests/context_stress" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  if grep -q "WARNING: ThreadSanitizer" "$log"; then log "FAIL: ThreadSanitizer reported (log: $log)"; exit 1; fi
  [[ $rc == 0 ]] || { log "FAIL: context_stress exited $rc (log: $log)"; exit 1; }
}
stress silero "$BUILD/silero.kiln" --threads 8 --runs 1000 --pool-threads 2 \
  --shape input:1x576 --shape input:4x448 --shape input:32x703
stress silero_fp16 "$BUILD/silero_fp16.kiln" --threads 8 --runs 200 --pool-threads 2 \
  --shape input:1x576 --shape input:4x448 --shape input:32x703
stress cls "$BUILD/cls.kiln" --threads 8 --runs 50 --pool-threads 2 --shape x:1x3x48x192 --shape x:2x3x48x160
log "ok: no ThreadSanitizer reports, every output bit-identical"
