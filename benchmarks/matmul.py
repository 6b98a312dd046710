#!/usr/bin/env python3
"""MatMul alone, per shape class: Kiln (on oneDNN's primitives, the default, and on its own kernels,
--no-onednn) beside onnxruntime (MLAS) and OpenVINO, on one-MatMul models.

    build/venv/bin/python benchmarks/matmul.py [--threads 1,2] [--rounds 3] [--seconds 0.5]
                                               [--out build/matmul-bench] [--only CLASS] [--quick]

Shape classes (float32, batch 1):
  linear     [1, S, H] x [H, N], B a constant (a model weight): S 1 and 128 with H 768, N 3072
             (BERT-base's FFN), S 1500 with H 384, N 1536 (Whisper-tiny's fc1);
  attention  batched products of attention with both operands inputs: [1, H, S, D] x [1, H, D, S]
             (scores) and [1, H, S, S] x [1, H, S, D] (P V), H 12, D 64, S 128 and 512;
  broadcast  [B, S, K] x [K, N] with B 8, S 128, K N 768 and B an input, not a constant.

For each model it writes OUT/NAME/model.onnx and test_data_set_0/, compiles a CPU-only artifact
(kiln compile --arch none), checks Kiln's outputs in both modes against onnxruntime's and
OpenVINO's (when `openvino` imports) by compare.py's rule, names the library that ran the MatMul
in each Kiln mode (kiln bench --profile --json), and then, per thread count, holds /tmp/bench.lock
(flock, the lock the machine's other benchmarks take) for R alternating rounds of one block each
of Kiln, Kiln --no-onednn, onnxruntime and OpenVINO, as compare.py times them (its functions). A
figure is the median over the rounds of each block's median latency. The table goes to stdout
and OUT/matmul.md, every figure to OUT/matmul.json.
"""
import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

LOCK = "/tmp/bench.lock"


def models():
    """(class, name, inputs {name: array}, constant B or None)"""
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)
    out = []
    for s, h, n in [(1, 768, 3072), (128, 768, 3072), (1500, 384, 1536)]:
        out.append(("linear", f"linear-s{s}-{h}x{n}", {"a": r(1, s, h)}, (r(h, n) / np.sqrt(h)).astype(np.float32)))
    for s in (128, 512):
        out.append(("attention", f"scores-h12-s{s}", {"a": r(1, 12, s, 64), "b": r(1, 12, 64, s)}, None))
        p = np.abs(r(1, 12, s, s))
        p = (p / p.sum(-1, keepdims=True)).astype(np.float32)
        out.append(("attention", f"pv-h12-s{s}", {"a": p, "b": r(1, 12, s, 64)}, None))
    out.append(("broadcast", "broadcast-b8-s128-768x768", {"a": r(8, 128, 768), "b": r(768, 768)}, None))
    return out


def write(folder, inputs, const_b):
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    a = inputs["a"]
    b = const_b if const_b is not None else inputs["b"]
    y_shape = list(np.matmul(np.zeros(a.shape, np.float32)[..., :1, :], np.zeros(b.shape, np.float32)).shape)
    y_shape[-2] = a.shape[-2]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape)) for n, x in inputs.items()]
    inits = [numpy_helper.from_array(const_b, "b")] if const_b is not None else []
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "matmul", vi,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), os.path.join(folder, "model.onnx"))
    for i, (n, x) in enumerate(inputs.items()):
        with open(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, n).SerializeToString())


def library(kiln, art, set_dir, flags, work):
    """What ran the MatMul: oneDNN's matmul primitive, or Kiln's kernel with the GEMM library that
    kiln bench --profile names (oneDNN's dnnl_sgemm or OpenBLAS); kiln run names a fallback."""
    path = os.path.join(work, "profile.json")
    subprocess.run([kiln, "bench", art, "--inputs", set_dir, "--device", "cpu", "--threads", "1", "--warmup", "1",
                    "--iterations", "2", "--profile", "--json", path, "-q"] + flags, check=True,
                   stdout=subprocess.DEVNULL)
    with open(path) as f:
        insts = json.load(f)["profile"]["instructions"]
    lib = ", ".join(sorted({i["library"] for i in insts if i["op"] == "MatMul"})) or "?"
    run = compare.kiln_cmd([kiln, "run", art, "--inputs", set_dir, "--device", "cpu"] + flags, compare.RUN_TIMEOUT_S)
    kernel = "--no-onednn" in flags or any(line.startswith("fallback:") and "MatMul" in line
                                           for line in run.splitlines())
    if not kernel:
        return "primitive"
    return "kernel, " + ("dnnl_sgemm" if lib == "oneDNN" else lib)


def fmt(x):
    return "-" if x is None else f"{x:.4g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=compare.parse_threads, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5, help="about how long one block takes")
    ap.add_argument("--out", default=os.path.join(compare.ROOT, "build", "matmul-bench"))
    ap.add_argument("--kiln", default=os.path.join(compare.ROOT, "build", "kiln"))
    ap.add_argument("--only", help="one shape class: linear, attention or broadcast")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 round of 0.05 s blocks")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 0.05
    os.makedirs(args.out, exist_ok=True)
    ov = compare.ov
    rows, records = [], []
    for cls, name, inputs, const_b in models():
        if args.only and cls != args.only:
            continue
        folder = os.path.join(args.out, name)
        write(folder, inputs, const_b)
        model, set_dir = os.path.join(folder, "model.onnx"), os.path.join(folder, "test_data_set_0")
        art = os.path.join(args.out, name + ".kiln")
        compare.kiln_cmd([args.kiln, "compile", model, "-o", art, "--arch", "none", "-q"], compare.COMPILE_TIMEOUT_S)
        feeds = compare.load_inputs(model, set_dir)
        rec = {"class": cls, "name": name, "shapes": compare.shape_text(feeds) + (
            f", B constant {'x'.join(map(str, const_b.shape))}" if const_b is not None else ""), "runs": []}
        modes = {"kiln": [], "kiln --no-onednn": ["--no-onednn"]}
        sess1 = compare.ort_session(model, args.threads[0])
        for mode, flags in modes.items():
            compare.KILN_FLAGS[:] = flags
            agree = compare.check_outputs(args.kiln, art, set_dir, os.path.join(args.out, name + ".out"), sess1, feeds)
            rec[f"{mode} agree"] = agree["ok"]
            rec[f"{mode} library"] = library(args.kiln, art, set_dir, flags, args.out)
            compare.progress(f"{name}: {mode}: outputs {'agree' if agree['ok'] else 'DISAGREE'} "
                             f"(max abs {agree['max_abs']:.3g}), MatMul on {rec[f'{mode} library']}")
        for t in args.threads:
            sess = compare.ort_session(model, t)
            req = None
            if ov is not None:
                req, why = compare.ov_model(model, t)
                if req is not None:
                    ok, _ = compare.ov_agrees(req, sess, feeds)
                    rec["openvino agree"] = ok
                    req = req if ok else None
                else:
                    rec["openvino agree"] = f"cannot compile: {why}"
            bench_json = os.path.join(args.out, f"{name}.t{t}.json")
            with open(LOCK, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                compare.KILN_FLAGS[:] = []
                probe = max(compare.kiln_bench(args.kiln, art, set_dir, t, 1, 3, bench_json)["latency_ms"]["p50"],
                            compare.ort_block(sess, feeds, 2, 3)["p50"], 1e-3)
                iters = max(compare.MIN_ITERS, min(compare.MAX_ITERS, round(args.seconds * 1e3 / probe)))
                warm = max(2, min(50, iters // 10))
                got = {m: [] for m in list(modes) + ["onnxruntime", "openvino"]}
                fastest = {m: [] for m in got}
                for _ in range(args.rounds):
                    blocks = {}
                    for mode, flags in modes.items():
                        compare.KILN_FLAGS[:] = flags
                        blocks[mode] = compare.kiln_bench(args.kiln, art, set_dir, t, warm, iters,
                                                          bench_json)["latency_ms"]
                    blocks["onnxruntime"] = compare.ort_block(sess, feeds, warm, iters)
                    if req is not None:
                        blocks["openvino"] = compare.ov_block(req, feeds, warm, iters)
                    for m, b in blocks.items():
                        got[m].append(b["p50"])
                        fastest[m].append(b["min"])
                load = os.getloadavg()[0]
            compare.KILN_FLAGS[:] = []
            run = {"threads": t, "iterations": iters, "load_1min": load, "rounds": got, "fastest_calls": fastest,
                   **{m: statistics.median(v) if v else None for m, v in got.items()},
                   **{m + " fastest": min(v) if v else None for m, v in fastest.items()}}
            rec["runs"].append(run)
            compare.progress(f"{name} T={t}: " + ", ".join(f"{m} {fmt(run[m])}" for m in got) + f" (load {load:.1f})")
        records.append(rec)
        for run in rec["runs"]:
            k, kn, o, v = run["kiln"], run["kiln --no-onednn"], run["onnxruntime"], run["openvino"]
            best = min(k, kn)
            rows.append(f"| {cls} | {name} | {rec['shapes']} | {run['threads']} | {fmt(k)} ({rec['kiln library']}) "
                        f"| {fmt(kn)} ({rec['kiln --no-onednn library']}) | {fmt(o)} | {fmt(v)} "
                        f"| {'default' if k <= kn else '--no-onednn'} | {best / o:.2f} "
                        f"| {'-' if v is None else f'{best / v:.2f}'} |")
    info = compare.machine_info(args.kiln, os.getloadavg()[0])
    head = [f"Machine: {info['cpu']}, {info['cores']} CPUs (this VM's CPU figures); {info['date']}; onnxruntime "
            f"{info['onnxruntime']}; OpenVINO {(info['openvino'] or 'not installed').split('-')[0]}; Kiln "
            f"{info['kiln_commit']} ({os.path.abspath(args.kiln)}). p50 ms, median of {args.rounds} alternating "
            "rounds; ratios: Kiln's faster mode over onnxruntime / OpenVINO (> 1: Kiln slower).", "",
            "| class | model | inputs | T | Kiln ms (MatMul on) | Kiln --no-onednn ms (on) | onnxruntime ms "
            "| OpenVINO ms | Kiln's faster | Kiln/ORT | Kiln/OpenVINO |",
            "|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    fast = ["", "The fastest single call of all rounds, ms (another process on the machine moves the medians, "
            "at 2 threads above all, far more than these):", "",
            "| model | T | Kiln | Kiln --no-onednn | onnxruntime | OpenVINO | load |", "|---|---:|---:|---:|---:|---:|---:|"]
    for rec in records:
        for run in rec["runs"]:
            fast.append(f"| {rec['name']} | {run['threads']} | {fmt(run['kiln fastest'])} "
                        f"| {fmt(run['kiln --no-onednn fastest'])} | {fmt(run['onnxruntime fastest'])} "
                        f"| {fmt(run['openvino fastest'])} | {run['load_1min']:.1f} |")
    text = "\n".join(head + rows + fast) + "\n"
    with open(os.path.join(args.out, "matmul.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "matmul.json"), "w") as f:
        json.dump({"machine": info, "models": records}, f, indent=1)
    print(text, end="")
    return 0 if all(r.get("kiln agree") and r.get("kiln --no-onednn agree") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
