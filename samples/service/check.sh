#!/usr/bin/env bash
# Checks the service sample end to end (scripts/samples.sh runs it after building the sample):
#   check.sh <sample build dir> <install prefix> <kiln repo build dir>
# Compiles Silero VAD with the installed kiln tool, then test_service.py starts the service on a
# free loopback port and checks concurrent answers against onnxruntime, malformed requests,
# /metrics and a graceful SIGTERM. Exit 0: pass.
set -euo pipefail

build="$1" prefix="$2" kiln_build="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
onnx="$kiln_build/testdata/silero_vad_16k_op15/model.onnx"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$prefix/bin/kiln" compile "$onnx" -o "$tmp/vad.kiln" --arch none >"$tmp/compile.log" 2>&1 ||
  { cat "$tmp/compile.log"; echo "check.sh: kiln compile failed" >&2; exit 1; }
"$kiln_build/venv/bin/python" "$here/test_service.py" "$build/service" "$tmp/vad.kiln" "$onnx"
