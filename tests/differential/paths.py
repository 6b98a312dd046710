"""The paths a model's ops can take through Kiln, each run through the `kiln` command as a user
would, and onnxruntime as the reference.

  unfused  kiln compile --arch none --no-fuse; kiln run --device cpu    (the CPU kernels)
  fused    kiln compile --arch none; kiln run --device cpu              (fused regions as native code
           for this CPU)
  interpreted  the same artifact; kiln run --device cpu --no-native-code (the portable programs,
           interpreted)
  folded   the inputs made initializers; kiln compile --arch none        (constant folding: the
           compiler runs the CPU kernels at compile time; the run only copies the results out)
  cuda     kiln compile --arch sm_90; kiln run --device cuda on the emulated CUDA device
           (generated CUDA kernels compiled for the host through the host shim, cuBLASLt and
           cuDNN stand-ins); only where the emulated device's libraries were built
"""
import os
import shutil
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from graphs import folded

PATHS = ["unfused", "fused", "interpreted", "folded", "cuda"]


class PathResult:
    """A path's outputs (name -> array), or why it has none: `refused` (the compiler says
    UNIMPLEMENTED: valid ONNX Kiln does not support, not a disagreement) or `error` (anything
    else: a failed compile or run)."""

    def __init__(self, outputs=None, refused=None, error=None):
        self.outputs, self.refused, self.error = outputs, refused, error

    @property
    def ok(self):
        return self.outputs is not None


def write_tensors(folder, prefix, arrays):
    os.makedirs(folder, exist_ok=True)
    for i, a in enumerate(arrays):
        with open(os.path.join(folder, f"{prefix}_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(a)).SerializeToString())


def read_tensors(folder, prefix, count):
    out = []
    for i in range(count):
        t = onnx.TensorProto()
        with open(os.path.join(folder, f"{prefix}_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
    return out


class Kiln:
    def __init__(self, kiln, emulated_lib=None, emulated_cache=None, timeout=300):
        self.kiln = kiln
        self.emulated_lib = emulated_lib if emulated_lib and os.path.exists(os.path.join(emulated_lib, "libcuda.so.1")) else None
        self.emulated_cache = emulated_cache
        self.timeout = timeout

    def paths(self):
        return [p for p in PATHS if p != "cuda" or self.emulated_lib]

    def _call(self, args, env=None):
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=self.timeout, env=env)
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {self.timeout} s: {' '.join(args)}"
        return p.returncode, (p.stderr.strip() or p.stdout.strip())

    def run_path(self, path, model, feeds, work):
        """Compiles `model` (an onnx.ModelProto whose inputs are `feeds`) for `path` and runs it."""
        os.makedirs(work, exist_ok=True)
        m = folded(model, feeds) if path == "folded" else model
        src = os.path.join(work, f"{path}.onnx")
        onnx.save(m, src)
        art = os.path.join(work, f"{path}.kiln")
        args = [self.kiln, "compile", "-q", "-o", art, src]
        args += ["--arch", "sm_90"] if path == "cuda" else ["--arch", "none"]
        if path == "unfused":
            args.append("--no-fuse")
        rc, err = self._call(args)
        if rc != 0:
            if refusal(err):
                return PathResult(refused=last_line(err))
            return PathResult(error=f"kiln compile failed (exit {rc}): {last_line(err)}")
        ins = os.path.join(work, f"{path}_in")
        outs = os.path.join(work, f"{path}_out")
        shutil.rmtree(ins, ignore_errors=True)
        shutil.rmtree(outs, ignore_errors=True)
        write_tensors(ins, "input", [feeds[vi.name] for vi in m.graph.input])
        os.makedirs(outs, exist_ok=True)
        env = None
        run = [self.kiln, "run", art, "--inputs", ins, "--outputs", outs, "--threads", "1"]
        if path == "cuda":
            env = dict(os.environ, LD_LIBRARY_PATH=self.emulated_lib)
            if self.emulated_cache:
                env["KILN_EMULATED_CUDA_CACHE"] = self.emulated_cache
            run += ["--device", "cuda"]
        else:
            run += ["--device", "cpu"]
        if path == "interpreted":
            run.append("--no-native-code")
        rc, err = self._call(run, env)
        if rc != 0:
            if refusal(err):
                return PathResult(refused=last_line(err))
            return PathResult(error=f"kiln run failed (exit {rc}): {last_line(err)}")
        names = [vi.name for vi in m.graph.output]
        return PathResult(outputs=dict(zip(names, read_tensors(outs, "output", len(names)))))


def refusal(message):
    """Valid ONNX that Kiln does not run, as opposed to a wrong answer: UNIMPLEMENTED, and an
    entry compiled for symbolic dims whose prologue refuses the shape (a symbol is a dim of at
    least 1, and a dim computed from symbols must be too; a 0 there is issue 22's work)."""
    return ("UNIMPLEMENTED" in message or "Unimplemented" in message or "can run this entry" in message
            or ("entry 0 (default)" in message and ("does not hold for" in message or "expected >= 1" in message)))


def last_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else text


_POOL = None


def run_onnxruntime(model, feeds):
    """onnxruntime's outputs (name -> array) with its graph optimisations off, or an error. It
    runs in a worker process: a crash of onnxruntime (some graphs of edge values do crash it)
    is that graph's error, not the tester's."""
    global _POOL
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    if _POOL is None:
        _POOL = ProcessPoolExecutor(max_workers=1)
    try:
        return _POOL.submit(_onnxruntime_in_worker, model.SerializeToString(), feeds).result(timeout=120)
    except (BrokenProcessPool, TimeoutError) as e:
        _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = None
        return PathResult(error=f"onnxruntime crashed or hung ({type(e).__name__})")


def _onnxruntime_in_worker(model_bytes, feeds):
    import onnxruntime as ort
    model = onnx.ModelProto()
    model.ParseFromString(model_bytes)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    try:
        s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in s.get_outputs()]
        got = s.run(names, {vi.name: feeds[vi.name] for vi in model.graph.input})
        return PathResult(outputs=dict(zip(names, got)))
    except Exception as e:
        return PathResult(error=f"onnxruntime: {str(e).splitlines()[0][:300]}")


def tempdir(root):
    os.makedirs(root, exist_ok=True)
    return tempfile.mkdtemp(dir=root)
