#!/usr/bin/env python3
"""ONNX twins of the models tests/compiler/trace/trace_models_test.cc builds with the C++
tracing API (include/kiln/trace.h), made with the pip `onnx` package, and ONNX Runtime's
outputs for them. For each model it writes

    OUT/<model>/model.onnx          the same ops as the API records (MatMul+Add for Linear, ...)
    OUT/<model>/<parameter>.npy     every weight, which the C++ test loads into its API model
    OUT/<model>/input_<name>.npy    a seeded random input
    OUT/<model>/expected_<name>.npy ONNX Runtime's output on CPU, graph optimizations off
    OUT/<model>/test_data_set_0/    the same input and outputs as input_N.pb / output_N.pb, the
                                    layout of ONNX's test data, so every real-model runner
                                    (tests/e2e/run_model_dir.py, scripts/gpu-check) takes them too

Models: "mlp" (Linear-Relu-Linear-Softmax, x: float32[N, 16]) and "encoder" (a transformer
encoder block: multi-head self-attention, residual + LayerNorm, Gelu FFN, residual +
LayerNorm; x: float32[N, T, 32], 2 heads of 16). Seeded: reruns write the same bytes.

usage: make_trace_models.py --out build/testdata-trace
"""
import argparse
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 20  # Gelu
D, HEADS, FFN = 32, 2, 64


class Graph:
    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits, self.params = [], [], {}

    def param(self, name, shape, scale=None, offset=0.0):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        value = (offset + scale * self.rng.standard_normal(shape)).astype(np.float32)
        self.params[name] = value
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(self, x, name, fan_in, fan_out):
        w = self.param(name + ".weight", [fan_in, fan_out])
        b = self.param(name + ".bias", [fan_out], scale=0.1)
        return self.node("Add", [self.node("MatMul", [x, w], name + ".matmul"), b], name)

    def layer_norm(self, x, name):
        g = self.param(name + ".weight", [D], scale=0.1, offset=1.0)
        b = self.param(name + ".bias", [D], scale=0.1)
        return self.node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-5)

    def model(self, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_trace_models")
        m.ir_version = 9
        onnx.checker.check_model(m, full_check=True)
        return m


def mlp(rng):
    g = Graph(rng)
    h = g.node("Relu", [g.linear("x", "fc1", 16, 32)], "relu")
    g.node("Softmax", [g.linear(h, "fc2", 32, 10)], "probs", axis=-1)
    m = g.model("mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])])
    return m, g.params, {"x": rng.standard_normal((4, 16)).astype(np.float32)}


def heads(g, x, name, perm):
    """[N, T, D] -> [N, HEADS, T, D/HEADS] (perm 0,2,1,3) or its transpose (0,2,3,1)."""
    r = g.node("Reshape", [x, g.const(name + ".split.shape", np.array([0, 0, HEADS, D // HEADS], np.int64))],
               name + ".split")
    return g.node("Transpose", [r], name + ".heads", perm=perm)


def encoder(rng):
    g = Graph(rng)
    q = heads(g, g.linear("x", "q", D, D), "q", [0, 2, 1, 3])
    k = heads(g, g.linear("x", "k", D, D), "k", [0, 2, 3, 1])
    v = heads(g, g.linear("x", "v", D, D), "v", [0, 2, 1, 3])
    # 1/sqrt(16) is exact in float32, so the C++ scalar and this constant are the same number.
    # Named as the C++ operator names it (kiln::trace::operator* gives "mul", "mul.scalar").
    scores = g.node("Mul", [g.node("MatMul", [q, k], "scores"), g.const("mul.scalar", np.float32(0.25))], "mul")
    context = g.node("MatMul", [g.node("Softmax", [scores], "attention", axis=-1), v], "context")
    merged = g.node("Transpose", [context], "context.merge", perm=[0, 2, 1, 3])
    merged = g.node("Reshape", [merged, g.const("context.flat.shape", np.array([0, 0, D], np.int64))], "context.flat")
    h1 = g.layer_norm(g.node("Add", ["x", g.linear(merged, "attn_out", D, D)], "residual1"), "norm1")
    f = g.linear(g.node("Gelu", [g.linear(h1, "ffn1", D, FFN)], "ffn.gelu"), "ffn2", FFN, D)
    g.layer_norm(g.node("Add", [h1, f], "residual2"), "norm2")
    m = g.model("encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", D])],
                [helper.make_tensor_value_info("norm2", TensorProto.FLOAT, ["N", "T", D])])
    return m, g.params, {"x": rng.standard_normal((2, 5, D)).astype(np.float32)}


def write(out, name, model, params, inputs):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for p, value in params.items():
        np.save(os.path.join(folder, p + ".npy"), value)
    for i, value in inputs.items():
        np.save(os.path.join(folder, "input_" + i + ".npy"), value)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outputs = session.run(None, inputs)
    for o, value in zip(session.get_outputs(), outputs):
        np.save(os.path.join(folder, "expected_" + o.name + ".npy"), value)
    test_set = os.path.join(folder, "test_data_set_0")
    os.makedirs(test_set, exist_ok=True)
    for k, (i, value) in enumerate(inputs.items()):
        onnx.save_tensor(numpy_helper.from_array(value, i), os.path.join(test_set, f"input_{k}.pb"))
    for k, (o, value) in enumerate(zip(session.get_outputs(), outputs)):
        onnx.save_tensor(numpy_helper.from_array(np.asarray(value), o.name), os.path.join(test_set, f"output_{k}.pb"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    for i, make in enumerate([mlp, encoder]):
        model, params, inputs = make(np.random.default_rng(100 + i))
        write(args.out, model.graph.name, model, params, inputs)
    print(f"make_trace_models: mlp and encoder -> {args.out}")


if __name__ == "__main__":
    main()
