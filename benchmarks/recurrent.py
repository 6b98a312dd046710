#!/usr/bin/env python3
"""Recurrent layers alone: a bidirectional LSTM and GRU (sequence 100, batch 1, input and hidden
256, random weights under seed 0, ONNX opset 14), Kiln beside onnxruntime and OpenVINO.

    build/venv/bin/python benchmarks/recurrent.py [--threads 1,2] [--rounds 3] [--seconds 1.0]
                                                  [--out build/recurrent-bench]

Writes OUT/bilstm/ and OUT/bigru/ (model.onnx and test_data_set_0/input_0.pb, X [100, 1, 256])
and runs benchmarks/compare.py on them: outputs checked against onnxruntime first, then the
three interleaved at each thread count.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, BATCH, INPUT, HIDDEN = 100, 1, 256, 256


def write(out, op):
    gates = {"LSTM": 4, "GRU": 3}[op]
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((2, gates * HIDDEN, INPUT)) * 0.1).astype(np.float32), "W")
    r = numpy_helper.from_array((rng.standard_normal((2, gates * HIDDEN, HIDDEN)) * 0.1).astype(np.float32), "R")
    b = numpy_helper.from_array((rng.standard_normal((2, 2 * gates * HIDDEN)) * 0.1).astype(np.float32), "B")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [SEQ, BATCH, INPUT])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [SEQ, 2, BATCH, HIDDEN])
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y"], hidden_size=HIDDEN, direction="bidirectional")
    model = helper.make_model(helper.make_graph([node], op.lower(), [x], [y], [w, r, b]),
                              opset_imports=[helper.make_opsetid("", 14)])
    folder = os.path.join(out, "bi" + op.lower())
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    xs = rng.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    with open(os.path.join(folder, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(xs, "x").SerializeToString())
    return folder


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--out", default="build/recurrent-bench")
    args = ap.parse_args()
    folders = [write(args.out, op) for op in ("LSTM", "GRU")]
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.call([sys.executable, os.path.join(here, "compare.py"), *folders, "--threads", args.threads,
                            "--rounds", str(args.rounds), "--seconds", str(args.seconds),
                            "--work", os.path.join(args.out, "work")])


if __name__ == "__main__":
    sys.exit(main())
