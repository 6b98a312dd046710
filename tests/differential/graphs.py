"""Random small ONNX graphs for the differential tester: values, inputs with edge values, and
a builder that infers each node's output type with ONNX's own shape inference."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 21

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}
ONNX_TO_NP = {v: k for k, v in NP_TO_ONNX.items()}

FLOATS = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)]
SIGNED = [np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)]
UNSIGNED = [np.dtype(np.uint8), np.dtype(np.uint32), np.dtype(np.uint64)]
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
BOOL = [np.dtype(np.bool_)]


class Skip(Exception):
    """The op does not apply to this value (dtype, rank, size); the generator picks another."""


class Value:
    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, np.dtype(dtype), tuple(int(d) for d in shape)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        return f"{self.name}:{self.dtype}{list(self.shape)}"


def edge_values(dtype):
    """The values that separate implementations: NaN, infinities, signed zero, denormals, ties
    and the integer extremes."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        fi = np.finfo(dtype)
        return np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, fi.smallest_subnormal, -fi.smallest_subnormal,
                         fi.tiny, 0.5, 1.5, 2.5, -0.5, -2.5, 1.0, -1.0], dtype=dtype)
    if dtype.kind in "iu":
        ii = np.iinfo(dtype)
        return np.array([ii.min, ii.max, 0, 1, ii.max - 1, ii.min + 1] + ([-1] if dtype.kind == "i" else []), dtype=dtype)
    return np.array([False, True])


def random_array(rng, dtype, shape, edge_rate=0.08):
    """Values on a coarse grid (so sums, ties and rounding cases recur) with edge values mixed in."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "f":
        a = (rng.integers(-40, 41, size=n) / 8.0).astype(dtype)
    elif dtype.kind in "iu":
        lo, hi = (-20, 21) if dtype.kind == "i" else (0, 41)
        a = rng.integers(lo, hi, size=n).astype(dtype)
    else:
        a = rng.integers(0, 2, size=n).astype(dtype)
    if n and edge_rate > 0:
        mask = rng.random(n) < edge_rate
        edges = edge_values(dtype)
        a[mask] = edges[rng.integers(0, len(edges), size=int(mask.sum()))]
    return a.reshape(shape)


class Graph:
    """One chain of ops under construction. Names carry a prefix so that several graphs can be
    merged into one model (one compile per batch)."""

    def __init__(self, rng, prefix, edge_rate):
        self.rng, self.prefix, self.edge_rate = rng, prefix, edge_rate
        self.nodes, self.inputs, self.initializers = [], [], []
        self.feeds = {}  # input name -> array
        self.ops = []  # op type of each node, in order
        self.count = 0

    def fresh(self, hint):
        self.count += 1
        return f"{self.prefix}{hint}{self.count}"

    def input(self, dtype, shape, values=None):
        v = Value(self.fresh("in"), dtype, shape)
        self.inputs.append(v)
        self.feeds[v.name] = (values if values is not None
                              else random_array(self.rng, dtype, shape, self.edge_rate)).astype(dtype).reshape(shape)
        return v

    def const(self, array, hint="c"):
        array = np.asarray(array)
        v = Value(self.fresh(hint), array.dtype, array.shape)
        self.initializers.append(numpy_helper.from_array(array, v.name))
        return v

    def node(self, op, inputs, outputs=1, keep=0, like=None, **attrs):
        """Adds `op` and returns its output `keep` (the others stay unused): dtype and shape from
        ONNX's shape inference of the node alone, with constants propagated. Skip when ONNX
        rejects the node or cannot say the output's shape. `like` (dtype, shape) gives the
        output's type where ONNX's inference cannot (function ops, data-dependent sizes)."""
        names = [i.name if i is not None else "" for i in inputs]
        outs = [self.fresh("v") for _ in range(outputs)]
        node = helper.make_node(op, names, outs, **attrs)
        if like is not None:
            out = Value(outs[keep], like[0], like[1])
        else:
            out = infer(node, [i for i in inputs if i is not None], self.initializers, outs[keep])
        self.nodes.append(node)
        self.ops.append(op)
        return out


def infer(node, inputs, initializers, out_name):
    seen, vis = set(), []
    for v in inputs:
        if v.name not in seen:
            seen.add(v.name)
            vis.append(helper.make_tensor_value_info(v.name, NP_TO_ONNX[v.dtype], list(v.shape)))
    names = {v.name for v in inputs}
    inits = [t for t in initializers if t.name in names]
    g = helper.make_graph([node], "infer", vis, [], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    try:
        m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:  # onnx.shape_inference.InferenceError and checker errors
        raise Skip(str(e).splitlines()[0] if str(e) else type(e).__name__)
    for vi in m.graph.value_info:
        if vi.name == out_name:
            t = vi.type.tensor_type
            if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
                raise Skip("output shape unknown")
            if t.elem_type not in ONNX_TO_NP:
                raise Skip("output dtype")
            if any(d.dim_value < 0 for d in t.shape.dim):
                raise Skip("negative dim inferred")
            return Value(out_name, ONNX_TO_NP[t.elem_type], [d.dim_value for d in t.shape.dim])
    raise Skip("no output type")


def merge(graphs, outputs, symbolic=None):
    """One model holding every graph side by side; `outputs[i]` is graph i's output Value.
    `symbolic` maps an input name to the dim_param names of its dims (None keeps a dim static)."""
    symbolic = symbolic or {}
    nodes, inputs, inits, outs = [], [], [], []
    for g, out in zip(graphs, outputs):
        nodes += g.nodes
        inits += g.initializers
        for v in g.inputs:
            dims = [s if s else d for d, s in zip(v.shape, symbolic.get(v.name, [None] * v.rank))]
            inputs.append(helper.make_tensor_value_info(v.name, NP_TO_ONNX[v.dtype], dims))
        outs.append(helper.make_tensor_value_info(out.name, NP_TO_ONNX[out.dtype], list(out.shape)))
    g = helper.make_graph(nodes, "difftest", inputs, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kiln-difftest")
    m.ir_version = 10
    return m


def folded(model, feeds):
    """The same model with every input turned into an initializer: the compiler folds it all."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in list(m.graph.input):
        m.graph.initializer.append(numpy_helper.from_array(feeds[vi.name], vi.name))
    del m.graph.input[:]
    return m
