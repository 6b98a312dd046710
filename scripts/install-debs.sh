#!/usr/bin/env bash
# Installs the given Debian packages that are not installed yet (apt-get, as root or with
# sudo), logging to build/apt.log. Used by scripts/setup.sh and scripts/sanitize.sh.
#   bash scripts/install-debs.sh TAG PACKAGE...     (TAG prefixes the log lines: "[TAG] ...")
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
tag="$1"
shift
log() { echo "[$tag] $*"; }

missing=()
for pkg in "$@"; do
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then missing+=("$pkg"); fi
done
if ((${#missing[@]} == 0)); then
  log "Debian packages: all present"
  exit 0
fi
log "installing Debian packages: ${missing[*]}"
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { log "error: not root and no sudo; install: ${missing[*]}"; exit 1; }
  SUDO=(sudo)
fi
mkdir -p "$BUILD"
{
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update &&
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
} >"$BUILD/apt.log" 2>&1 || { tail -30 "$BUILD/apt.log"; log "error: apt-get failed (log: build/apt.log)"; exit 1; }
