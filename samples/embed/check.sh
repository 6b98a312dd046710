#!/usr/bin/env bash
# samples/embed's check, run by scripts/samples.sh against the installed package:
#   check.sh SAMPLE_BUILD_DIR INSTALL_PREFIX KILN_BUILD_DIR
# Compiles Silero VAD (KILN_BUILD_DIR/testdata, made by scripts/test.sh) with the installed kiln
# tool, runs the embed binary on ONNX test inputs and on zeros, and compares what it prints
# with onnxruntime's outputs; then its errors: exit codes and messages (check.py).
set -euo pipefail
SAMPLE=$1 PREFIX=$2 BUILD=$3
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$BUILD/venv/bin/python" "$HERE/check.py" --embed "$SAMPLE/embed" --kiln "$PREFIX/bin/kiln" \
  --model-dir "$BUILD/testdata/silero_vad_16k_op15" --work "$SAMPLE/check"
