#!/usr/bin/env python3
"""Writes a model with a run-time Loop, for the selective tier (scripts/selective.sh).

    make_loop_model.py OUT.onnx

The Loop halves x until its sum is at most 1 or M iterations ran (the halving model of
tests/features/control_flow_models.h): its trip count and condition are tensor data, so the
compiler keeps it as a run-time Loop (kiln.LoopBegin ... body ... kiln.LoopEnd). A selective runtime
whose op list names no kiln.LoopBegin and kiln.LoopEnd must refuse it at load.
"""
import sys

import onnx
from onnx import TensorProto, helper


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1].strip())
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "half"], ["x_next"], "mul"),
            helper.make_node("ReduceSum", ["x_next"], ["s"], "sum", keepdims=0),
            helper.make_node("Greater", ["s", "one"], ["go_on"], "above"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"]),
        ],
        [
            helper.make_tensor_value_info("go_on", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_next", TensorProto.FLOAT, ["N"]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
        ],
        [half],
    )
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x0"], ["s0"], "sum0", keepdims=0),
            helper.make_node("Greater", ["s0", "one"], ["c0"], "above0"),
            helper.make_node("Loop", ["M", "c0", "x0"], ["x_last", "sums"], "halve", body=body),
        ],
        "halving",
        [
            helper.make_tensor_value_info("M", TensorProto.INT64, []),
            helper.make_tensor_value_info("x0", TensorProto.FLOAT, ["N"]),
        ],
        [
            helper.make_tensor_value_info("x_last", TensorProto.FLOAT, ["N"]),
            helper.make_tensor_value_info("sums", TensorProto.FLOAT, ["T"]),
        ],
        [one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()
