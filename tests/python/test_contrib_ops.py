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


# ---- the ops of onnxruntime's transformer optimizer whose ONNX form depends on shapes --------
# (compiler/passes/contrib_ops.cc writes them out in the canonical stage; docs/contrib_ops.md)

def i32(name, shape):
    return h.make_tensor_value_info(name, T.INT32, shape)


def i64(name, shape):
    return h.make_tensor_value_info(name, T.INT64, shape)


def check_float(model, feeds, rtol=1e-5, atol=1e-5):
    got, want = both(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("trans", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0),
                                   (0, 0, 0, 1), (1, 1, 1, 1), (0, 1, 1, 0)],
                         ids=lambda t: "transA{}_transB{}_transBatchA{}_transBatchB{}".format(*t))
def test_fused_matmul_matches_onnxruntime(trans):
    ta, tb, tba, tbb = trans
    # A as stored, for op(A) = [2, 3, 4, 5]; B for op(B) = [2, 3, 5, 6].
    def stored(shape, batch, tr):
        s = list(shape)
        if tr:
            s[-1], s[-2] = s[-2], s[-1]
        if batch:  # op moves dim 0 to just before the last: undo it
            s = [s[-2]] + s[:-2] + [s[-1]]
        return s
    sa, sb = stored([2, 3, 4, 5], tba, ta), stored([2, 3, 5, 6], tbb, tb)
    node = ms(h.make_node("FusedMatMul", ["a", "b"], ["y"], alpha=0.25, transA=ta, transB=tb, transBatchA=tba,
                          transBatchB=tbb))
    model = model_of(node, [f32("a", sa), f32("b", sb)], [f32("y", None)])
    check_float(model, {"a": RNG.uniform(-1, 1, sa).astype(np.float32), "b": RNG.uniform(-1, 1, sb).astype(np.float32)})


def test_fused_matmul_broadcasts_a_matrix_and_refuses_transbatch_of_unequal_ranks():
    node = ms(h.make_node("FusedMatMul", ["a", "b"], ["y"], transB=1))
    model = model_of(node, [f32("a", ["n", 7, 8])], [f32("y", None)],
                     [nh.from_array(RNG.uniform(-1, 1, (5, 8)).astype(np.float32), "b")])
    check_float(model, {"a": RNG.uniform(-1, 1, (3, 7, 8)).astype(np.float32)})
    node = ms(h.make_node("FusedMatMul", ["a", "b"], ["y"], transBatchA=1))
    model = model_of(node, [f32("a", [3, 7, 8])], [f32("y", None)],
                     [nh.from_array(RNG.uniform(-1, 1, (8, 5)).astype(np.float32), "b")])
    with pytest.raises(Exception, match="transBatchA and transBatchB need A and B of one rank of at least 3"):
        kiln.compile(model, archs="none", progress=False)


@pytest.mark.parametrize("activation,params", [("", []), ("Relu", []), ("Tanh", []), ("Sigmoid", []),
                                               ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.6]),
                                               ("HardSigmoid", [0.3, 0.4])], ids=lambda v: str(v) or "none")
@pytest.mark.parametrize("with_z", [False, True], ids=["conv", "conv_plus_z"])
def test_fused_conv_matches_onnxruntime(activation, params, with_z):
    inits = [nh.from_array(RNG.uniform(-0.5, 0.5, (6, 2, 3, 3)).astype(np.float32), "w"),
             nh.from_array(RNG.uniform(-0.5, 0.5, (6,)).astype(np.float32), "b")]
    names = ["x", "w", "b"] + (["z"] if with_z else [])
    attrs = {"activation": activation} if activation else {}
    if params:
        attrs["activation_params"] = params
    node = ms(h.make_node("FusedConv", names, ["y"], pads=[1, 1, 1, 1], strides=[2, 1], group=2, **attrs))
    inputs = [f32("x", [1, 4, 9, 7])] + ([f32("z", [1, 6, 5, 7])] if with_z else [])
    feeds = {"x": RNG.uniform(-1, 1, (1, 4, 9, 7)).astype(np.float32)}
    if with_z:
        feeds["z"] = RNG.uniform(-1, 1, (1, 6, 5, 7)).astype(np.float32)
    check_float(model_of(node, inputs, [f32("y", None)], inits), feeds)


def rope_inputs(batch, seq, rot_half):
    cos = RNG.uniform(-1, 1, (32, rot_half)).astype(np.float32)
    sin = RNG.uniform(-1, 1, (32, rot_half)).astype(np.float32)
    pos = RNG.integers(0, 32, (batch, seq)).astype(np.int64)
    return cos, sin, pos


@pytest.mark.parametrize("form", ["3d", "3d_interleaved", "4d", "offset", "partial"])
def test_rotary_embedding_matches_onnxruntime(form):
    batch, seq, heads, head = 2, 5, 3, 8
    rot = 4 if form == "partial" else head
    cos, sin, pos = rope_inputs(batch, seq, rot // 2)
    attrs = {"interleaved": 1} if form == "3d_interleaved" else {}
    if form == "partial":
        attrs = {"rotary_embedding_dim": rot, "num_heads": heads}
    shape = [batch, heads, seq, head] if form == "4d" else [batch, seq, heads * head]
    if form == "offset":
        pos = np.array([7], np.int64)
    node = ms(h.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], **attrs))
    sym_shape = ["b", heads, "s", head] if form == "4d" else ["b", "s", heads * head]
    model = model_of(node, [f32("x", sym_shape), i64("pos", list(pos.shape))], [f32("y", None)],
                     [nh.from_array(cos, "cos"), nh.from_array(sin, "sin")])
    check_float(model, {"x": RNG.uniform(-1, 1, shape).astype(np.float32), "pos": pos})


@pytest.mark.parametrize("form", ["segments_and_mask", "no_mask", "position_ids"])
def test_embed_layer_normalization_matches_onnxruntime(form):
    batch, seq, vocab, hidden = 2, 6, 30, 16
    inits = [nh.from_array(RNG.uniform(-1, 1, (vocab, hidden)).astype(np.float32), "word"),
             nh.from_array(RNG.uniform(-1, 1, (12, hidden)).astype(np.float32), "position"),
             nh.from_array(RNG.uniform(-1, 1, (2, hidden)).astype(np.float32), "segment"),
             nh.from_array(RNG.uniform(0.5, 1.5, (hidden,)).astype(np.float32), "gamma"),
             nh.from_array(RNG.uniform(-1, 1, (hidden,)).astype(np.float32), "beta")]
    feeds = {"ids": RNG.integers(0, vocab, (batch, seq)).astype(np.int32)}
    inputs = [i32("ids", ["b", "s"])]
    names = ["ids", "", "word", "position", "", "gamma", "beta"]
    if form == "segments_and_mask":
        names[1], names[4] = "seg", "segment"
        names.append("mask")
        feeds["seg"] = RNG.integers(0, 2, (batch, seq)).astype(np.int32)
        feeds["mask"] = np.array([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], np.int32)
        inputs += [i32("seg", ["b", "s"]), i32("mask", ["b", "s"])]
    if form == "position_ids":
        names += ["", "pos"]
        feeds["pos"] = RNG.integers(0, 12, (batch, seq)).astype(np.int32)
        inputs.append(i32("pos", ["b", "s"]))
    node = ms(h.make_node("EmbedLayerNormalization", names, ["y", "mask_index", "sum"], epsilon=1e-5))
    model = model_of(node, inputs, [f32("y", None), i32("mask_index", None), f32("sum", None)],
                     [i for i in inits if i.name in names])
    check_float(model, feeds)


def attention_model(mask_shape, past, unidirectional, bias_shape, qkv_sizes=None):
    batch, hidden, heads = 2, 16, 4
    qkv = qkv_sizes or [hidden] * 3
    inits = [nh.from_array(RNG.uniform(-0.5, 0.5, (hidden, sum(qkv))).astype(np.float32), "w"),
             nh.from_array(RNG.uniform(-0.5, 0.5, (sum(qkv),)).astype(np.float32), "bias")]
    names = ["x", "w", "bias", "mask" if mask_shape else "", "past" if past else "", "ab" if bias_shape else ""]
    while not names[-1]:
        names.pop()
    inputs = [f32("x", [batch, "s", hidden])]
    if mask_shape:
        inputs.append(i32("mask", mask_shape))
    if past:
        inputs.append(f32("past", [2, "b", heads, "p", hidden // heads]))
    if bias_shape:
        inputs.append(f32("ab", bias_shape))
    attrs = {"num_heads": heads, "unidirectional": unidirectional}
    if qkv_sizes:
        attrs["qkv_hidden_sizes"] = qkv_sizes
    node = ms(h.make_node("Attention", names, ["y", "present"] if past else ["y"], **attrs))
    outputs = [f32("y", None)] + ([f32("present", None)] if past else [])
    return model_of(node, inputs, outputs, inits), batch, heads, hidden


ATTENTION_CASES = {
    "plain": dict(mask=None, past=False, uni=0, bias=None),
    "lengths": dict(mask="B", past=False, uni=0, bias=None),
    "end_and_start": dict(mask="2B", past=False, uni=0, bias=None),
    "raw_2d": dict(mask="BT", past=False, uni=0, bias=None),
    "raw_3d": dict(mask="BST", past=False, uni=0, bias=None),
    "causal": dict(mask=None, past=False, uni=1, bias=None),
    "past_causal_raw_mask": dict(mask="BT", past=True, uni=1, bias=None),
    "attention_bias": dict(mask="BT", past=False, uni=0, bias=True),
    "qkv_hidden_sizes": dict(mask=None, past=False, uni=0, bias=None, sizes=[16, 16, 8]),
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_attention_matches_onnxruntime(case):
    c = ATTENTION_CASES[case]
    batch, seq, past_len = 2, 5, 3
    total = seq + (past_len if c["past"] else 0)
    mask_shapes = {"B": [batch], "2B": [2 * batch], "BT": [batch, total], "BST": [batch, seq, total]}
    model, batch, heads, hidden = attention_model(mask_shapes.get(c["mask"]), c["past"], c["uni"],
                                                  [1, 4, seq, total] if c["bias"] else None, c.get("sizes"))
    feeds = {"x": RNG.uniform(-1, 1, (batch, seq, hidden)).astype(np.float32)}
    if c["mask"] == "B":
        feeds["mask"] = np.array([3, 5], np.int32)
    elif c["mask"] == "2B":
        feeds["mask"] = np.array([4, 5, 1, 0], np.int32)  # ends, then starts
    elif c["mask"]:
        m = RNG.integers(0, 2, mask_shapes[c["mask"]]).astype(np.int32)
        m[..., 0] = 1  # no row is masked whole (there onnxruntime's -10000 and -inf differ)
        feeds["mask"] = m
    if c["past"]:
        feeds["past"] = RNG.uniform(-1, 1, (2, batch, heads, past_len, hidden // heads)).astype(np.float32)
    if c["bias"]:
        feeds["ab"] = RNG.uniform(-1, 1, (1, heads, seq, total)).astype(np.float32)
    check_float(model, feeds)


MHA_CASES = ["separate_with_bias", "packed_qkv", "packed_kv", "bnsh_kv", "key_padding_2d", "key_padding_lengths",
             "past_and_causal", "attention_bias"]


def mha_model(names, feeds, outputs, inits, attrs):
    node = ms(h.make_node("MultiHeadAttention", names, outputs, **attrs))
    inputs = [i32(n, list(v.shape)) if v.dtype == np.int32 else f32(n, list(v.shape)) for n, v in feeds.items()]
    return model_of(node, inputs, [f32(o, None) for o in outputs], inits)


@pytest.mark.parametrize("case", MHA_CASES)
def test_multi_head_attention_matches_onnxruntime(case):
    """onnxruntime's CPU kernel takes no packed form: those are checked against it on the same
    values unpacked."""
    batch, seq, kv_seq, heads, head = 2, 4, 6, 2, 8
    hidden = heads * head
    rand = lambda *s: RNG.uniform(-1, 1, s).astype(np.float32)  # noqa: E731
    if case in ("packed_qkv", "past_and_causal"):
        kv_seq = seq  # self-attention: onnxruntime's causal frontier with a past is defined for it alone
    q, k, v = rand(batch, seq, hidden), rand(batch, kv_seq, hidden), rand(batch, kv_seq, hidden)
    names, feeds, inits, outputs = ["q", "k", "v"] + [""] * 7, {"q": q, "k": k, "v": v}, [], ["y"]
    attrs = {"num_heads": heads}
    unpacked = None
    if case == "packed_qkv":
        names[1] = names[2] = ""
        per_head = lambda x: x.reshape(batch, seq, heads, 1, head)  # noqa: E731
        unpacked = dict(feeds)
        feeds = {"q": np.concatenate([per_head(q), per_head(k), per_head(v)], axis=3)}
    elif case == "packed_kv":
        names[2] = ""
        unpacked = dict(feeds)
        per_head = lambda x: x.reshape(batch, kv_seq, heads, 1, head)  # noqa: E731
        feeds = {"q": q, "k": np.concatenate([per_head(k), per_head(v)], axis=3)}
    elif case == "bnsh_kv":
        feeds["k"] = k.reshape(batch, kv_seq, heads, head).transpose(0, 2, 1, 3).copy()
        feeds["v"] = v.reshape(batch, kv_seq, heads, head).transpose(0, 2, 1, 3).copy()
    if case in ("separate_with_bias", "packed_qkv"):
        names[3] = "bias"
        inits.append(nh.from_array(rand(3 * hidden), "bias"))
    if case == "key_padding_2d":
        names[4] = "kpm"
        feeds["kpm"] = np.array([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], np.int32)
    if case == "key_padding_lengths":
        names[4] = "kpm"
        feeds["kpm"] = np.array([4, 6], np.int32)
    if case == "attention_bias":
        names[5] = "ab"
        feeds["ab"] = rand(batch, 1, seq, kv_seq)
    if case == "past_and_causal":
        names[6], names[7] = "pk", "pv"
        feeds["pk"], feeds["pv"] = rand(batch, heads, 3, head), rand(batch, heads, 3, head)
        outputs = ["y", "present_k", "present_v"]
        attrs["unidirectional"] = 1
    while not names[-1]:
        names.pop()
    model = mha_model(names, feeds, outputs, inits, attrs)
    if unpacked is None:
        check_float(model, feeds)
        return
    compiled = kiln.load(kiln.compile(model, archs="none", progress=False))
    got = compiled.context(device="cpu", cpu_threads=1).run(feeds)
    reference = mha_model(["q", "k", "v", "bias" if inits else ""], unpacked, outputs, inits, attrs)
    want = ort.InferenceSession(reference.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, unpacked)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_shaped_contrib_op_errors_name_the_node():
    node = ms(h.make_node("Attention", ["x", "w"], ["y"], num_heads=4, do_rotary=1, name="attn"))
    model = model_of(node, [f32("x", [1, 3, 8])], [f32("y", None)],
                     [nh.from_array(np.zeros((8, 24), np.float32), "w")])
    with pytest.raises(Exception, match=r"node 'attn' \(com.microsoft Attention\): do_rotary 1"):
        kiln.compile(model, archs="none", progress=False)
    node = ms(h.make_node("FusedConv", ["x", "w"], ["y"], activation="Elu", name="conv"))
    model = model_of(node, [f32("x", [1, 1, 4, 4])], [f32("y", None)],
                     [nh.from_array(np.zeros((1, 1, 3, 3), np.float32), "w")])
    with pytest.raises(Exception, match=r"node 'conv' \(com.microsoft FusedConv\): activation 'Elu'"):
        kiln.compile(model, archs="none", progress=False)


@pytest.mark.parametrize("op,names,attrs,message", [
    ("Attention", ["x", "w"], {}, r"attribute 'num_heads' is required"),
    ("Attention", ["x", "w"], {"num_heads": 4, "qkv_hidden_sizes": [8, 4, 12]},
     r"qkv_hidden_sizes must be 3 positive multiples of num_heads with q's equal to k's"),
    ("MultiHeadAttention", ["x", "", "", "", "", "", "", "", "", "beam"], {"num_heads": 2},
     r"past_sequence_length and cache_indirection"),
    ("EmbedLayerNormalization", ["ids", "ids", "w", "w", "", "g"], {}, r"segment_ids and segment_embedding"),
    ("RotaryEmbedding", ["x", "x", "w", "w"], {"is_packed_batching": 1}, r"is_packed_batching 1"),
    ("FusedMatMul", ["x", "w"], {"transQ": 1}, r"has no attribute 'transQ'"),
], ids=lambda v: v if isinstance(v, str) and v[0].isupper() else None)
def test_malformed_shaped_contrib_ops_are_errors_naming_the_node(op, names, attrs, message):
    node = ms(h.make_node(op, names, ["y"], name="n", **attrs))
    inputs = [f32("x", [1, 3, 8]), i32("ids", [1, 3]), f32("beam", [1])]
    inits = [nh.from_array(np.zeros((8, 24), np.float32), "w"), nh.from_array(np.ones(24, np.float32), "g")]
    model = model_of(node, [i for i in inputs if i.name in names], [f32("y", None)], [i for i in inits if i.name in names])
    with pytest.raises(Exception, match=rf"node 'n' \(com.microsoft {op}\): {message}"):
        kiln.compile(model, archs="none", progress=False)


def compile_error(node, inputs, inits=()):
    model = model_of(node, inputs, [f32("y", None)], list(inits))
    with pytest.raises(kiln.Error) as e:
        kiln.compile(model, archs="none", progress=False)
    return str(e.value)


def w8(name, shape, low=-1, high=1):
    return nh.from_array(RNG.uniform(low, high, shape).astype(np.float32), name)


def test_shaped_contrib_ops_check_attribute_types_dtypes_and_dims_as_onnxruntime_does():
    """Each input onnxruntime refuses (a helper session's findings): an attribute of another type
    is not silently replaced by its default, integer tensors are not multiplied by a float alpha,
    and heads, packed parts, past and mask shapes are checked where the shapes are static."""
    cases = [
        (ms(h.make_node("FusedMatMul", ["a", "b"], ["y"], alpha=2, name="n")), [f32("a", [2, 3])], [w8("b", [3, 4])],
         "attribute 'alpha': expected FLOAT, found INT"),
        (ms(h.make_node("FusedMatMul", ["a", "b"], ["y"], name="n")), [i32("a", [2, 3])],
         [nh.from_array(np.ones((3, 4), np.int32), "b")], "input 'A': expected a float type, found int32"),
        (ms(h.make_node("FusedConv", ["x", "w"], ["y"], activation="LeakyRelu", name="n")), [f32("x", [1, 1, 4, 4])],
         [w8("w", [1, 1, 3, 3])], "activation 'LeakyRelu' takes 1 activation_params, found 0"),
        (ms(h.make_node("Attention", ["x", "w"], ["y"], num_heads=3, name="n")), [f32("x", [1, 3, 8])],
         [w8("w", [8, 24])], "the hidden size of Q, K and V, 8 (weights dim 1 / 3), is not a multiple of num_heads 3"),
        (ms(h.make_node("Attention", ["x", "w", "", "", "past"], ["y", "present"], num_heads=2, name="n")),
         [f32("x", [1, 3, 8]), f32("past", [3, 1, 2, 4, 4])], [w8("w", [8, 24])],
         "input 'past' [3, 1, 2, 4, 4]: dim 0 (key and value) must be 2, found 3"),
        (ms(h.make_node("MultiHeadAttention", ["q"], ["y"], num_heads=2, name="n")), [f32("q", [1, 3, 4, 3, 2])], [],
         "input 'query' [1, 3, 4, 3, 2]: dim 2 (heads) must be 2, found 4"),
        (ms(h.make_node("MultiHeadAttention", ["q", "k", "v", "", "kpm"], ["y"], num_heads=2, name="n")),
         [f32("q", [2, 3, 8]), f32("k", [2, 4, 8]), f32("v", [2, 4, 8]), i32("kpm", [2, 3])], [],
         "its last dim must be the total sequence 4 (past + new keys), found 3"),
        (ms(h.make_node("EmbedLayerNormalization", ["ids", "", "w", "p", "", "g", "", "mask"], ["y"], name="n")),
         [i32("ids", [2, 4]), i32("mask", [2, 3])], [w8("w", [10, 8]), w8("p", [10, 8]), w8("g", [8])],
         "input 'mask' [2, 3]: expected input_ids' shape [2, 4]"),
        (ms(h.make_node("RotaryEmbedding", ["x", "pos", "c", "s"], ["y"], rotary_embedding_dim=4, name="n")),
         [f32("x", [1, 3, 16]), i64("pos", [1, 3])], [w8("c", [8, 2]), w8("s", [8, 2])],
         "a 3-D input with rotary_embedding_dim needs num_heads"),
    ]
    for node, inputs, inits, message in cases:
        error = compile_error(node, inputs, inits)
        assert f"node 'n' (com.microsoft {node.op_type}): " in error and message in error, error


def test_a_negative_embedding_id_is_an_error_at_run_time():
    """onnxruntime refuses a negative input id; Gather alone would read the table from its end."""
    node = ms(h.make_node("EmbedLayerNormalization", ["ids", "", "w", "p", "", "g"], ["y"], name="n"))
    model = model_of(node, [i32("ids", [1, 4])], [f32("y", None)], [w8("w", [10, 8]), w8("p", [10, 8]), w8("g", [8])])
    ctx = kiln.load(kiln.compile(model, archs="none", progress=False)).context(device="cpu", cpu_threads=1)
    assert ctx.run({"ids": np.array([[0, 1, 2, 3]], np.int32)})[0].shape == (1, 4, 8)
    with pytest.raises(kiln.Error, match="out of range"):
        ctx.run({"ids": np.array([[0, 1, -1, 2]], np.int32)})


def test_attention_scale_0_is_onnxruntime_default_scale():
    """onnxruntime's Attention kernels read scale 0 as 1 / sqrt(head size)."""
    model, batch, heads, hidden = attention_model(None, False, 0, None)
    model.graph.node[0].attribute.append(h.make_attribute("scale", 0.0))
    check_float(model, {"x": RNG.uniform(-1, 1, (batch, 5, hidden)).astype(np.float32)})
