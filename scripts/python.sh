#!/usr/bin/env bash
# The Python tier (python/README.md): the kiln package's tests (tests/python, pytest: every bundled
# real model against onnxruntime, DLPack, threads, Thunder's stats and traces, errors, memory,
# the README's example verbatim), then mypy --strict on the package and on the README's example.
# Needs scripts/setup.sh's `pip install .` into build/venv and scripts/test.sh's test data
# (build/testdata). Safe to run again.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=build/venv/bin/python
log() { echo "[python] $*"; }

"$PY" -c "import kiln" 2>/dev/null || { log "FAIL: the kiln package is not installed in build/venv (scripts/setup.sh)"; exit 1; }
log "pytest tests/python"
"$PY" -m pytest -q -rs -p no:cacheprovider tests/python
log "mypy --strict: the package and the README's example"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PY" - "$work/readme_example.py" <<'PY'
import re, sys
text = open("README.md").read()
example = re.search(r"<!-- python-example -->\n```python\n(.*?)```", text, re.S)
if not example:
    sys.exit("README.md has no <!-- python-example --> block")
open(sys.argv[1], "w").write(example.group(1))
PY
"$PY" -m mypy --strict --cache-dir "$work/mypy-cache" python/kiln "$work/readme_example.py"
