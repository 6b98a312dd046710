#!/usr/bin/env bash
# Makes the benchmark venv that benchmarks/zoo.py runs in: build/bench-venv, apart from the
# project's build/venv (which CI makes and uses; none of this is installed there, nor run in CI).
#
#   bash benchmarks/zoo-setup.sh
#
# torch comes from TORCH_INDEX_URL when that is set and reachable (a CPU-only wheel index spares
# the CUDA libraries, about 4 GB), else from PyPI, whose Linux wheel brings them: the zoo runs on
# the CPU either way. Versions are pinned to those the zoo was first exported with; the venv takes
# about 6.5 GB with PyPI's torch.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/build/bench-venv"
PY="${PYTHON:-python3}"

TORCH=(torch==2.15.0 torchvision==0.29.2)
REST=(timm==1.0.31 transformers==5.25.0 ultralytics==8.4.190 onnx==1.23.2 onnxscript==0.7.2
      onnxruntime==1.32.0)

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
PIP=(nice -n 19 "$VENV/bin/python" -m pip install --disable-pip-version-check)
"${PIP[@]}" -q --upgrade pip

if [ -n "${TORCH_INDEX_URL:-}" ] && "${PIP[@]}" --index-url "$TORCH_INDEX_URL" --timeout 20 --retries 0 "${TORCH[@]}"; then
    echo "zoo-setup: torch from $TORCH_INDEX_URL"
else
    [ -n "${TORCH_INDEX_URL:-}" ] && echo "zoo-setup: $TORCH_INDEX_URL not reachable; torch from PyPI"
    "${PIP[@]}" "${TORCH[@]}"
fi
"${PIP[@]}" "${TORCH[@]}" "${REST[@]}"
"$VENV/bin/python" -c "import torch, torchvision, timm, transformers, ultralytics, onnx, onnxscript, onnxruntime as o
print('zoo-setup: ready:', ', '.join(f'{m.__name__} {m.__version__}' for m in
      (torch, torchvision, timm, transformers, ultralytics, onnx, onnxscript, o)))"
echo "zoo-setup: now run $VENV/bin/python benchmarks/zoo.py"
