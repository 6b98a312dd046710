"""samples/embed's check (check.sh): embed's printed outputs against onnxruntime, and its errors.

1. Silero VAD's test_data_set_0 (inputs and onnxruntime's outputs, as .pb files) through raw
   input files: every output's name, dtype, shape and first values must match.
2. The same shapes with `input` and `state` zeros (no file) and `sr` from its file, against
   onnxruntime run here on the same values.
3. Errors: a symbolic dim without a shape, a file of the wrong size and an unknown input name
   are exit 2; a truncated artifact is exit 1 with the runtime's DATA_LOSS status. Each
   message must name what was expected and what was found.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper

LINE = re.compile(r"^'(?P<name>.*)' (?P<dtype>\w+) \[(?P<dims>[0-9, ]*)\] =(?P<values>[^(]*)(\(first 8 of (?P<n>\d+)\))?$")


def fail(msg):
    print(f"[embed check] FAIL: {msg}")
    sys.exit(1)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def compare(proc, expected, what):
    """expected: [(name, array)] in the model's output order."""
    if proc.returncode != 0:
        fail(f"{what}: embed exited {proc.returncode}: {proc.stderr.strip()}")
    lines = proc.stdout.splitlines()
    if len(lines) != len(expected):
        fail(f"{what}: {len(lines)} output lines, expected {len(expected)}:\n{proc.stdout}")
    for line, (name, ref) in zip(lines, expected):
        m = LINE.match(line)
        if not m:
            fail(f"{what}: unparsable line {line!r}")
        dims = [int(d) for d in m["dims"].split(",")] if m["dims"].strip() else []
        values = np.array([float(v) for v in m["values"].split()])
        shown = min(ref.size, 8)
        if m["name"] != name or m["dtype"] != str(ref.dtype) or dims != list(ref.shape):
            fail(f"{what}: {line!r}, expected '{name}' {ref.dtype} {list(ref.shape)}")
        if len(values) != shown or (ref.size > 8) != (m["n"] is not None) or (m["n"] and int(m["n"]) != ref.size):
            fail(f"{what}: {line!r} shows {len(values)} values, expected the first {shown} of {ref.size}")
        want = ref.reshape(-1)[:shown].astype(np.float64)
        if not np.allclose(values, want, rtol=1e-4, atol=1e-5):
            fail(f"{what}: '{name}' values {values.tolist()}, onnxruntime {want.tolist()}")
    print(f"[embed check] ok: {what}: {len(lines)} outputs match onnxruntime")


def expect_error(cmd, code, patterns, what):
    proc = run(cmd)
    if proc.returncode != code:
        fail(f"{what}: exit {proc.returncode}, expected {code}; stderr: {proc.stderr.strip()}")
    for p in patterns:
        if p not in proc.stderr:
            fail(f"{what}: stderr lacks {p!r}: {proc.stderr.strip()}")
    print(f"[embed check] ok: {what}: exit {code}, {proc.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--embed", required=True)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model_path = os.path.join(args.model_dir, "model.onnx")
    if not os.path.isfile(model_path):
        fail(f"no {model_path} (scripts/test.sh makes build/testdata)")
    artifact = os.path.join(args.work, "silero.kiln")
    proc = run([args.kiln, "compile", model_path, "-o", artifact, "--arch", "none", "-q"])
    if proc.returncode != 0:
        fail(f"kiln compile exited {proc.returncode}: {proc.stderr.strip()}")

    model = onnx.load(model_path)
    init = {i.name for i in model.graph.initializer}
    in_names = [i.name for i in model.graph.input if i.name not in init]
    out_names = [o.name for o in model.graph.output]
    data = os.path.join(args.model_dir, "test_data_set_0")

    def load(kind, i):
        t = onnx.TensorProto()
        with open(os.path.join(data, f"{kind}_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    inputs = {n: load("input", i) for i, n in enumerate(in_names)}
    files = {}
    for n, a in inputs.items():
        files[n] = os.path.join(args.work, f"{n}.raw")
        a.tofile(files[n])
    shape = {n: "x".join(str(d) for d in a.shape) for n, a in inputs.items()}

    # 1. Files, against the test set's outputs (onnxruntime's).
    cmd = [args.embed, artifact] + [f"{n}={shape[n]}@{files[n]}" for n in in_names]
    compare(run(cmd), [(n, load("output", i)) for i, n in enumerate(out_names)], "test_data_set_0 from raw files")

    # 2. Zeros for input and state, sr from its file (its declared shape: a scalar).
    zeros = {n: (np.zeros_like(a) if n != "sr" else a) for n, a in inputs.items()}
    ref = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"]).run(None, zeros)
    cmd = [args.embed, artifact, f"input={shape['input']}", f"state={shape['state']}", f"sr@{files['sr']}"]
    compare(run(cmd), list(zip(out_names, ref)), "zeros for input and state")

    # 3. Errors.
    expect_error([args.embed, artifact], 2, ["input 'input' dim 0 is 'batch', not a constant", "give its shape"],
                 "a symbolic dim without a shape")
    expect_error([args.embed, artifact, f"input=1x576@{files['state']}", "state=2x1x128"], 2,
                 [f"{files['state']} has 1024 bytes, expected 2304 (float32 [1, 576])"], "a file of the wrong size")
    expect_error([args.embed, artifact, "nope=1"], 2, ["the model has no input 'nope' (its inputs: 'input', 'state', 'sr')"],
                 "an unknown input")
    truncated = os.path.join(args.work, "truncated.kiln")
    with open(artifact, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:200])
    expect_error([args.embed, truncated], 1, [f"loading {truncated}: DATA_LOSS"], "a truncated artifact")


if __name__ == "__main__":
    main()
