#!/usr/bin/env python3
"""Figures for each real model: compile time, artifact size, CPU latency, arena vs lower bound.

    build/venv/bin/python benchmarks/real_models.py DIR [DIR ...] [--kiln build/kiln] [--runs 20]

Each DIR holds model.onnx and test_data_set_*/ (ONNX test layout). For the first test set:
  - compile time and artifact size of the default (symbolic where the model is) artifact;
  - median host latency of `kiln run --repeat RUNS` on the CPU backend;
  - arena bytes of an artifact compiled with every input shape fixed to the test set's
    (`--shape`), against the lower bound the planner reports: the largest total of
    simultaneously live intermediate bytes (64-byte rounded).
Prints a markdown table. Accuracy is checked by tests/e2e/run_model_dir.py, not here.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import time

import onnx
from onnx import numpy_helper


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def input_shapes(model_path, set_dir):
    graph = onnx.load(model_path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    shapes = []
    for n, name in enumerate(names):
        t = onnx.TensorProto()
        with open(os.path.join(set_dir, f"input_{n}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        dims = "x".join(str(d) for d in numpy_helper.to_array(t).shape)
        if dims:  # scalars have nothing to fix
            shapes += ["--shape", f"{name}:{dims}"]
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--work", default="build/bench")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = []
    for d in sorted(args.dirs):
        d = d.rstrip("/")
        name = os.path.basename(d)
        model = os.path.join(d, "model.onnx")
        sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
        if not os.path.isfile(model) or not sets:
            continue
        art = os.path.join(args.work, name + ".kiln")
        t0 = time.perf_counter()
        run([args.kiln, "compile", model, "-o", art, "-q"])
        compile_s = time.perf_counter() - t0
        out = run([args.kiln, "run", art, "--inputs", sets[0], "--repeat", str(args.runs)]).stdout
        median = float(re.search(r"median ([0-9.]+) ms", out).group(1))
        static = os.path.join(args.work, name + ".static.kiln")
        out = run([args.kiln, "compile", model, "-o", static, "-q"] + input_shapes(model, sets[0])).stdout
        m = re.search(r"arena (\d+) bytes \(lower bound (\d+) bytes\)", out)
        arena, bound = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        rows.append((name, compile_s, os.path.getsize(art), median, arena, bound))
    print(f"| model | compile (s) | artifact (bytes) | CPU latency, median of {args.runs} (ms) | arena (bytes) | lower bound (bytes) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, cs, size, med, arena, bound in rows:
        print(f"| {name} | {cs:.2f} | {size} | {med:.3f} | {arena} | {bound} |")


if __name__ == "__main__":
    sys.exit(main())
