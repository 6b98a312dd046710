#!/usr/bin/env bash
# The Triton tier (serving/triton/README.md): Kiln's backend, build/triton/backends/kiln/
# libtriton_kiln.so, in the real Triton Inference Server, checked against onnxruntime.
#   scripts/triton.sh [--asan SANITIZE_BUILD] [BUILD_DIR]
#     BUILD_DIR: the build whose backend and kiln tool to use (default build)
#     --asan SANITIZE_BUILD: serve SANITIZE_BUILD's backend (scripts/sanitize.sh's ASan+UBSan build,
#       target triton_kiln) instead, with clang's ASan runtime preloaded into tritonserver (which is
#       not instrumented itself); any report fails the run. Leaks are left to the memory checks.
# 1. build/triton-venv: nvidia-pytriton, whose wheel ships tritonserver 2.51 and Triton's client
#    (tritonclient, HTTP and gRPC). Its own venv, since it pins numpy 1.x and the test-data venv
#    (build/venv) numpy 2.
# 2. tests/serving/triton_refs.py (build/venv, onnxruntime): reference outputs as .npy files.
# 3. tests/serving/triton_test.py (build/triton-venv): the repository, the server on loopback
#    ports, and every check; its server log is build/triton-test/tritonserver.log.
# Needs scripts/test.sh's test data (build/testdata). Safe to run again.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASAN_BUILD=""
if [[ ${1:-} == --asan ]]; then
  ASAN_BUILD="$(cd "$2" && pwd)"
  shift 2
fi
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
VENV="$BUILD/triton-venv"
log() { echo "[triton] $*"; }
die() { log "FAIL: $*"; exit 1; }

BACKEND_BUILD="${ASAN_BUILD:-$BUILD}"
[[ -f "$BACKEND_BUILD/triton/backends/kiln/libtriton_kiln.so" ]] ||
  die "no backend in $BACKEND_BUILD/triton/backends/kiln (KILN_BUILD_TRITON_BACKEND=OFF?)"
ASAN_ARGS=()
if [[ -n $ASAN_BUILD ]]; then
  runtime="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
  [[ -f $runtime ]] || die "no ASan runtime (clang -print-file-name=libclang_rt.asan-x86_64.so: $runtime)"
  ASAN_ARGS=(--backend-build "$ASAN_BUILD" --asan-runtime "$runtime")
fi
[[ -d "$BUILD/testdata/ch_ppocr_mobile_v2.0_cls" ]] || die "no test data in $BUILD/testdata (scripts/test.sh makes it)"
if [[ ! -x "$VENV/bin/python" ]]; then
  PY=python3
  [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
  log "creating venv at $VENV"
  "$PY" -m venv "$VENV"
fi
log "pip: nvidia-pytriton==0.7.0 (tritonserver 2.51, tritonclient)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check nvidia-pytriton==0.7.0
"$BUILD/venv/bin/python" "$ROOT/tests/serving/triton_refs.py" --testdata "$BUILD/testdata" --out "$BUILD/triton-test/refs"
"$VENV/bin/python" "$ROOT/tests/serving/triton_test.py" --build "$BUILD" --refs "$BUILD/triton-test/refs" "${ASAN_ARGS[@]}"
