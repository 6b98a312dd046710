#!/usr/bin/env bash
# samples/generate's check, run by scripts/samples.sh against the installed package:
#   check.sh SAMPLE_BUILD_DIR INSTALL_PREFIX KILN_BUILD_DIR
# Runs tests/python/test_generate_sample.py (scripts/python.sh runs it on the build tree's
# binaries) on the installed kiln tool and this build of the sample: greedy generation with
# gpt2_kv.onnx against onnxruntime's, and the sample's errors.
set -euo pipefail
SAMPLE=$1 PREFIX=$2 BUILD=$3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KILN_TOOL="$PREFIX/bin/kiln" KILN_GENERATE="$SAMPLE/generate" \
  exec "$BUILD/venv/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/tests/python/test_generate_sample.py"
