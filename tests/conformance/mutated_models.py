#!/usr/bin/env python3
"""Hostile variants of ONNX's node test models must never crash `kiln compile`.

For every other case of the node suite (build/onnx-tests/node), the first node is mutated four
ways: its last input dropped, and every INT/INTS attribute set to 2^40, to -1000000, and to 0.
Each variant is compiled (CPU-only artifact; compiling also folds constants by running CPU
kernels). Exit codes 0 (compiled), 1 (a reported error) and 2 (usage) are fine; a signal or any
other code is a crash, listed with the variant. Exits 1 if any variant crashed.

usage: mutated_models.py KILN NODE_DIR WORK_DIR
"""
import glob
import os
import subprocess
import sys

import onnx

VALUES = {"big_ints": 1 << 40, "neg_ints": -1000000, "zero_ints": 0}


def variants(model):
    node = model.graph.node[0]
    if len(node.input):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.node[0].input[-1]
        yield "drop_input", m
    for kind, value in VALUES.items():
        m = onnx.ModelProto()
        m.CopyFrom(model)
        changed = False
        for a in m.graph.node[0].attribute:
            if a.type == onnx.AttributeProto.INT:
                a.i = value
                changed = True
            elif a.type == onnx.AttributeProto.INTS and len(a.ints):
                a.ints[:] = [value] * len(a.ints)
                changed = True
        if changed:
            yield kind, m


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    kiln, root, work = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    path, artifact = os.path.join(work, "mutated.onnx"), os.path.join(work, "mutated.kiln")
    crashes, count = [], 0
    for case in sorted(glob.glob(os.path.join(root, "test_*")))[::2]:
        try:
            model = onnx.load(os.path.join(case, "model.onnx"))
        except Exception:
            continue
        if not model.graph.node:
            continue
        for kind, m in variants(model):
            with open(path, "wb") as f:
                f.write(m.SerializeToString())
            r = subprocess.run([kiln, "compile", path, "-o", artifact, "--arch", "none", "-q"],
                               capture_output=True, timeout=120)
            count += 1
            if r.returncode < 0 or r.returncode > 2:
                crashes.append(f"{os.path.basename(case)} ({kind}): exit {r.returncode} "
                               f"{r.stderr.decode(errors='replace')[-200:]}")
    print(f"{count} mutated models compiled; {len(crashes)} crashed")
    for c in crashes:
        print("  CRASH " + c)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
