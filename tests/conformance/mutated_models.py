#!/usr/bin/env python3
"""Hostile variants of ONNX's node test models must never crash the compiler.

For every other case of the node suite (build/onnx-tests/node), the first node is mutated four
ways: its last input dropped, and every INT/INTS attribute set to 2^40, to -1000000, and to 0.
Each variant is compiled (CPU-only artifact; compiling also folds constants by running CPU
kernels) by the kiln Python package (python/kiln: the compiler's library, in process), in a forked
child process that compiles the variants one after another and tells the parent, through a pipe,
which one it starts: a crash ends that child only, and is the variant it last started (a signal,
an exception other than kiln.Error, or more than 120 s on one variant), listed with the variant;
a new child goes on from the next one. Exits 1 if any variant crashed. A variant takes about 2 ms
in process; a fork per variant cost about 60 ms (CI: 125 s for the suite), starting `kiln
compile` for each about 40.

usage: mutated_models.py NODE_DIR
"""
import glob
import os
import signal
import struct
import sys

import onnx

import kiln

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


def compile_from(models, start):
    """Compiles models[start:] in a forked child, which writes each index to a pipe as it starts
    it. Returns (the last index started, or None; the child's exit status: 0 when it compiled or
    reported an error for each, else a crash of that last one, negative for the signal)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        for i in range(start, len(models)):
            os.write(w, struct.pack("<i", i))
            signal.alarm(120)  # a hang is a crash: SIGALRM ends the child
            try:
                kiln.compile(models[i], archs="none", progress=False)
            except kiln.Error:
                pass
            except BaseException:  # anything else escaping the package is a crash too
                os._exit(3)
        os._exit(0)
    os.close(w)
    started = b""
    with os.fdopen(r, "rb") as pipe:
        for chunk in iter(lambda: pipe.read(4096), b""):
            started += chunk
    _, status = os.waitpid(pid, 0)
    last = struct.unpack_from("<i", started, len(started) - 4)[0] if started else None
    return last, (-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    names, models = [], []
    for case in sorted(glob.glob(os.path.join(root, "test_*")))[::2]:
        try:
            model = onnx.load(os.path.join(case, "model.onnx"))
        except Exception:
            continue
        if not model.graph.node:
            continue
        for kind, m in variants(model):
            names.append(f"{os.path.basename(case)} ({kind})")
            models.append(m)
    crashes, start = [], 0
    while start < len(models):
        last, status = compile_from(models, start)
        if status == 0:
            break
        if last is None:  # the child died before it started one: nothing to name
            crashes.append(f"the child compiling from {names[start]}: status {status}")
            break
        crashes.append(f"{names[last]}: " + (f"signal {-status}" if status < 0 else f"exit {status}"))
        start = last + 1
    print(f"{len(models)} mutated models compiled; {len(crashes)} crashed")
    for c in crashes:
        print("  CRASH " + c)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
