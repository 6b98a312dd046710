#!/usr/bin/env python3
"""Checks scripts/compare_outputs.py against onnx's own reader and np.allclose.

Its protobuf decoder must give, for every dtype Kiln writes and in both TensorProto layouts
(raw_data, and the typed fields older tools write), the values onnx.numpy_helper gives; its
verdict must be np.allclose's; and its exit status must say ok (0), differs (1) or unreadable
(2). Needs numpy and onnx (build/venv); the decoder is also run without numpy.
usage: compare_outputs_check.py   (exit 0 when every check passes)
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "compare_outputs.py")
spec = importlib.util.spec_from_file_location("compare_outputs", SCRIPT)
co = importlib.util.module_from_spec(spec)
spec.loader.exec_module(co)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


rng = np.random.default_rng(7)
ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
             np.int64: TensorProto.INT64, np.int32: TensorProto.INT32, np.int16: TensorProto.INT16,
             np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8, np.uint16: TensorProto.UINT16,
             np.uint32: TensorProto.UINT32, np.uint64: TensorProto.UINT64, np.bool_: TensorProto.BOOL}
arrays = [
    rng.standard_normal((3, 4, 5)).astype(np.float32),
    rng.standard_normal((2, 2)).astype(np.float64),
    rng.standard_normal((6,)).astype(np.float16),
    rng.integers(-2**40, 2**40, (7,)).astype(np.int64),
    rng.integers(-2**20, 2**20, (3,)).astype(np.int32),
    rng.integers(-300, 300, (3,)).astype(np.int16),
    rng.integers(-128, 128, (2, 3)).astype(np.int8),
    rng.integers(0, 256, (4,)).astype(np.uint8),
    rng.integers(0, 65536, (5,)).astype(np.uint16),
    rng.integers(0, 2**32, (3,)).astype(np.uint32),
    rng.integers(0, 2**62, (3,)).astype(np.uint64),
    np.array([True, False, True]),
    np.array(3.5, np.float32),
    np.zeros((0, 3), np.float32),
]

with tempfile.TemporaryDirectory() as tmp:
    for i, a in enumerate(arrays):
        raw = numpy_helper.from_array(a, f"t{i}")
        typed = helper.make_tensor(f"t{i}", ONNX_TYPE[a.dtype.type], a.shape, a.flatten().tolist())
        for layout, proto in (("raw_data", raw), ("typed fields", typed)):
            path = os.path.join(tmp, f"t{i}.pb")
            with open(path, "wb") as f:
                f.write(proto.SerializeToString())
            want = numpy_helper.to_array(proto)
            name, dtype, dims, values = co.read_tensor(path)
            same = (name == f"t{i}" and dims == list(a.shape) and dtype == str(a.dtype)
                    and np.array_equal(np.asarray(values), want.astype(np.float64).ravel()))
            if a.dtype == np.uint64:  # float64 holds 53 bits: compare as float64, as the script does
                same = same and np.array_equal(np.asarray(values), a.astype(np.float64).ravel())
            check(same, f"decode {a.dtype}{list(a.shape)} from {layout}")
            saved, co.np = co.np, None
            try:
                _, _, _, plain = co.read_tensor(path)
            finally:
                co.np = saved
            check(list(plain) == list(np.asarray(values)), f"decode {a.dtype} from {layout} without numpy")
    bf = TensorProto(name="bf", data_type=TensorProto.BFLOAT16, dims=[2], raw_data=b"\x80\x3f\x00\xc0")
    path = os.path.join(tmp, "bf.pb")
    with open(path, "wb") as f:
        f.write(bf.SerializeToString())
    check(list(co.read_tensor(path)[3]) == [1.0, -2.0], "decode bfloat16 (hand values 1, -2)")

    # Verdicts against np.allclose on perturbed outputs, through the command line.
    def run(got, want, extra=()):
        gd, wd = os.path.join(tmp, "got"), os.path.join(tmp, "want")
        for d, arrs in ((gd, got), (wd, want)):
            os.makedirs(d, exist_ok=True)
            for f in os.listdir(d):
                os.remove(os.path.join(d, f))
            for k, x in enumerate(arrs):
                with open(os.path.join(d, f"output_{k}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(x, f"o{k}").SerializeToString())
        p = subprocess.run([sys.executable, SCRIPT, gd, wd, *extra], stdout=subprocess.PIPE, text=True)
        return p.returncode, p.stdout

    w = rng.standard_normal((1000,)).astype(np.float32)
    for scale in (1e-6, 5e-4, 1e-2):
        g = (w + scale * rng.standard_normal(w.shape)).astype(np.float32)
        expect = bool(np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-3, atol=1e-4))
        rc, out = run([g], [w])
        check(rc == (0 if expect else 1), f"perturbation {scale:g}: exit {rc}, np.allclose says {expect}")
        want_max = float(np.max(np.abs(g.astype(np.float64) - w)))
        got_max = float(out.strip().splitlines()[-1].split("max_abs ")[1].split()[0])
        check(abs(got_max - want_max) <= 1e-3 * want_max, f"max_abs {got_max:g} is {want_max:g}")
    g = w.copy()
    g[3] = np.nan
    rc, _ = run([g], [w])
    check(rc == 1, "a NaN on one side fails")
    rc, _ = run([g], [g])
    check(rc == 0, "NaN in the same place on both sides passes")
    rc, out = run([w.reshape(10, 100)], [w])
    check(rc == 1 and "FAIL got float32[10, 100]" in out, "a shape mismatch fails and names the shape")
    rc, _ = run([w, w], [w, w + 1])
    check(rc == 1, "the second output differing fails")
    rc, _ = run([w + 0.5], [w], ("--atol", "1"))
    check(rc == 0, "--atol widens the tolerance")
    rc, out = run([], [w])
    check(rc == 2 and "missing" in out, "a missing output is exit 2")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
