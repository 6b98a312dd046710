#!/usr/bin/env bash
# Installs Kiln's build and builds every sample against the installed package alone
# (docs/embedding.md, "Install and link" and "Samples"); scripts/test.sh runs it after ctest.
#   scripts/samples.sh [BUILD_DIR]    BUILD_DIR: the build to install, default build/
# 1. cmake --install BUILD_DIR --prefix BUILD_DIR/install; no installed file may name the
#    source or build tree (text files, and RUNPATHs of the binaries).
# 2. The footprint: libkiln_runtime.so's size stripped, and its ldd list.
# 3. Each samples/<name>/ with a CMakeLists.txt is configured and built in
#    BUILD_DIR/samples-installed/<name> with CMAKE_PREFIX_PATH=<prefix> and nothing else: its
#    include paths must come from the package (or its own folder), and its binaries must load
#    libkiln_runtime.so from the prefix. Samples that need Kiln::compiler are skipped when the
#    build has none (KILN_BUILD_COMPILER=OFF).
# 4. samples/embed built once more with `pkg-config --cflags --libs kiln-runtime`.
# 5. Each sample's check: samples/<name>/check.sh <sample build dir> <prefix> <BUILD_DIR>,
#    exit 0 pass, anything else fail.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
PREFIX="$BUILD/install"
OUT="$BUILD/samples-installed"
START=$SECONDS
log() { echo "[samples] $*"; }
die() { log "FAIL: $*"; exit 1; }

# --- 1. install -------------------------------------------------------------------------------
rm -rf "$PREFIX" "$OUT"
mkdir -p "$OUT"
log "cmake --install $BUILD --prefix $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >"$OUT/install.log" 2>&1 ||
  { cat "$OUT/install.log"; die "install failed"; }
named=$(grep -rIlF -e "$ROOT" "$PREFIX" || true)
[[ -z $named ]] || die "installed files name the source or build tree ($ROOT): $named"
while IFS= read -r -d '' f; do
  if readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH' | grep -qF -e "$ROOT"; then
    die "$f has a RUNPATH into $ROOT: $(readelf -d "$f" | grep -E 'R(UN)?PATH')"
  fi
done < <(find "$PREFIX" -type f -print0)
LIBDIR="$(dirname "$(find "$PREFIX" -name 'libkiln_runtime.so' | head -1)")"
[[ -f $LIBDIR/libkiln_runtime.so ]] || die "no libkiln_runtime.so under $PREFIX"

# --- 2. footprint -----------------------------------------------------------------------------
strip -o "$OUT/libkiln_runtime.stripped.so" "$LIBDIR/libkiln_runtime.so"
log "footprint: libkiln_runtime.so $(stat -c %s "$OUT/libkiln_runtime.stripped.so") bytes stripped" \
    "($(stat -c %s "$(readlink -f "$LIBDIR/libkiln_runtime.so")") as installed); ldd:"
ldd "$LIBDIR/libkiln_runtime.so" | sed 's/^\s*/[samples]   /'

# --- 3. each sample against the installed package ----------------------------------------------
SAMPLES=()
for list in "$ROOT"/samples/*/CMakeLists.txt; do
  dir="${list%/CMakeLists.txt}" name="$(basename "${list%/CMakeLists.txt}")"
  if grep -q 'Kiln::compiler' "$list" && [[ ! -e $LIBDIR/libkiln_compiler.so ]]; then
    log "$name: skipped (needs Kiln::compiler; this build has no compiler)"
    continue
  fi
  log "$name: building against $PREFIX"
  cmake -S "$dir" -B "$OUT/$name" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$OUT/$name.configure.log" 2>&1 ||
    { cat "$OUT/$name.configure.log"; die "$name: configure failed"; }
  cmake --build "$OUT/$name" -j"$(nproc)" >"$OUT/$name.build.log" 2>&1 ||
    { tail -40 "$OUT/$name.build.log"; die "$name: build failed (log: $OUT/$name.build.log)"; }
  # Include paths into the repository other than the package's and the sample's own are a
  # leak from the source or build tree.
  leaks=$(grep -oE -- '-(I|isystem )[^ "]+' "$OUT/$name/compile_commands.json" | sed -E 's/^-(I|isystem )//' |
          grep -F "$ROOT" | grep -vF -e "$PREFIX" -e "$dir" -e "$OUT/$name" | sort -u || true)
  [[ -z $leaks ]] || die "$name: include paths outside the installed package: $leaks"
  while IFS= read -r -d '' exe; do
    if ldd "$exe" | grep -q 'libkiln_'; then
      bad=$(ldd "$exe" | grep 'libkiln_' | grep -v -e "=> $LIBDIR/" || true)
      [[ -z $bad ]] || die "$name: $exe loads Kiln from outside $PREFIX: $bad"
    fi
  done < <(find "$OUT/$name" -maxdepth 1 -type f -executable -print0)
  SAMPLES+=("$name")
done

# --- 4. pkg-config ----------------------------------------------------------------------------
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
flags=$(pkg-config --cflags --libs kiln-runtime) || die "pkg-config kiln-runtime failed"
log "pkg-config --cflags --libs kiln-runtime: $flags"
# shellcheck disable=SC2086  # flags are words
"${CXX:-g++}" -std=c++20 -O2 "$ROOT/samples/embed/embed.cc" $flags -o "$OUT/embed-pkgconfig" ||
  die "embed does not build with pkg-config's flags"
set +e
usage=$(LD_LIBRARY_PATH="$LIBDIR" "$OUT/embed-pkgconfig" 2>&1); rc=$?
set -e
[[ $rc == 2 && $usage == "usage: embed "* ]] || die "embed-pkgconfig: exit $rc, expected 2 and its usage: $usage"
if [[ -e $LIBDIR/libkiln_compiler.so ]]; then
  pkg-config --exists --print-errors kiln-compiler || die "pkg-config kiln-compiler failed"
  log "pkg-config --libs kiln-compiler: $(pkg-config --libs kiln-compiler)"
fi

# --- 5. checks --------------------------------------------------------------------------------
for name in "${SAMPLES[@]}"; do
  check="$ROOT/samples/$name/check.sh"
  [[ -f $check ]] || { log "$name: no check.sh"; continue; }
  log "$name: check.sh"
  bash "$check" "$OUT/$name" "$PREFIX" "$BUILD" || die "$name: check.sh failed"
done
log "ok: ${#SAMPLES[@]} samples built against the installed package (${SAMPLES[*]}) in $((SECONDS - START)) s"
