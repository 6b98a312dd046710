#!/usr/bin/env python3
"""Attention alone: Kiln beside onnxruntime on the same op-by-op graph, and onnxruntime's fused
com.microsoft MultiHeadAttention on the same shapes.

    build/venv/bin/python benchmarks/attention.py [--threads 1,2] [--rounds 3] [--seconds 1.0]
                                                  [--out build/attention-bench] [--quick]

For each configuration (heads x sequence x head size 64: 12 x 128, 12 x 512, 6 x 1500, 6 x 128,
each with and without a padding mask) it writes OUT/NAME/model.onnx and test_data_set_0/ as
TorchScript exports BERT's attention: Q, K, V [1, H, S, 64] inputs, MatMul(Q, Transpose(K)), Div
by 8, Add of a [1, 1, 1, S] mask (0 or -10000, its last quarter masked), Softmax, MatMul with V.
Kiln's compiler makes that one Attention op (compiler/passes/attention.h). Then:

  1. benchmarks/compare.py on those folders: outputs checked against onnxruntime first, then Kiln,
     onnxruntime and (when installed) OpenVINO interleaved, at each thread count; its table.
  2. onnxruntime's com.microsoft MultiHeadAttention (its fused CPU kernel, contrib-op spec in
     onnxruntime's docs/ContribOperators.md: query, key, value [1, S, H*64], key_padding_mask
     [1, S] int32), on the same inputs transposed to its layout, timed as compare.py times
     onnxruntime (compare.ort_block, median of the rounds' medians); its outputs are checked
     against the op-by-op graph's first.

Only onnxruntime (and compare.py's OpenVINO, optional) is needed: build/venv has it.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

CONFIGS = [(12, 128), (12, 512), (6, 1500), (6, 128)]
HEAD = 64


def name_of(heads, seq, masked):
    return f"attn-h{heads}-s{seq}{'-mask' if masked else ''}"


def op_by_op(heads, seq, masked):
    dims = [1, heads, seq, HEAD]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("q", "k", "v")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Div", ["s", "sqrt_d"], ["s1"])]
    inits = [numpy_helper.from_array(np.array(np.sqrt(HEAD), np.float32), "sqrt_d")]
    x = "s1"
    if masked:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 1, 1, seq]))
        nodes.append(helper.make_node("Add", ["s1", "m"], ["s2"]))
        x = "s2"
    nodes += [helper.make_node("Softmax", [x], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    graph = helper.make_graph(nodes, "attention", inputs, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def mha(heads, seq, masked):
    hidden = heads * HEAD
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, seq, hidden]) for n in ("q", "k", "v")]
    names = ["q", "k", "v"]
    if masked:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [1, seq]))
        names += ["", "mask"]
    node = helper.make_node("MultiHeadAttention", names, ["y"], domain="com.microsoft", num_heads=heads)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])
    graph = helper.make_graph([node], "mha", inputs, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])


def tensors(heads, seq, masked, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, heads, seq, HEAD)).astype(np.float32) for _ in range(3))
    keep = np.ones(seq, np.int32)
    keep[seq - seq // 4:] = 0
    add = np.where(keep == 1, 0.0, -10000.0).astype(np.float32).reshape(1, 1, 1, seq)
    return q, k, v, keep, add


def write(out, heads, seq, masked):
    folder = os.path.join(out, name_of(heads, seq, masked))
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    onnx.save(op_by_op(heads, seq, masked), os.path.join(folder, "model.onnx"))
    q, k, v, _, add = tensors(heads, seq, masked)
    arrays = [q, k, v] + ([add] if masked else [])
    for i, (n, a) in enumerate(zip(["q", "k", "v", "m"], arrays)):
        with open(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    return folder


def time_mha(heads, seq, masked, threads, rounds, seconds):
    q, k, v, keep, add = tensors(heads, seq, masked)
    to3 = lambda t: np.ascontiguousarray(t.transpose(0, 2, 1, 3).reshape(1, seq, heads * HEAD))
    feeds = {"q": to3(q), "k": to3(k), "v": to3(v)}
    if masked:
        feeds["mask"] = keep.reshape(1, seq)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(mha(heads, seq, masked).SerializeToString(), so, providers=["CPUExecutionProvider"])
    ref_feeds = {"q": q, "k": k, "v": v}
    if masked:
        ref_feeds["m"] = add
    ref = ort.InferenceSession(op_by_op(heads, seq, masked).SerializeToString(), so,
                               providers=["CPUExecutionProvider"]).run(None, ref_feeds)[0]
    got = sess.run(None, feeds)[0].reshape(1, seq, heads, HEAD).transpose(0, 2, 1, 3)
    if not np.allclose(got, ref, atol=1e-4, rtol=1e-3):
        return None, f"outputs differ from the op-by-op graph (max abs {np.abs(got - ref).max():.3g})"
    first = compare.ort_block(sess, feeds, 1, 3)
    iters = max(3, int(seconds * 1000 / max(first["p50"], 1e-3)))
    p50s = sorted(compare.ort_block(sess, feeds, 2, iters)["p50"] for _ in range(rounds))
    return p50s[len(p50s) // 2], None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--out", default="build/attention-bench")
    ap.add_argument("--quick", action="store_true", help="12 x 128 and 6 x 1500 only, one round")
    args = ap.parse_args()
    configs = [(12, 128), (6, 1500)] if args.quick else CONFIGS
    rounds = 1 if args.quick else args.rounds
    folders = [write(args.out, h, s, m) for h, s in configs for m in (False, True)]
    here = os.path.dirname(os.path.abspath(__file__))
    rc = subprocess.call([sys.executable, os.path.join(here, "compare.py"), *folders, "--threads", args.threads,
                          "--rounds", str(rounds), "--seconds", str(args.seconds),
                          "--work", os.path.join(args.out, "work")])
    print("\nonnxruntime's fused com.microsoft MultiHeadAttention on the same inputs ([1, S, H*64]):\n")
    print("| attention | T | MultiHeadAttention p50 ms |")
    print("|---|---:|---:|")
    for h, s in configs:
        for m in (False, True):
            for t in [int(x) for x in args.threads.split(",")]:
                p50, why = time_mha(h, s, m, t, rounds, args.seconds)
                print(f"| {name_of(h, s, m)} | {t} | {why if why else f'{p50:.4g}'} |")
    return rc


if __name__ == "__main__":
    sys.exit(main())
