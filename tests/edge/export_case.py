#!/usr/bin/env python3
"""Converts one ONNX test set into raw tensors that a runtime-only program reads without protobuf
(tests/edge/artifact_check.cc, run on aarch64 under qemu by scripts/aarch64.sh).

    export_case.py MODEL_DIR OUT [--set K] [--perturb]

MODEL_DIR holds model.onnx and test_data_set_K/{input_N.pb, output_N.pb} (onnxruntime's outputs,
tests/e2e/make_package_testdata.py). OUT gets one NAME.bin per tensor (its little-endian,
row-major bytes) and manifest.txt, one line per tensor, the inputs then the outputs, each in the
model's order:

    input|output NAME DTYPE RANK DIM... FILE

DTYPE is ONNX's TensorProto data type number, which kiln::DType shares. --perturb adds 0.01 to
the first element of the first output, a case artifact_check must reject (so its check can fail).
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--set", type=int, default=0)
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args()

    model = onnx.load(os.path.join(args.model_dir, "model.onnx"), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    outputs = list(model.graph.output)
    folder = os.path.join(args.model_dir, f"test_data_set_{args.set}")
    os.makedirs(args.out, exist_ok=True)
    lines = []
    for kind, infos in (("input", inputs), ("output", outputs)):
        for n, info in enumerate(infos):
            tensor = onnx.TensorProto()
            with open(os.path.join(folder, f"{kind}_{n}.pb"), "rb") as f:
                tensor.ParseFromString(f.read())
            array = numpy_helper.to_array(tensor).copy(order="C")  # ascontiguousarray makes a scalar 1-d
            if kind == "output" and n == 0 and args.perturb:
                array.flat[0] += 0.01
            file = f"{kind}_{n}.bin"
            array.astype(array.dtype.newbyteorder("<")).tofile(os.path.join(args.out, file))
            dims = " ".join(str(d) for d in array.shape)
            lines.append(f"{kind} {info.name} {tensor.data_type} {array.ndim} {dims} {file}".replace("  ", " "))
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{args.out}: {len(inputs)} inputs, {len(outputs)} outputs")


if __name__ == "__main__":
    sys.exit(main())
