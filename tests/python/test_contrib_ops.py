"""onnxruntime's com.microsoft ops that Kiln imports (compiler/onnx/importer.cc, ImportContribNode;
docs/quantization.md), each on generated inputs against onnxruntime running the same model: the
specification (onnxruntime's docs/ContribOperators.md) has few examples, so onnxruntime's own
kernels are the reference. Float ops within float32 rounding; quantized outputs within one
quantization step (an int8 or uint8 output one apart is rounding, more is a bug).

    build/venv/bin/python -m pytest tests/python/test_contrib_ops.py   (scripts/python.sh runs it)
"""
import numpy as np
import onnx.numpy_helper as nh
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import kiln

RNG = np.random.default_rng(7)


def model_of(node, inputs, outputs, inits=()):
    graph = h.make_graph([node], "contrib", inputs, outputs, list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])


def both(model, feeds):
    """Kiln's outputs and onnxruntime's (graph optimisations off: its kernels as they are)."""
    compiled = kiln.load(kiln.compile(model, archs="none", progress=False))
    got = compiled.context(device="cpu", cpu_threads=1).run(feeds)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)
    return got, want


def u8(name, shape):
    return h.make_tensor_value_info(name, T.UINT8, shape)


def f32(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def scalar(name, value, dtype):
    return nh.from_array(np.array(value, dtype), name)


def ms(node):
    node.domain = "com.microsoft"
    return node


FLOAT_CASES = {
    "Gelu": (["x"], {}),
    "FastGelu": (["x", "bias"], {}),
    "BiasGelu": (["x", "bias"], {}),
    "QuickGelu": (["x"], {"alpha": 1.5}),
}  # BiasAdd has no CPU kernel in onnxruntime: tests/compiler/onnx/contrib_ops_test.cc checks its formula


@pytest.mark.parametrize("op", sorted(FLOAT_CASES))
def test_float_contrib_op_matches_onnxruntime(op):
    names, attrs = FLOAT_CASES[op]
    x = RNG.uniform(-4, 4, (1, 3, 8)).astype(np.float32)
    inits = [nh.from_array(RNG.uniform(-1, 1, (8,)).astype(np.float32), "bias"),
             nh.from_array(RNG.uniform(-1, 1, (1, 3, 8)).astype(np.float32), "skip")]
    model = model_of(ms(h.make_node(op, names, ["y"], **attrs)), [f32("x", [1, 3, 8])], [f32("y", [1, 3, 8])],
                     [i for i in inits if i.name in names])
    got, want = both(model, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("op", ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization"])
def test_skip_layer_norms_match_onnxruntime(op):
    x = RNG.uniform(-2, 2, (2, 3, 8)).astype(np.float32)
    skip = RNG.uniform(-1, 1, (2, 3, 8)).astype(np.float32)
    names = ["x", "skip", "gamma"] + (["beta"] if op == "SkipLayerNormalization" else []) + ["bias"]
    inits = [nh.from_array(RNG.uniform(0.5, 1.5, (8,)).astype(np.float32), "gamma"),
             nh.from_array(RNG.uniform(-1, 1, (8,)).astype(np.float32), "beta"),
             nh.from_array(RNG.uniform(-1, 1, (8,)).astype(np.float32), "bias")]
    node = ms(h.make_node(op, names, ["y", "", "", "sum"], epsilon=1e-5))
    model = model_of(node, [f32("x", [2, 3, 8]), f32("skip", [2, 3, 8])], [f32("y", [2, 3, 8]), f32("sum", [2, 3, 8])],
                     [i for i in inits if i.name in names])
    got, want = both(model, {"x": x, "skip": skip})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def assert_within_a_step(got, want):
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1, f"{int(diff.max())} steps apart"
    assert (diff > 0).mean() < 0.05


QUANTIZED_UNARY = {
    "QLinearSigmoid": {},
    "QLinearLeakyRelu": {"alpha": 0.2},
    "QLinearGlobalAveragePool": {},
    "QLinearAveragePool": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "count_include_pad": 0},
}


@pytest.mark.parametrize("op", sorted(QUANTIZED_UNARY))
def test_quantized_unary_contrib_op_within_a_step(op):
    x = RNG.integers(0, 256, (1, 4, 9, 9), dtype=np.uint8)
    inits = [scalar("xs", 0.05, np.float32), scalar("xz", 120, np.uint8), scalar("ys", 0.01 if "Sigmoid" in op
             else 0.04, np.float32), scalar("yz", 3 if "Sigmoid" in op else 110, np.uint8)]
    node = ms(h.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], **QUANTIZED_UNARY[op]))
    model = model_of(node, [u8("x", [1, 4, 9, 9])], [u8("y", None)], inits)
    got, want = both(model, {"x": x})
    assert got[0].shape == want[0].shape
    assert_within_a_step(got[0], want[0])


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_quantized_binary_contrib_op_within_a_step(op):
    a = RNG.integers(0, 256, (2, 3, 16), dtype=np.uint8)
    b = RNG.integers(0, 256, (16,), dtype=np.uint8)
    inits = [scalar("as", 0.03, np.float32), scalar("az", 128, np.uint8), scalar("bs", 0.02, np.float32),
             scalar("bz", 100, np.uint8), scalar("cs", 0.05 if op == "QLinearAdd" else 0.2, np.float32),
             scalar("cz", 127, np.uint8)]
    node = ms(h.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"]))
    model = model_of(node, [u8("a", [2, 3, 16]), u8("b", [16])], [u8("c", [2, 3, 16])], inits)
    got, want = both(model, {"a": a, "b": b})
    assert_within_a_step(got[0], want[0])


def test_quantized_concat_within_a_step():
    a = RNG.integers(0, 256, (1, 2, 5), dtype=np.uint8)
    b = RNG.integers(0, 256, (1, 3, 5), dtype=np.uint8)
    inits = [scalar("ys", 0.05, np.float32), scalar("yz", 128, np.uint8), scalar("as", 0.03, np.float32),
             scalar("az", 120, np.uint8), scalar("bs", 0.07, np.float32), scalar("bz", 90, np.uint8)]
    node = ms(h.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], axis=1))
    model = model_of(node, [u8("a", [1, 2, 5]), u8("b", [1, 3, 5])], [u8("y", [1, 5, 5])], inits)
    got, want = both(model, {"a": a, "b": b})
    assert_within_a_step(got[0], want[0])


def test_quantize_and_dequantize_linear_of_com_microsoft():
    x = RNG.uniform(-3, 3, (2, 4, 3)).astype(np.float32)
    inits = [nh.from_array(np.array([0.02, 0.05, 0.1, 0.03], np.float32), "s"),
             nh.from_array(np.array([128, 100, 0, 255], np.uint8), "z")]
    nodes = [ms(h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1)),
             ms(h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1))]
    graph = h.make_graph(nodes, "qdq", [f32("x", [2, 4, 3])], [f32("y", [2, 4, 3])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    got, want = both(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("requantized", [True, False], ids=["uint8", "float"])
def test_qgemm_matches_onnxruntime(requantized):
    a = RNG.integers(0, 256, (5, 32), dtype=np.uint8)
    inits = [scalar("as", 0.02, np.float32), scalar("az", 120, np.uint8),
             nh.from_array(RNG.integers(-127, 128, (16, 32), dtype=np.int8), "b"),
             nh.from_array(np.linspace(0.004, 0.01, 16).astype(np.float32), "bs"),
             nh.from_array(np.zeros(16, np.int8), "bz"),
             nh.from_array(RNG.integers(-5000, 5000, (16,), dtype=np.int32), "c"),
             scalar("ys", 0.5, np.float32), scalar("yz", 7, np.uint8)]
    names = ["a", "as", "az", "b", "bs", "bz", "c"] + (["ys", "yz"] if requantized else [])
    node = ms(h.make_node("QGemm", names, ["y"], transB=1, alpha=0.75))
    out = u8("y", [5, 16]) if requantized else f32("y", [5, 16])
    model = model_of(node, [u8("a", [5, 32])], [out], [i for i in inits if i.name in names])
    got, want = both(model, {"a": a})
    if requantized:
        assert_within_a_step(got[0], want[0])
    else:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)


def test_matmul_integer_to_float_and_dynamic_quantize_matmul_match_onnxruntime():
    b = RNG.integers(-127, 128, (24, 12), dtype=np.int8)
    bias = RNG.uniform(-1, 1, (12,)).astype(np.float32)
    a_q = RNG.integers(0, 256, (3, 24), dtype=np.uint8)
    inits = [nh.from_array(b, "b"), nh.from_array(np.linspace(0.01, 0.02, 12).astype(np.float32), "bs"),
             nh.from_array(np.zeros(12, np.int8), "bz"), nh.from_array(bias, "bias"),
             scalar("as", 0.03, np.float32), scalar("az", 100, np.uint8)]
    node = ms(h.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"], ["y"]))
    got, want = both(model_of(node, [u8("a", [3, 24])], [f32("y", [3, 12])], inits), {"a": a_q})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    # DynamicQuantizeMatMul quantizes A itself: the int32 sums are exact, so only float32
    # rounding separates the two.
    a = RNG.uniform(-2, 2, (3, 24)).astype(np.float32)
    node = ms(h.make_node("DynamicQuantizeMatMul", ["a", "b", "bs", "bz", "bias"], ["y"]))
    got, want = both(model_of(node, [f32("a", [3, 24])], [f32("y", [3, 12])],
                              [i for i in inits if i.name in ("b", "bs", "bz", "bias")]), {"a": a})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-4)
