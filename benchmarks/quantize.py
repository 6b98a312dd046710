#!/usr/bin/env python3
"""Quantized twins of benchmark model folders, made with onnxruntime's own tools, for
benchmarks/compare.py (docs/quantization.md).

    build/venv/bin/python benchmarks/quantize.py build/zoo/resnet50-ts build/zoo/bert_base-ts \\
        [--out build/zoo-int8] [--kinds qdq,dynamic]
    build/venv/bin/python benchmarks/compare.py build/zoo-int8/resnet50-ts-qdq ... --threads 1,2

For each model folder (model.onnx and test_data_set_0/input_N.pb, as benchmarks/zoo.py writes
them) and each kind, OUT/NAME-KIND/ gets model.onnx, a copy of test_data_set_0, and
FLOAT_MODEL.txt, the float folder's path relative to it (compare.py's accuracy rule reads it):
  qdq      onnxruntime.quantization.quantize_static, QuantFormat.QDQ, uint8 activations, int8
           weights per channel, calibrated (MinMax) on the folder's own inputs;
  dynamic  onnxruntime.quantization.quantize_dynamic, int8 weights per tensor (its defaults).
Both after onnxruntime's quant_pre_process (shape inference and its graph optimisations, as its
documentation asks). A model the tool fails on is reported with the error's first line, and the
next goes on. Prints one line per model made: its size against the float model's, and its op
counts. Needs onnx and onnxruntime (build/venv has both); never run in CI.
"""
import argparse
import collections
import glob
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load_inputs(folder):
    model = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feeds = {}
    for k, name in enumerate(names):
        t = onnx.TensorProto()
        with open(os.path.join(folder, "test_data_set_0", f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feeds[name] = numpy_helper.to_array(t)
    return feeds


def quantize(folder, out, kind):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    feeds = load_inputs(folder)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([feeds])

        def get_next(self):
            return next(self.it, None)

    os.makedirs(out, exist_ok=True)
    pre = os.path.join(out, "pre.onnx")
    dst = os.path.join(out, "model.onnx")
    quant_pre_process(os.path.join(folder, "model.onnx"), pre, skip_symbolic_shape=True)
    try:
        if kind == "qdq":
            quantize_static(pre, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        else:
            quantize_dynamic(pre, dst, weight_type=QuantType.QInt8)
    finally:
        for f in glob.glob(os.path.join(out, "pre.onnx*")):
            os.remove(f)
    shutil.copytree(os.path.join(folder, "test_data_set_0"), os.path.join(out, "test_data_set_0"), dirs_exist_ok=True)
    # The float model it was made from, for benchmarks/compare.py's accuracy rule of quantized models.
    with open(os.path.join(out, "FLOAT_MODEL.txt"), "w") as f:
        f.write(os.path.relpath(folder, out) + "\n")
    ops = collections.Counter(n.op_type for n in onnx.load(dst).graph.node)
    size, base = os.path.getsize(dst), os.path.getsize(os.path.join(folder, "model.onnx"))
    print(f"{out}: {size / 1e6:.2f} MB ({size / base:.2f}x the float model), "
          + ", ".join(f"{op} {n}" for op, n in ops.most_common(8)), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="model folders (model.onnx, test_data_set_0/)")
    ap.add_argument("--out", default="build/zoo-int8", help="where the quantized folders go")
    ap.add_argument("--kinds", default="qdq,dynamic", help="qdq, dynamic or both, comma-separated")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    for k in kinds:
        if k not in ("qdq", "dynamic"):
            ap.error(f"unknown kind {k!r} (qdq or dynamic)")
    failed = 0
    for folder in args.folders:
        name = os.path.basename(os.path.normpath(folder))
        for kind in kinds:
            try:
                quantize(folder, os.path.join(args.out, f"{name}-{kind}"), kind)
            except Exception as e:  # the tool's own errors: report and go on
                failed += 1
                print(f"{name}-{kind}: failed: {(str(e).splitlines()[0] if str(e) else type(e).__name__)[:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
