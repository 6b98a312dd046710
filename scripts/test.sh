#!/usr/bin/env bash
# Builds Kiln and runs every test: the doctest unit tests and the real-model end-to-end tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh
echo "[test] real-model test data from pip packages -> build/testdata"
build/venv/bin/python tests/e2e/make_package_testdata.py --out build/testdata
echo "[test] ONNX backend test data (conformance suite) -> build/onnx-tests"
build/venv/bin/python tests/conformance/get_onnx_tests.py --out build/onnx-tests
build/venv/bin/python tests/conformance/make_light_testdata.py --light build/onnx-tests/light --out build/onnx-tests/light-cases
echo "[test] ctest"
ctest --test-dir build --output-on-failure -j2
