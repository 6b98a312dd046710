"""The differential tester's op table: for each ONNX op it generates, how to add one node of it
to a chain (random attributes within the op's documented range, constant or fresh operands) and
how its result compares across paths.

Classes (how two correct implementations may differ):
  exact    the same bits everywhere (data movement, selection, comparisons, integer arithmetic,
           Floor/Ceil/Round, Max/Min, Cast): compared bit for bit (every NaN equal, -0 == +0)
  rounded  one correctly rounded IEEE operation per element (Add, Sub, Mul, Div, Sqrt, fmod):
           also bit for bit, since every path rounds the same exact result
  math     transcendental and composite functions: the libraries' last bits differ
  reduce   sums over many elements (reductions, Softmax, normalisations, MatMul, Conv, pooling
           averages, linear Resize): the summation order differs between paths
An op marked `steps` (Floor, Cast to an integer, comparisons, ArgMax, TopK's indices, ...) is
discontinuous: the generator only applies it to values that every path computed bit for bit,
so that a last-bit difference upstream cannot flip its result."""
import numpy as np

from graphs import BOOL, FLOATS, INTS, NUMERIC, SIGNED, Skip, Value

TABLE = {}


class Op:
    def __init__(self, name, fn, cls, steps=False):
        self.name, self.fn, self.cls, self.steps = name, fn, cls, steps


def op(name, cls, steps=False):
    def register(fn):
        TABLE[name] = Op(name, fn, cls, steps)
        return fn
    return register


def need(cond, why="not applicable"):
    if not cond:
        raise Skip(why)


def pick(rng, items):
    return items[int(rng.integers(0, len(items)))]


def axis_of(g, x, allow_negative=True):
    need(x.rank >= 1, "rank 0")
    a = int(g.rng.integers(0, x.rank))
    return a - x.rank if allow_negative and g.rng.random() < 0.4 else a


def operand(g, x, dtype=None, broadcast=True):
    """A second operand for a binary op: a fresh input or a constant, of x's shape or a shape
    that broadcasts to it (a suffix of it, or with some dims 1)."""
    dtype = np.dtype(dtype or x.dtype)
    shape = list(x.shape)
    if broadcast and g.rng.random() < 0.5:
        if x.rank and g.rng.random() < 0.5:
            shape = shape[int(g.rng.integers(0, x.rank + 1)):]
        else:
            shape = [1 if g.rng.random() < 0.5 else d for d in shape]
    if g.rng.random() < 0.3:
        from graphs import random_array
        return g.const(random_array(g.rng, dtype, shape, g.edge_rate))
    return g.input(dtype, shape)


# ---- elementwise ------------------------------------------------------------------------------

def unary(name, cls, dtypes, steps=False, **attr_gens):
    def fn(g, x):
        need(x.dtype in dtypes, "dtype")
        attrs = {k: gen(g.rng) for k, gen in attr_gens.items()}
        return g.node(name, [x], **attrs)
    TABLE[name] = Op(name, fn, cls, steps)


SIGNED_AND_FLOAT = FLOATS + SIGNED
for _n in ["Abs", "Neg"]:
    unary(_n, "exact", SIGNED_AND_FLOAT)
unary("Relu", "exact", SIGNED_AND_FLOAT)
unary("Sign", "exact", NUMERIC, steps=True)
unary("Identity", "exact", NUMERIC + BOOL)
for _n in ["Floor", "Ceil", "Round"]:
    unary(_n, "exact", FLOATS, steps=True)
unary("IsNaN", "exact", FLOATS, steps=True)
unary("Not", "exact", BOOL)
unary("BitwiseNot", "exact", INTS)
unary("Sqrt", "rounded", FLOATS, steps=True)
unary("Reciprocal", "rounded", FLOATS, steps=True)
for _n in ["Sigmoid", "Tanh", "Exp", "Erf", "Softplus", "Softsign", "Atan", "Sinh", "Cosh", "Asinh"]:
    unary(_n, "math", FLOATS)
# A pole or a domain edge (a last-bit difference can be a NaN or a sign), or a period that a
# large argument's last bit spans (Cos of a float16 sum near 1000): applied to exact values only.
for _n in ["Log", "Tan", "Sin", "Cos"]:
    unary(_n, "math", FLOATS, steps=True)
unary("Elu", "math", FLOATS, alpha=lambda r: float(pick(r, [1.0, 0.5, 2.0])))
unary("Celu", "math", [np.dtype(np.float32)], alpha=lambda r: float(pick(r, [1.0, 0.5, 2.0])))
unary("Selu", "math", FLOATS)
unary("LeakyRelu", "rounded", FLOATS, alpha=lambda r: float(pick(r, [0.01, 0.2, 0.5])))
unary("ThresholdedRelu", "exact", FLOATS, steps=True, alpha=lambda r: float(pick(r, [1.0, 0.5, 0.0])))
unary("HardSigmoid", "math", FLOATS, alpha=lambda r: float(pick(r, [0.2, 0.5])), beta=lambda r: 0.5)
unary("HardSwish", "math", FLOATS)
unary("Mish", "math", FLOATS)
unary("Gelu", "math", FLOATS, approximate=lambda r: pick(r, ["none", "tanh"]))
unary("Shrink", "rounded", FLOATS, steps=True, lambd=lambda r: float(pick(r, [0.5, 1.5])), bias=lambda r: float(pick(r, [0.0, 0.5])))


@op("IsInf", "exact", steps=True)
def _isinf(g, x):
    need(x.dtype in FLOATS)
    return g.node("IsInf", [x], detect_negative=int(g.rng.integers(0, 2)), detect_positive=int(g.rng.integers(0, 2)))


def binary(name, cls, dtypes, steps=False, out_dtypes=None, **attr_gens):
    def fn(g, x):
        need(x.dtype in dtypes, "dtype")
        y = operand(g, x)
        a, b = (x, y) if g.rng.random() < 0.7 else (y, x)
        attrs = {k: gen(g.rng) for k, gen in attr_gens.items()}
        return g.node(name, [a, b], **attrs)
    TABLE[name] = Op(name, fn, cls, steps)


for _n in ["Add", "Sub", "Mul"]:
    binary(_n, "rounded", NUMERIC)
binary("Div", "rounded", NUMERIC, steps=True)
binary("Mod", "rounded", INTS, steps=True, fmod=lambda r: int(r.integers(0, 2)))
binary("Pow", "math", [np.dtype(np.float32), np.dtype(np.float64)], steps=True)
for _n in ["Max", "Min"]:
    binary(_n, "exact", NUMERIC)
for _n in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]:
    binary(_n, "exact", NUMERIC, steps=True)
for _n in ["And", "Or", "Xor"]:
    binary(_n, "exact", BOOL)
for _n in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
    binary(_n, "exact", INTS)
@op("PRelu", "rounded")
def _prelu(g, x):  # the slope broadcasts to X (unidirectionally)
    need(x.dtype in [np.dtype(np.float32), np.dtype(np.float64)])
    return g.node("PRelu", [x, operand(g, x)])


@op("Mod_fmod_float", "rounded", steps=True)
def _fmod(g, x):  # Mod on floats requires fmod=1
    need(x.dtype in FLOATS)
    return g.node("Mod", [x, operand(g, x)], fmod=1)


@op("BitShift", "exact")
def _bitshift(g, x):
    need(x.dtype in [np.dtype(np.uint8), np.dtype(np.uint32), np.dtype(np.uint64)])
    bits = x.dtype.itemsize * 8
    s = g.const(g.rng.integers(0, bits, size=x.shape[-1:] if x.rank else ()).astype(x.dtype))
    return g.node("BitShift", [x, s], direction=pick(g.rng, ["LEFT", "RIGHT"]))


@op("Where", "exact")
def _where(g, x):
    cond = g.input(np.bool_, [1 if g.rng.random() < 0.3 else d for d in x.shape])
    return g.node("Where", [cond, x, operand(g, x)])


@op("Clip", "exact")
def _clip(g, x):
    need(x.dtype in NUMERIC)
    lo = g.const(np.array(pick(g.rng, [-1, 0, 2] if x.dtype.kind != "u" else [0, 1, 2]), dtype=x.dtype)) \
        if g.rng.random() < 0.8 else None
    hi = g.const(np.array(pick(g.rng, [1, 3, 0]), dtype=x.dtype)) if g.rng.random() < 0.8 else None
    ins = [x, lo, hi]
    while ins[-1] is None:
        ins.pop()
    return g.node("Clip", ins)


@op("Sum", "rounded")
def _sum(g, x):
    need(x.dtype in FLOATS)
    return g.node("Sum", [x, operand(g, x)])


@op("Mean", "math")
def _mean(g, x):
    need(x.dtype in FLOATS)
    return g.node("Mean", [x, operand(g, x), operand(g, x)])


@op("Cast", "exact", steps=True)
def _cast(g, x):
    to = pick(g.rng, NUMERIC + BOOL)
    from graphs import NP_TO_ONNX
    return g.node("Cast", [x], to=NP_TO_ONNX[to])


# ---- reductions -------------------------------------------------------------------------------

def reduce_op(name, cls, dtypes, steps=False):
    def fn(g, x):
        need(x.dtype in dtypes, "dtype")
        need(x.rank >= 1)
        r = g.rng.random()
        if r < 0.15:
            axes = []
        else:
            k = int(g.rng.integers(1, x.rank + 1))
            axes = sorted(set(int(a) for a in g.rng.choice(x.rank, size=k, replace=False)))
            axes = [a - x.rank if g.rng.random() < 0.3 else a for a in axes]
        attrs = {"keepdims": int(g.rng.integers(0, 2))}
        if not axes and g.rng.random() < 0.6:
            attrs["noop_with_empty_axes"] = 1
        ins = [x, g.const(np.array(axes, dtype=np.int64), "axes")] if axes or g.rng.random() < 0.5 else [x]
        return g.node(name, ins, **attrs)
    TABLE[name] = Op(name, fn, cls, steps)


reduce_op("ReduceMax", "exact", NUMERIC + BOOL)
reduce_op("ReduceMin", "exact", NUMERIC + BOOL)
for _n in ["ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
           "ReduceLogSumExp"]:
    reduce_op(_n, "reduce", [np.dtype(np.float32), np.dtype(np.float64)] if _n in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")
              else FLOATS + [np.dtype(np.int32), np.dtype(np.int64)], steps=_n == "ReduceLogSum")  # log of a sum near 0


def arg_op(name):
    def fn(g, x):
        need(x.dtype in NUMERIC)
        need(x.rank >= 1 and x.size > 0)
        return g.node(name, [x], axis=axis_of(g, x), keepdims=int(g.rng.integers(0, 2)),
                      select_last_index=int(g.rng.integers(0, 2)))
    TABLE[name] = Op(name, fn, "exact", steps=True)


arg_op("ArgMax")
arg_op("ArgMin")


def soft_op(name):
    def fn(g, x):
        need(x.dtype in FLOATS)
        need(x.rank >= 1)
        return g.node(name, [x], axis=axis_of(g, x))
    TABLE[name] = Op(name, fn, "reduce")


soft_op("Softmax")
soft_op("LogSoftmax")


@op("Hardmax", "exact", steps=True)
def _hardmax(g, x):
    need(x.dtype in FLOATS and x.rank >= 1)
    return g.node("Hardmax", [x], axis=axis_of(g, x))


@op("CumSum", "reduce")
def _cumsum(g, x):
    need(x.dtype in [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64)] and x.rank >= 1)
    ax = g.const(np.array(axis_of(g, x), dtype=np.int64), "axis")
    return g.node("CumSum", [x, ax], exclusive=int(g.rng.integers(0, 2)), reverse=int(g.rng.integers(0, 2)))


@op("TopK", "exact", steps=True)
def _topk(g, x):
    need(x.dtype in NUMERIC and x.rank >= 1)
    a = axis_of(g, x)
    n = x.shape[a]
    k = g.const(np.array([int(g.rng.integers(0, n + 1))], dtype=np.int64), "k")
    return g.node("TopK", [x, k], outputs=2, keep=int(g.rng.integers(0, 2)), axis=a,
                  largest=int(g.rng.integers(0, 2)), sorted=1)


# ---- pooling, normalisation, matrix ------------------------------------------------------------

def pool_attrs(g, x, spatial):
    # Windows no larger than the input: a window that fits nowhere (output size 0) is refused
    # by Kiln's shape check, which onnxruntime lets through as an empty output.
    kernel = [int(g.rng.integers(1, max(2, min(4, d + 1)))) for d in x.shape[2:]]
    attrs = {"kernel_shape": kernel}
    if g.rng.random() < 0.5:
        attrs["strides"] = [int(g.rng.integers(1, 3)) for _ in range(spatial)]
    if g.rng.random() < 0.5:
        attrs["pads"] = [int(g.rng.integers(0, k)) for k in kernel] * 2
    elif g.rng.random() < 0.3:
        attrs["auto_pad"] = pick(g.rng, ["SAME_UPPER", "SAME_LOWER", "VALID"])
    return attrs


@op("MaxPool", "exact")
def _maxpool(g, x):
    need(x.dtype in [np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64), np.dtype(np.int8), np.dtype(np.uint8)])
    need(3 <= x.rank <= 4 and x.size > 0)
    attrs = pool_attrs(g, x, x.rank - 2)
    if g.rng.random() < 0.3 and "auto_pad" not in attrs:
        attrs["dilations"] = [int(g.rng.integers(1, 3)) for _ in range(x.rank - 2)]
    return g.node("MaxPool", [x], **attrs)


@op("AveragePool", "reduce")
def _avgpool(g, x):
    need(x.dtype in FLOATS and 3 <= x.rank <= 4 and x.size > 0)
    attrs = pool_attrs(g, x, x.rank - 2)
    attrs["count_include_pad"] = int(g.rng.integers(0, 2))
    return g.node("AveragePool", [x], **attrs)


@op("GlobalMaxPool", "exact")
def _gmaxpool(g, x):
    need(x.dtype in FLOATS and x.rank >= 3)
    return g.node("GlobalMaxPool", [x])


@op("GlobalAveragePool", "reduce")
def _gavgpool(g, x):
    need(x.dtype in FLOATS and x.rank >= 3)
    return g.node("GlobalAveragePool", [x])


@op("LpNormalization", "reduce")
def _lpnorm(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank >= 1)
    return g.node("LpNormalization", [x], axis=axis_of(g, x), p=int(pick(g.rng, [1, 2])))


@op("LayerNormalization", "reduce")
def _layernorm(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank >= 1)
    a = axis_of(g, x)
    norm = x.shape[a:] if a >= 0 else x.shape[a:]
    scale = g.const((g.rng.integers(-8, 9, size=norm) / 4).astype(np.float32))
    return g.node("LayerNormalization", [x, scale], axis=a, epsilon=1e-5)


@op("InstanceNormalization", "reduce")
def _instnorm(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank >= 3)
    c = x.shape[1]
    s = g.const((g.rng.integers(-8, 9, size=c) / 4).astype(np.float32))
    b = g.const((g.rng.integers(-8, 9, size=c) / 4).astype(np.float32))
    return g.node("InstanceNormalization", [x, s, b])


@op("BatchNormalization", "math")
def _batchnorm(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank >= 2)
    c = x.shape[1]
    mk = lambda lo: g.const((g.rng.integers(lo, 9, size=c) / 4).astype(np.float32))
    return g.node("BatchNormalization", [x, mk(-8), mk(-8), mk(-8), mk(1)])


@op("MatMul", "reduce")
def _matmul(g, x):
    need(x.dtype in [np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.int64)] and x.rank >= 1)
    k = x.shape[-1]
    n = int(pick(g.rng, [1, 3, 8]))
    w = g.const((g.rng.integers(-8, 9, size=(k, n)) / (4 if x.dtype.kind == "f" else 1)).astype(x.dtype)) \
        if g.rng.random() < 0.6 else g.input(x.dtype, (k, n))
    return g.node("MatMul", [x, w])


@op("Gemm", "reduce")
def _gemm(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank == 2)
    trans_b = int(g.rng.integers(0, 2))
    n = int(pick(g.rng, [1, 4, 9]))
    k = x.shape[1]
    w = g.const((g.rng.integers(-8, 9, size=(n, k) if trans_b else (k, n)) / 4).astype(np.float32))
    ins = [x, w]
    if g.rng.random() < 0.6:
        ins.append(g.const((g.rng.integers(-8, 9, size=pick(g.rng, [(n,), (1, n)])) / 4).astype(np.float32)))
    return g.node("Gemm", ins, transB=trans_b, alpha=float(pick(g.rng, [1.0, 0.5])), beta=float(pick(g.rng, [1.0, 2.0])))


@op("Conv", "reduce")
def _conv(g, x):
    need(x.dtype in [np.dtype(np.float32)] and 3 <= x.rank <= 4 and x.size > 0)
    c = x.shape[1]
    groups = c if c > 1 and g.rng.random() < 0.3 else 1
    m = groups * int(pick(g.rng, [1, 2])) if groups > 1 else int(pick(g.rng, [1, 2, 4]))
    kernel = [int(g.rng.integers(1, 4)) for _ in range(x.rank - 2)]
    w = g.const((g.rng.integers(-8, 9, size=[m, c // groups] + kernel) / 4).astype(np.float32))
    ins = [x, w]
    if g.rng.random() < 0.5:
        ins.append(g.const((g.rng.integers(-8, 9, size=m) / 4).astype(np.float32)))
    attrs = {"group": groups, "kernel_shape": kernel}
    if g.rng.random() < 0.5:
        attrs["pads"] = [int(g.rng.integers(0, 2)) for _ in kernel] * 2
    if g.rng.random() < 0.4:
        attrs["strides"] = [int(g.rng.integers(1, 3)) for _ in kernel]
    if g.rng.random() < 0.3:
        attrs["dilations"] = [int(g.rng.integers(1, 3)) for _ in kernel]
    return g.node("Conv", ins, **attrs)


# ---- data movement ----------------------------------------------------------------------------

@op("Transpose", "exact")
def _transpose(g, x):
    need(x.rank >= 2)
    return g.node("Transpose", [x], perm=[int(p) for p in g.rng.permutation(x.rank)])


@op("Reshape", "exact")
def _reshape(g, x):
    need(x.rank >= 1)
    dims = list(x.shape)
    if g.rng.random() < 0.5 and x.rank >= 2:  # merge two neighbours
        i = int(g.rng.integers(0, x.rank - 1))
        dims[i:i + 2] = [dims[i] * dims[i + 1]]
    else:
        dims = dims + [1] if g.rng.random() < 0.5 else [1] + dims
    if x.size > 0 and g.rng.random() < 0.4:
        dims[int(g.rng.integers(0, len(dims)))] = -1
    return g.node("Reshape", [x, g.const(np.array(dims, dtype=np.int64), "shape")])


@op("Flatten", "exact")
def _flatten(g, x):
    return g.node("Flatten", [x], axis=int(g.rng.integers(-x.rank, x.rank + 1)) if x.rank else 0)


@op("Unsqueeze", "exact")
def _unsqueeze(g, x):
    a = int(g.rng.integers(-(x.rank + 1), x.rank + 1))
    return g.node("Unsqueeze", [x, g.const(np.array([a], dtype=np.int64), "axes")])


@op("Squeeze", "exact")
def _squeeze(g, x):
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    need(ones)
    return g.node("Squeeze", [x, g.const(np.array([pick(g.rng, ones)], dtype=np.int64), "axes")])


@op("Slice", "exact")
def _slice(g, x):
    need(x.rank >= 1)
    a = axis_of(g, x)
    n = x.shape[a]
    step = int(pick(g.rng, [1, 1, 2, -1, -2]))
    start = int(g.rng.integers(-n - 2, n + 3))
    end = int(g.rng.integers(-n - 2, n + 3)) if g.rng.random() < 0.8 else (2**63 - 1 if step > 0 else -2**63)
    c = lambda v: g.const(np.array([v], dtype=np.int64))
    return g.node("Slice", [x, c(start), c(end), c(a), c(step)])


@op("Concat", "exact")
def _concat(g, x):
    need(x.rank >= 1)
    a = axis_of(g, x)
    shape = list(x.shape)
    shape[a if a >= 0 else a + x.rank] = int(g.rng.integers(0, 4))
    return g.node("Concat", [x, g.input(x.dtype, shape)] if g.rng.random() < 0.7 else [x, x], axis=a)


@op("Split", "exact")
def _split(g, x):
    need(x.rank >= 1)
    a = axis_of(g, x)
    n = x.shape[a]
    first = int(g.rng.integers(0, n + 1))
    sizes = g.const(np.array([first, n - first], dtype=np.int64), "split")
    return g.node("Split", [x, sizes], outputs=2, keep=int(g.rng.integers(0, 2)), axis=a)


@op("Tile", "exact")
def _tile(g, x):
    need(x.rank >= 1 and x.size <= 64)
    reps = g.rng.integers(0 if g.rng.random() < 0.1 else 1, 3, size=x.rank).astype(np.int64)
    return g.node("Tile", [x, g.const(reps, "repeats")])


@op("Expand", "exact")
def _expand(g, x):
    shape = [int(pick(g.rng, [d, d])) if d != 1 else int(pick(g.rng, [1, 2, 3])) for d in x.shape]
    if g.rng.random() < 0.3:
        shape = [2] + shape
    return g.node("Expand", [x, g.const(np.array(shape, dtype=np.int64), "shape")])


@op("Pad", "exact")
def _pad(g, x):
    need(x.rank >= 1)
    mode = pick(g.rng, ["constant", "reflect", "edge", "wrap"])
    pads = [int(g.rng.integers(-2, 3)) for _ in range(2 * x.rank)]
    ins = [x, g.const(np.array(pads, dtype=np.int64), "pads")]
    if mode == "constant" and g.rng.random() < 0.5 and x.dtype in NUMERIC:
        ins.append(g.const(np.array(pick(g.rng, [0, 1, 2 if x.dtype.kind == "u" else -2]), dtype=x.dtype), "value"))
    return g.node("Pad", ins, mode=mode)


@op("Gather", "exact")
def _gather(g, x):
    need(x.rank >= 1)
    a = axis_of(g, x)
    n = x.shape[a]
    need(n > 0)
    idx = g.rng.integers(-n, n, size=pick(g.rng, [(), (3,), (2, 2)])).astype(pick(g.rng, [np.int64, np.int32]))
    return g.node("Gather", [x, g.const(idx, "indices")], axis=a)


@op("GatherElements", "exact")
def _gather_elements(g, x):
    need(x.rank >= 1 and x.size > 0)
    a = axis_of(g, x)
    n = x.shape[a]
    idx = g.rng.integers(-n, n, size=x.shape).astype(np.int64)
    return g.node("GatherElements", [x, g.const(idx, "indices")], axis=a)


@op("Resize", "reduce")
def _resize(g, x):
    need(x.dtype in [np.dtype(np.float32)] and 3 <= x.rank <= 4 and x.size > 0)
    mode = pick(g.rng, ["nearest", "nearest", "linear"])
    attrs = {"mode": mode,
             "coordinate_transformation_mode": pick(g.rng, ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])}
    if mode == "nearest":
        attrs["nearest_mode"] = pick(g.rng, ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if g.rng.random() < 0.5:
        scales = [1.0, 1.0] + [float(pick(g.rng, [0.5, 2.0, 3.0, 1.5, 0.75, 2.5])) for _ in range(x.rank - 2)]
        ins = [x, None, g.const(np.array(scales, dtype=np.float32), "scales")]
    else:  # sizes: the scale is exactly out / in, where ties such as 6 -> 5 sit (docs/semantics.md)
        sizes = list(x.shape[:2]) + [int(g.rng.integers(1, 2 * d + 3)) for d in x.shape[2:]]
        ins = [x, None, None, g.const(np.array(sizes, dtype=np.int64), "sizes")]
    return g.node("Resize", ins, **attrs)


@op("DepthToSpace", "exact")
def _d2s(g, x):
    need(x.rank == 4 and x.shape[1] % 4 == 0 and x.shape[1] > 0)
    return g.node("DepthToSpace", [x], blocksize=2, mode=pick(g.rng, ["DCR", "CRD"]))


@op("SpaceToDepth", "exact")
def _s2d(g, x):
    need(x.rank == 4 and x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0)
    return g.node("SpaceToDepth", [x], blocksize=2)


@op("Trilu", "exact")
def _trilu(g, x):
    need(x.rank >= 2)
    ins = [x, g.const(np.array(int(g.rng.integers(-2, 3)), dtype=np.int64), "k")] if g.rng.random() < 0.6 else [x]
    return g.node("Trilu", ins, upper=int(g.rng.integers(0, 2)))


@op("Shape", "exact")
def _shape(g, x):
    return g.node("Shape", [x])


# ---- more of the registry -----------------------------------------------------------------------

for _n in ["Asin", "Acos", "Atanh", "Acosh"]:  # a domain edge at ±1: applied to exact values only
    unary(_n, "math", FLOATS, steps=True)


@op("Dropout", "exact")
def _dropout(g, x):  # inference: the identity
    need(x.dtype in FLOATS)
    return g.node("Dropout", [x])


@op("CastLike", "exact", steps=True)
def _castlike(g, x):
    to = pick(g.rng, NUMERIC + BOOL)
    return g.node("CastLike", [x, g.const(np.zeros((), dtype=to), "like")])


@op("EyeLike", "exact")
def _eyelike(g, x):
    need(x.rank == 2)
    return g.node("EyeLike", [x], k=int(g.rng.integers(-2, 3)))


@op("Size", "exact")
def _size(g, x):
    return g.node("Size", [x])


@op("GatherND", "exact")
def _gathernd(g, x):
    need(x.rank >= 1 and all(d > 0 for d in x.shape))
    k = int(g.rng.integers(1, x.rank + 1))
    idx = np.stack([g.rng.integers(-d, d, size=2) for d in x.shape[:k]], axis=-1).astype(np.int64)
    return g.node("GatherND", [x, g.const(idx, "indices")])


@op("ScatterElements", "exact")
def _scatter_elements(g, x):
    need(x.rank >= 1 and x.size > 0)
    a = axis_of(g, x)
    n = x.shape[a]
    # Distinct indices along the axis (a permutation), so that no two updates race.
    idx = np.argsort(g.rng.random(x.shape), axis=a).astype(np.int64) - (n if g.rng.random() < 0.3 else 0)
    return g.node("ScatterElements", [x, g.const(idx, "indices"), operand(g, x, broadcast=False)], axis=a)


@op("ScatterND", "exact")
def _scatter_nd(g, x):
    need(x.rank >= 1 and x.shape[0] > 0)
    n = x.shape[0]
    rows = g.rng.permutation(n)[:int(g.rng.integers(1, n + 1))]
    idx = rows.reshape(-1, 1).astype(np.int64)
    upd = g.input(x.dtype, (len(rows),) + x.shape[1:])
    return g.node("ScatterND", [x, g.const(idx, "indices"), upd])


@op("OneHot", "exact")
def _onehot(g, x):
    need(x.dtype in [np.dtype(np.int32), np.dtype(np.int64)] and x.size <= 64)
    depth = g.const(np.array(int(g.rng.integers(1, 6)), dtype=np.int64), "depth")
    values = g.const(np.array([0, 1], dtype=np.float32), "values")
    return g.node("OneHot", [x, depth, values], axis=int(g.rng.integers(-x.rank - 1, x.rank + 1)))


@op("ReverseSequence", "exact")
def _reverse_sequence(g, x):
    need(x.rank >= 2 and x.shape[0] > 0 and x.shape[1] > 0)
    batch_axis = int(g.rng.integers(0, 2))
    time_axis = 1 - batch_axis
    lens = g.rng.integers(1, x.shape[time_axis] + 1, size=x.shape[batch_axis]).astype(np.int64)
    return g.node("ReverseSequence", [x, g.const(lens, "lens")], batch_axis=batch_axis, time_axis=time_axis)


@op("CenterCropPad", "exact")
def _center_crop_pad(g, x):
    need(x.rank >= 1)
    shape = [max(0, d + int(g.rng.integers(-2, 3))) for d in x.shape]
    return g.node("CenterCropPad", [x, g.const(np.array(shape, dtype=np.int64), "shape")])


@op("Compress", "exact")
def _compress(g, x):
    need(x.rank >= 1)
    a = axis_of(g, x)
    cond = g.rng.integers(0, 2, size=x.shape[a]).astype(np.bool_)
    shape = list(x.shape)
    shape[a] = int(cond.sum())
    return g.node("Compress", [x, g.const(cond, "condition")], axis=a, like=(x.dtype, shape))


@op("GlobalLpPool", "reduce")
def _global_lp_pool(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank >= 3)
    return g.node("GlobalLpPool", [x], p=int(pick(g.rng, [1, 2, 3])))


@op("LpPool", "reduce")
def _lp_pool(g, x):
    need(x.dtype in [np.dtype(np.float32)] and 3 <= x.rank <= 4 and x.size > 0)
    attrs = pool_attrs(g, x, x.rank - 2)
    attrs.pop("auto_pad", None)
    return g.node("LpPool", [x], p=int(pick(g.rng, [1, 2])), **attrs)


@op("GroupNormalization", "reduce")
def _group_norm(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank >= 3 and x.shape[1] > 0)
    c = x.shape[1]
    groups = int(pick(g.rng, [d for d in range(1, c + 1) if c % d == 0]))
    s = g.const((g.rng.integers(-8, 9, size=c) / 4).astype(np.float32))
    b = g.const((g.rng.integers(-8, 9, size=c) / 4).astype(np.float32))
    return g.node("GroupNormalization", [x, s, b], num_groups=groups, epsilon=1e-5, like=(x.dtype, x.shape))


@op("MeanVarianceNormalization", "reduce")
def _mvn(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank == 4)
    return g.node("MeanVarianceNormalization", [x], like=(x.dtype, x.shape))


@op("ConvTranspose", "reduce")
def _conv_transpose(g, x):
    need(x.dtype in [np.dtype(np.float32)] and 3 <= x.rank <= 4 and x.size > 0)
    c = x.shape[1]
    m = int(pick(g.rng, [1, 2, 3]))
    kernel = [int(g.rng.integers(1, 4)) for _ in range(x.rank - 2)]
    w = g.const((g.rng.integers(-8, 9, size=[c, m] + kernel) / 4).astype(np.float32))
    attrs = {"kernel_shape": kernel}
    if g.rng.random() < 0.5:
        attrs["strides"] = [int(g.rng.integers(1, 3)) for _ in kernel]
    if g.rng.random() < 0.3:
        attrs["pads"] = [int(g.rng.integers(0, k)) for k in kernel] * 2
    return g.node("ConvTranspose", [x, w], **attrs)


@op("Einsum", "reduce")
def _einsum(g, x):
    need(x.dtype in [np.dtype(np.float32)] and x.rank == 2)
    eq = pick(g.rng, ["ij->ji", "ij->i", "ij,jk->ik", "ij,ij->ij"])
    if "," not in eq:
        return g.node("Einsum", [x], equation=eq)
    other = g.input(x.dtype, (x.shape[1], int(pick(g.rng, [1, 3]))) if eq == "ij,jk->ik" else x.shape)
    return g.node("Einsum", [x, other], equation=eq)


@op("QuantizeLinear", "exact", steps=True)
def _quantize(g, x):  # rounds half to even: ties come from the grid of values
    need(x.dtype in [np.dtype(np.float32)])
    scale = g.const(np.array(pick(g.rng, [0.25, 0.5, 1.0]), dtype=np.float32), "scale")
    zp = g.const(np.array(int(g.rng.integers(-3, 4)), dtype=np.int8), "zero_point")
    return g.node("QuantizeLinear", [x, scale, zp])


@op("DequantizeLinear", "rounded")
def _dequantize(g, x):
    need(x.dtype in [np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int32)])
    scale = g.const(np.array(pick(g.rng, [0.25, 0.5, 3.0]), dtype=np.float32), "scale")
    ins = [x, scale]
    if x.dtype != np.dtype(np.int32):
        ins.append(g.const(np.array(int(g.rng.integers(0, 4)), dtype=x.dtype), "zero_point"))
    return g.node("DequantizeLinear", ins)


# ---- attention and recurrent layers -----------------------------------------------------------

@op("Attention", "reduce")
def _attention(g, x):
    """Scaled dot-product attention written out as TorchScript exports write it: MatMul(Q, K^T),
    Div by sqrt(head size), an additive padding mask half the time, Softmax, MatMul with V. The
    fused paths run it as one Attention op (compiler/passes/attention.h), the unfused path op by
    op, onnxruntime as written."""
    need(x.dtype == np.dtype(np.float32) and x.rank == 4 and x.size > 0)
    b, h, s, d = x.shape
    k = g.input(x.dtype, x.shape)
    v = g.input(x.dtype, (b, h, s, int(pick(g.rng, [d, 1, 5]))))
    scores = g.node("MatMul", [x, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = g.node("Div", [scores, g.const(np.array(np.sqrt(d), dtype=np.float32), "sqrt_d")])
    if g.rng.random() < 0.5:
        mask = np.where(g.rng.random((1, 1, 1, s)) < 0.25, -10000.0, 0.0).astype(np.float32)
        scores = g.node("Add", [scores, g.const(mask, "mask")])
    return g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])


def recurrent_op(name, gates):
    """LSTM, GRU or RNN over x [seq, batch, input], with constant weights: Y or Y_h."""
    def fn(g, x):
        need(x.dtype == np.dtype(np.float32) and x.rank == 3 and x.size > 0)
        inp = x.shape[2]
        hidden = int(pick(g.rng, [1, 3, 8]))
        direction = pick(g.rng, ["forward", "reverse", "bidirectional"])
        dirs = 2 if direction == "bidirectional" else 1
        weights = lambda *shape: g.const((g.rng.integers(-8, 9, size=shape) / 16).astype(np.float32), "w")
        ins = [x, weights(dirs, gates * hidden, inp), weights(dirs, gates * hidden, hidden)]
        if g.rng.random() < 0.6:
            ins.append(weights(dirs, 2 * gates * hidden))
        attrs = {"hidden_size": hidden, "direction": direction}
        if name == "GRU":
            attrs["linear_before_reset"] = int(g.rng.integers(0, 2))
        outputs = 3 if name == "LSTM" else 2
        return g.node(name, ins, outputs=outputs, keep=int(g.rng.integers(0, 2)), **attrs)
    TABLE[name] = Op(name, fn, "reduce")


recurrent_op("LSTM", 4)
recurrent_op("GRU", 3)
recurrent_op("RNN", 1)
