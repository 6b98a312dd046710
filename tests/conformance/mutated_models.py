#!/usr/bin/env python3
"""Hostile variants of ONNX's node test models must never crash the compiler.

For every other case of the node suite (build/onnx-tests/node), the first node is mutated four
ways: its last input dropped, and every INT/INTS attribute set to 2^40, to -1000000, and to 0.
Each variant is compiled (CPU-only artifact; compiling also folds constants by running CPU
kernels) by the kiln Python package (python/kiln: the compiler's library, in process), in a child
process forked for it, so that a crash ends that child only: it compiled (exit 0) or reported an
error (kiln.Error, exit 1); a signal, any other exit, or more than 120 s is a crash, listed with
the variant. Exits 1 if any variant crashed. Forking a process that has the compiler loaded costs
a few milliseconds; starting `kiln compile` for each of the ~2000 variants cost about 40.

usage: mutated_models.py NODE_DIR
"""
import glob
import os
import signal
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


def compiles(model):
    """The exit status of compiling `model` in a forked child: 0 compiled, 1 a reported error,
    else a crash (a negative value: the signal that ended it)."""
    pid = os.fork()
    if pid == 0:
        signal.alarm(120)  # a hang is a crash: SIGALRM ends the child
        try:
            kiln.compile(model, archs="none", progress=False)
            code = 0
        except kiln.Error:
            code = 1
        except BaseException:  # anything else escaping the package is a crash too
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    crashes, count = [], 0
    for case in sorted(glob.glob(os.path.join(root, "test_*")))[::2]:
        try:
            model = onnx.load(os.path.join(case, "model.onnx"))
        except Exception:
            continue
        if not model.graph.node:
            continue
        for kind, m in variants(model):
            status = compiles(m)
            count += 1
            if status not in (0, 1):
                crashes.append(f"{os.path.basename(case)} ({kind}): " +
                               (f"signal {-status}" if status < 0 else f"exit {status}"))
    print(f"{count} mutated models compiled; {len(crashes)} crashed")
    for c in crashes:
        print("  CRASH " + c)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
