#!/usr/bin/env python3
"""The differential tester: random small ONNX graphs run on every path through Kiln (unfused CPU
kernels, fused programs, constant folding, the CUDA backend on the emulated device) and on
onnxruntime; any disagreement is shrunk to a minimal model and saved with a replay command.

  difftest.py [--seconds N] [--seed N] [--batch N] [--kiln build/kiln] [--emulated-lib DIR]
              [--found DIR] [--no-cuda] [--no-shrink] [-v]       random graphs for N seconds
  difftest.py --corpus tests/differential/corpus                  the regression corpus
  difftest.py --replay DIR                                        one saved case, every path
  difftest.py --add-to-corpus DIR --name NAME                     a fixed case into the corpus

Exit status: 0 when no disagreement was found outside ort_deviations.txt, 1 otherwise, 2 for
a bad command line. See README.md here and docs/semantics.md."""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from compare import compare  # noqa: E402
from graphs import BOOL, FLOATS, INTS, Graph, Skip, merge, random_array  # noqa: E402
from ops import TABLE  # noqa: E402
from paths import Kiln, PathResult, read_tensors, run_onnxruntime, tempdir, write_tensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
EXACT_CLASSES = ("exact", "rounded")
INT_OVERFLOW_OPS = {"Div", "Mod", "Add", "Sub", "Mul", "Neg", "Abs", "Sum", "Mean", "Pow", "MatMul", "CumSum",
                    "ReduceSum", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceMean"}
# Paths that run the same instructions: the unfused CPU kernels (folding runs them too), and
# the fused regions (native code and the interpreted programs on the CPU, generated kernels on the
# CUDA device).
FAMILY = {"unfused": "unfused", "folded": "unfused", "fused": "fused", "interpreted": "fused", "cuda": "fused",
          "onnxruntime": "onnxruntime"}


# ---- generation -------------------------------------------------------------------------------

class Case:
    """One generated graph: its nodes and inputs, its output, the ops it chains and whether
    every path must give the same bits."""

    def __init__(self, seed, graph, out, ops, exact, symbolic):
        self.seed, self.graph, self.out, self.ops, self.exact, self.symbolic = seed, graph, out, ops, exact, symbolic

    def model(self):
        return merge([self.graph], [self.out], self.symbolic)

    @property
    def feeds(self):
        return self.graph.feeds

    def onnxruntime_defined(self):
        """False where the spec leaves the result undefined, so onnxruntime is no reference:
        integer arithmetic (division or modulo by zero, INT_MIN / -1, overflow: Kiln wraps,
        onnxruntime fails or saturates in places) and float-to-integer casts (NaN, infinity,
        out of range)."""
        for node in self.graph.nodes:
            if node.op_type in INT_OVERFLOW_OPS and self.dtype_of(node.input[0]).kind in "iu":
                return False
            if node.op_type == "Cast" and self.dtype_of(node.input[0]).kind == "f" and \
                    onnx.helper.get_attribute_value(node.attribute[0]) not in (1, 10, 11):
                return False
            if node.op_type == "CastLike" and self.dtype_of(node.input[0]).kind == "f" and \
                    self.dtype_of(node.input[1]).kind not in "fb":
                return False
        return True

    def has_symbols(self):
        return bool(self.symbolic)

    def half(self):
        """Whether a float16 value is computed inside the graph (see compare's half_intermediates)."""
        return any(d == np.dtype(np.float16) for d in self.graph.dtypes.values())

    def dtype_of(self, name):
        return self.graph.dtypes.get(name, np.dtype(np.float32))


def random_shape(rng):
    rank = int(rng.choice([0, 1, 2, 3, 4], p=[0.05, 0.2, 0.3, 0.25, 0.2]))
    dims = [0, 1, 1, 2, 3, 4, 5, 7]
    return [int(dims[rng.integers(0, len(dims))]) if rng.random() > 0.04 else 0 for _ in range(rank)]


def random_dtype(rng):
    r = rng.random()
    if r < 0.55:
        return np.dtype(np.float32)
    if r < 0.63:
        return np.dtype(np.float16)
    if r < 0.68:
        return np.dtype(np.float64)
    if r < 0.95:
        return INTS[int(rng.integers(0, len(INTS)))]
    return BOOL[0]


def make_case(seed, prefix, edge_rate, forced_ops=None, forced_shape=None, forced_dtype=None):
    rng = np.random.default_rng(seed)
    g = Graph(rng, prefix, edge_rate)
    g.dtypes = {}
    shape = forced_shape if forced_shape is not None else random_shape(rng)
    dtype = forced_dtype if forced_dtype is not None else random_dtype(rng)
    x = g.input(dtype, shape)
    g.dtypes[x.name] = x.dtype
    length = len(forced_ops) if forced_ops else int(rng.integers(2, 7))
    names = sorted(TABLE)
    exact, chosen = True, []
    for step in range(length):
        for _ in range(40):
            name = forced_ops[step] if forced_ops else names[int(rng.integers(0, len(names)))]
            spec = TABLE[name]
            if spec.steps and not exact:
                if forced_ops:
                    raise Skip("a step op after an inexact one")
                continue
            mark = (len(g.inputs), len(g.initializers), dict(g.feeds))
            try:
                y = spec.fn(g, x)
                if y.size > 4096:
                    raise Skip("too large")
            except Skip:
                del g.inputs[mark[0]:]
                del g.initializers[mark[1]:]
                g.feeds = mark[2]
                if forced_ops:
                    raise
                continue
            for v in g.inputs:
                g.dtypes[v.name] = v.dtype
            for t in g.initializers:
                g.dtypes[t.name] = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
            g.dtypes[y.name] = y.dtype
            # A correctly rounded op on float16 is not the same bits on every path: an unfused
            # kernel rounds to float16 after each op, a fused one keeps float32 until its store.
            half = np.dtype(np.float16) in (x.dtype, y.dtype)
            exact = exact and (spec.cls == "exact" or (spec.cls == "rounded" and not half))
            x = y
            chosen.append(name)
            break
        else:
            break
    if not chosen:
        raise Skip("no op applied")
    symbolic = {}
    first = g.inputs[0]
    # Symbols are dims of at least 1 (a 0 bound to a symbol is issue 22's work).
    if first.rank and first.shape[0] >= 1 and rng.random() < 0.3:
        for v in g.inputs:
            if v.rank and v.shape[0] == first.shape[0]:
                symbolic[v.name] = [f"{prefix}N"] + [None] * (v.rank - 1)
    return Case(seed, g, x, chosen, exact, symbolic)


# ---- running and comparing --------------------------------------------------------------------

def run_cases(kiln, path, cases, work):
    """{case index: PathResult} for `path`, one compile for the whole batch; a batch that fails
    is split in halves until the failing cases stand alone."""
    model = merge([c.graph for c in cases], [c.out for c in cases], {k: v for c in cases for k, v in c.symbolic.items()})
    feeds = {k: v for c in cases for k, v in c.feeds.items()}
    r = kiln.run_path(path, model, feeds, work)
    if r.ok:
        return {id(c): PathResult(outputs={c.out.name: r.outputs[c.out.name]}) for c in cases}
    if len(cases) == 1:
        return {id(cases[0]): r}
    half = len(cases) // 2
    out = run_cases(kiln, path, cases[:half], work)
    out.update(run_cases(kiln, path, cases[half:], work))
    return out


class Finding:
    def __init__(self, case, kind, a, b, detail):
        self.case, self.kind, self.a, self.b, self.detail = case, kind, a, b, detail


def judge(case, results, reference):
    """The disagreements of one case: every path against the first that ran (unfused first),
    errors where another path ran, and onnxruntime where the spec defines the result."""
    found = []
    ran = [p for p, r in results.items() if r.ok]
    for p, r in results.items():
        # A compile error of the symbolic model alone (the folded model has static shapes) is
        # an assumption the compiler made about a symbol (a Slice end within the dim), which a
        # guard or the compile refuses: issue 22's work, not a wrong result.
        assumption = case.has_symbols() and p != "folded" and "compile failed" in (r.error or "") \
            and "INVALID_ARGUMENT" in r.error
        if r.error and ran and not assumption:
            found.append(Finding(case, f"error on {p}", p, ran[0], r.error))
    if ran:
        anchor = ran[0]
        want = results[anchor].outputs[case.out.name]
        half = case.half()
        for p in ran[1:]:
            d = compare(want, results[p].outputs[case.out.name], case.exact, half and FAMILY[p] != FAMILY[anchor])
            if d:
                found.append(Finding(case, f"{p} vs {anchor}", anchor, p, d))
        if reference is not None and reference.ok and case.onnxruntime_defined():
            d = compare(reference.outputs[case.out.name], want, case.exact, half)
            if d:
                found.append(Finding(case, f"{anchor} vs onnxruntime", "onnxruntime", anchor, d))
    elif reference is not None and reference.ok and case.onnxruntime_defined():
        # Every path failed where onnxruntime ran. One INVALID_ARGUMENT from the compiler on
        # every path is Kiln's stricter validation of the model (a Pad of an axis its
        # negative pads empty, where onnxruntime lets an empty output through), not a result.
        errs = [p for p, r in results.items() if r.error]
        invalid = all("compile failed" in r.error and "INVALID_ARGUMENT" in r.error for r in results.values() if r.error)
        if errs and not invalid:
            found.append(Finding(case, f"error on {errs[0]}", errs[0], "onnxruntime", results[errs[0]].error))
    return found


def side(kiln, name, case, work):
    if name == "onnxruntime":
        return run_onnxruntime(case.model(), case.feeds)
    if isinstance(case, SavedCase):
        return kiln.run_path(name, case.model(), case.feeds, work)
    return run_cases(kiln, name, [case], work)[id(case)]


def still_fails(kiln, finding, cand, work):
    ra, rb = side(kiln, finding.a, cand, work), side(kiln, finding.b, cand, work)
    if finding.kind.startswith("error"):
        bad, good = (ra, rb) if finding.a != "onnxruntime" else (rb, ra)
        return bool(bad.error) and good.ok
    if not (ra.ok and rb.ok):
        return False
    if "onnxruntime" in (finding.a, finding.b) and not cand.onnxruntime_defined():
        return False
    half = cand.half() and FAMILY[finding.a] != FAMILY[finding.b]
    return compare(ra.outputs[cand.out.name], rb.outputs[cand.out.name], cand.exact, half) is not None


def shrink(kiln, finding, work, budget_s, edge_rate):
    """A smaller case with the same disagreement: fewer ops (a prefix of the chain, one op
    dropped), a smaller input shape, fewer edge values (those replaced by ordinary ones)."""
    best = finding.case
    deadline = time.time() + budget_s
    first = best.graph.inputs[0]

    def attempt(ops, shape, dtype, seed):
        try:
            c = make_case(seed, "s_", edge_rate, forced_ops=ops, forced_shape=shape, forced_dtype=dtype)
        except Skip:
            return None
        return c if still_fails(kiln, finding, c, work) else None

    ops, shape, dtype = list(best.ops), list(first.shape), first.dtype
    changed = True
    while changed and time.time() < deadline:
        changed = False
        candidates = [ops[:k] for k in range(1, len(ops))] + \
                     [ops[:i] + ops[i + 1:] for i in range(len(ops)) if len(ops) > 1]
        for cand_ops in candidates:
            if time.time() > deadline:
                break
            for seed in (best.seed, best.seed + 1, best.seed + 2):
                c = attempt(cand_ops, shape, dtype, seed)
                if c:
                    best, ops, changed = c, cand_ops, True
                    break
            if changed:
                break
        if changed:
            continue
        for i, d in enumerate(shape):
            if d > 1 and time.time() < deadline:
                for nd in (1, d // 2):
                    s2 = shape[:i] + [nd] + shape[i + 1:]
                    c = attempt(ops, s2, dtype, best.seed)
                    if c:
                        best, shape, changed = c, s2, True
                        break
            if changed:
                break
    # Fewer edge values: ordinary values where the disagreement does not need the edge one.
    for name, a in list(best.feeds.items()):
        if a.dtype.kind != "f" or time.time() > deadline:
            continue
        flat = a.reshape(-1).copy()
        for i in range(flat.size):
            if time.time() > deadline:
                break
            if np.isfinite(flat[i]) and abs(flat[i]) <= 8 and flat[i] != 0:
                continue
            saved = flat[i]
            flat[i] = 1.0
            best.graph.feeds[name] = flat.reshape(a.shape)
            if not still_fails(kiln, finding, best, work):
                flat[i] = saved
                best.graph.feeds[name] = flat.reshape(a.shape)
    return Finding(best, finding.kind, finding.a, finding.b, finding.detail)


def save_case(case, folder, note):
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    m = case.model()
    onnx.save(m, os.path.join(folder, "model.onnx"))
    write_tensors(os.path.join(folder, "test_data_set_0"), "input", [case.feeds[vi.name] for vi in m.graph.input])
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump({"ops": case.ops, "exact": case.exact, "note": note, "half": case.half(),
                   "onnxruntime_defined": case.onnxruntime_defined()}, f, indent=1)


# ---- saved cases: replay and the regression corpus ---------------------------------------------

class SavedCase(Case):
    def __init__(self, folder):
        self.folder = folder
        self.m = onnx.load(os.path.join(folder, "model.onnx"))
        meta = json.load(open(os.path.join(folder, "case.json")))
        self.ops, self.exact, self.note = meta["ops"], meta["exact"], meta.get("note", "")
        self._defined = meta.get("onnxruntime_defined", True)
        self._half = meta.get("half", False)
        names = [vi.name for vi in self.m.graph.input]
        arrays = read_tensors(os.path.join(folder, "test_data_set_0"), "input", len(names))
        self._feeds = dict(zip(names, arrays))
        self.out = type("Out", (), {"name": self.m.graph.output[0].name})()
        self.expected = None
        p = os.path.join(folder, "test_data_set_0", "output_0.pb")
        if os.path.exists(p):
            self.expected = read_tensors(os.path.join(folder, "test_data_set_0"), "output", 1)[0]

    def model(self):
        return self.m

    @property
    def feeds(self):
        return self._feeds

    def onnxruntime_defined(self):
        return self._defined

    def half(self):
        return self._half

    def has_symbols(self):
        return any(d.HasField("dim_param") for vi in self.m.graph.input for d in vi.type.tensor_type.shape.dim)


def run_saved(kiln, case, work):
    results = {p: side(kiln, p, case, work) for p in kiln.paths()}
    return results, run_onnxruntime(case.model(), case.feeds)


def replay(kiln, folder, work):
    case = SavedCase(folder)
    results, ref = run_saved(kiln, case, work)
    print(f"{folder}: ops {' -> '.join(case.ops)} ({'bit-exact' if case.exact else 'within tolerance'}); {case.note}")
    for p, r in list(results.items()) + [("onnxruntime", ref)]:
        if r.ok:
            a = r.outputs[case.out.name]
            print(f"  {p:12s} {a.dtype}{list(a.shape)}: {np.array2string(a.reshape(-1)[:16], threshold=16)}")
        else:
            print(f"  {p:12s} {'refused' if r.refused else 'error'}: {r.refused or r.error}")
    found = judge(case, results, ref)
    if case.expected is not None:
        for p, r in results.items():
            if r.ok:
                d = compare(case.expected, r.outputs[case.out.name], case.exact)
                if d:
                    found.append(Finding(case, f"{p} vs expected", "expected", p, d))
    for f in found:
        print(f"  DISAGREE {f.kind}: {f.detail}")
    return found


def add_to_corpus(kiln, folder, name, work):
    case = SavedCase(folder)
    results, ref = run_saved(kiln, case, work)
    found = judge(case, results, ref)
    if found:
        for f in found:
            print(f"difftest: {folder} still disagrees ({f.kind}: {f.detail}); fix it first", file=sys.stderr)
        return 1
    anchor = next(r for r in results.values() if r.ok)
    dest = os.path.join(HERE, "corpus", name)
    shutil.copytree(folder, dest, dirs_exist_ok=True)
    write_tensors(os.path.join(dest, "test_data_set_0"), "output", [anchor.outputs[case.out.name]])
    print(f"difftest: added {dest} (expected output from the paths, which agree)")
    return 0


def run_corpus(kiln, corpus, work):
    folders = sorted(os.path.join(corpus, d) for d in os.listdir(corpus) if os.path.isdir(os.path.join(corpus, d)))
    failed = 0
    start = time.time()
    for folder in folders:
        case = SavedCase(folder)
        results, ref = run_saved(kiln, case, work)
        found = judge(case, results, ref)
        for p, r in results.items():
            if r.ok:
                d = compare(case.expected, r.outputs[case.out.name], case.exact)
                if d:
                    found.append(Finding(case, f"{p} vs expected", "expected", p, d))
            elif r.refused:
                found.append(Finding(case, f"refused on {p}", p, "", r.refused))
        status = "ok" if not found else "FAIL"
        print(f"  {status:4s} {os.path.basename(folder)}: {case.note}")
        for f in found:
            print(f"       {f.kind}: {f.detail}")
        failed += bool(found)
    print(f"difftest: corpus: {len(folders) - failed} of {len(folders)} cases agree on every path "
          f"({', '.join(kiln.paths())}) with their expected outputs, {time.time() - start:.1f} s")
    return 1 if failed else 0


# ---- onnxruntime's reviewed deviations ---------------------------------------------------------

def load_deviations():
    """ort_deviations.txt: `OP DTYPE-OR-* WHEN reason` per line (the file says what WHEN means)."""
    out = []
    for line in open(os.path.join(HERE, "ort_deviations.txt")):
        line = line.split("#", 1)[0].strip()
        if line:
            op, dtype, when, reason = line.split(None, 3)
            out.append((op, dtype, when, reason))
    return out


def op_inputs(case, op):
    """The first input of every `op` node of the case, as onnxruntime computes it (the values
    the graph feeds that op), or [] when it cannot say."""
    m = onnx.ModelProto()
    m.CopyFrom(case.model())
    names = [n.input[0] for n in m.graph.node if n.op_type == op and n.input and n.input[0]]
    try:
        inferred = onnx.shape_inference.infer_shapes(m)
    except Exception:
        return []
    types = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}
    del m.graph.output[:]
    for n in names:  # untyped where ONNX's inference says nothing (a function op's output)
        m.graph.output.append(types[n] if n in types else onnx.helper.make_empty_tensor_value_info(n))
    r = run_onnxruntime(m, case.feeds)
    return list(r.outputs.values()) if r.ok else []


def known_deviation(finding, deviations):
    """(op, reason) of the ort_deviations.txt line the finding matches, or None."""
    if "onnxruntime" not in (finding.a, finding.b):
        return None
    c = finding.case
    ops = set(c.ops)
    for op, dt, when, reason in deviations:
        if op not in ops:
            continue
        ins = op_inputs(c, op)
        if dt != "*" and not any(str(a.dtype) == dt for a in ins):
            continue
        floats = [a for a in ins if a.dtype.kind == "f"]
        if when == "value" and ins:
            return op, reason
        if when == "nan-input" and any(not np.isfinite(a).all() for a in floats):
            return op, reason
        if when == "extreme-input" and any(((a != 0) & ((np.abs(a) < np.sqrt(np.finfo(a.dtype).tiny)) |
                                                         (np.abs(a) > np.sqrt(np.finfo(a.dtype).max)))).any()
                                           for a in floats):
            return op, reason
        if when == "empty-input" and any(a.size == 0 for a in ins):
            return op, reason
        if when == "constant-group" and any(constant_group(a, axes) for a, axes in zip(floats, op_axes(c, op))):
            return op, reason
    return None


def op_axes(case, op):
    """The `axes` attribute of every `op` node of the case (MeanVarianceNormalization's default,
    [0, 2, 3], where absent), in the order op_inputs gives their inputs."""
    out = []
    for n in case.model().graph.node:
        if n.op_type == op and n.input and n.input[0]:
            attr = [list(a.ints) for a in n.attribute if a.name == "axes"]
            out.append(attr[0] if attr else [0, 2, 3])
    return out


def constant_group(a, axes):
    """Whether some group of `a`'s elements over `axes` (the other axes kept) is all one value:
    its variance is exactly 0."""
    if a.size == 0 or any(not -a.ndim <= x < a.ndim for x in axes):
        return False
    axes = tuple(sorted({x % a.ndim for x in axes}))
    with np.errstate(invalid="ignore"):
        return bool((a.max(axis=axes) == a.min(axis=axes)).any())


# ---- main -------------------------------------------------------------------------------------

def registry_ops(kiln):
    try:
        p = subprocess.run([kiln, "ops"], capture_output=True, text=True, timeout=60)
        return [l.split()[0] for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    except Exception:
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="time for random graphs (default 60)")
    ap.add_argument("--seed", type=int, default=None, help="first graph's seed (default: from the clock)")
    ap.add_argument("--batch", type=int, default=24, help="graphs per compile (default 24)")
    ap.add_argument("--edge-rate", type=float, default=0.08, help="share of edge values in inputs (default 0.08)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--emulated-lib", default=os.path.join(ROOT, "build", "tests", "emulated_cuda", "lib"),
                    help="the emulated CUDA device's libraries (the cuda path runs when they exist)")
    ap.add_argument("--no-cuda", action="store_true", help="leave out the cuda path")
    ap.add_argument("--cuda-every", type=int, default=1, metavar="N",
                    help="run the cuda path on every Nth batch only (default 1: every batch); its host "
                         "compile of the generated kernels is most of a batch's time")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--found", default=os.path.join(ROOT, "build", "difftest", "found"),
                    help="where disagreements are saved (default build/difftest/found)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "difftest", "work"))
    ap.add_argument("--corpus", help="run the regression corpus in this folder instead of random graphs")
    ap.add_argument("--replay", help="run one saved case on every path")
    ap.add_argument("--add-to-corpus", help="a saved case that now agrees everywhere, into corpus/NAME")
    ap.add_argument("--name")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    if not os.path.exists(args.kiln):
        ap.error(f"no kiln binary at {args.kiln} (build it: bash scripts/test.sh, or --kiln)")
    kiln = Kiln(args.kiln, None if args.no_cuda else args.emulated_lib,
                os.path.join(ROOT, "build", "emulated-cuda-kernels"))
    work = tempdir(args.work)
    try:
        if args.replay:
            return 1 if replay(kiln, args.replay, work) else 0
        if args.add_to_corpus:
            if not args.name:
                ap.error("--add-to-corpus needs --name")
            return add_to_corpus(kiln, args.add_to_corpus, args.name, work)
        if args.corpus:
            return run_corpus(kiln, args.corpus, work)
        return fuzz(kiln, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fuzz(kiln, args, work):
    seed = args.seed if args.seed is not None else int(time.time()) % 1000000
    deviations = load_deviations()
    start = time.time()
    cuda_note = f" (cuda on every {args.cuda_every}th batch)" if args.cuda_every > 1 and "cuda" in kiln.paths() else ""
    print(f"difftest: seed {seed}, {args.seconds:g} s, batches of {args.batch}; paths: {', '.join(kiln.paths())}"
          f"{cuda_note} and onnxruntime", flush=True)
    stats = {p: {"ran": 0, "refused": 0, "error": 0} for p in kiln.paths()}
    used_ops, graphs, findings, known, batches = set(), 0, [], [], 0
    seen_kinds = set()
    next_seed = seed * 100000
    while time.time() - start < args.seconds:
        cases = []
        while len(cases) < args.batch:
            next_seed += 1
            try:
                cases.append(make_case(next_seed, f"g{next_seed}_", args.edge_rate))
            except Skip:
                pass
        results = {id(c): {} for c in cases}
        batches += 1
        for p in kiln.paths():
            if p == "cuda" and (batches - 1) % max(args.cuda_every, 1):
                continue
            for cid, r in run_cases(kiln, p, cases, work).items():
                results[cid][p] = r
                stats[p]["ran" if r.ok else "refused" if r.refused else "error"] += 1
        for c in cases:
            graphs += 1
            used_ops.update(n.op_type for n in c.graph.nodes)
            ref = run_onnxruntime(c.model(), c.feeds) if c.onnxruntime_defined() else None
            for f in judge(c, results[id(c)], ref):
                key = (f.kind, tuple(c.ops))
                if key in seen_kinds:
                    continue
                seen_kinds.add(key)
                if not args.no_shrink:
                    f = shrink(kiln, f, work, 90, args.edge_rate)
                dev = known_deviation(f, deviations)
                if dev:
                    known.append(dev)
                    if args.verbose:
                        print(f"difftest: known onnxruntime deviation ({dev[0]}): {dev[1]}")
                    continue
                digest = hashlib.sha1(f.case.model().SerializeToString()).hexdigest()[:10]
                folder = os.path.join(args.found, f"{'-'.join(f.case.ops)}-{digest}")
                save_case(f.case, folder, f"{f.kind}: {f.detail}")
                findings.append(f)
                print(f"DISAGREE {f.kind}: {' -> '.join(f.case.ops)} on {f.case.graph.inputs[0]!r}: {f.detail}\n"
                      f"  saved: {folder}\n"
                      f"  replay: build/venv/bin/python tests/differential/difftest.py --replay {folder}", flush=True)
        if args.verbose:
            print(f"difftest: {graphs} graphs, {time.time() - start:.0f} s", flush=True)
    elapsed = time.time() - start
    reg = registry_ops(kiln.kiln)
    print(f"difftest: {graphs} graphs in {elapsed:.0f} s ({graphs / elapsed:.1f} graphs/s), seed {seed}")
    for p, s in stats.items():
        print(f"difftest:   {p:8s} ran {s['ran']}, refused {s['refused']} (UNIMPLEMENTED, or a shape its entry refuses),"
              f" failed {s['error']} (a disagreement only where another path ran)")
    if reg:
        covered = sorted(used_ops & set(reg))
        print(f"difftest: ops used: {len(covered)} of {len(reg)} registry ops ({100 * len(covered) / len(reg):.0f}%)")
    print(f"difftest: {len(findings)} disagreements, {len(known)} known onnxruntime deviations"
          + (f" ({', '.join(sorted({op for op, _ in known}))})" if known else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
