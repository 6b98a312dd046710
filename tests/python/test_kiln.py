"""The Python package (python/kiln, python/README.md) against onnxruntime and hand-computed values.

    build/venv/bin/python -m pytest tests/python          (scripts/python.sh runs it, and mypy)

Needs the package installed into build/venv (scripts/setup.sh: pip install .) and the test data
of scripts/test.sh (build/testdata).
"""
import gc
import glob
import hashlib
import os
import re
import sys
import threading
import time

import numpy as np
import onnx
import onnx.numpy_helper as nh
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.environ.get("KILN_TESTDATA", os.path.join(ROOT, "build", "testdata"))
REAL_MODELS = sorted(d for d in os.listdir(TESTDATA) if os.path.isfile(os.path.join(TESTDATA, d, "model.onnx"))) \
    if os.path.isdir(TESTDATA) else []


def first_test_set(model_dir):
    """The first test set's inputs by name, in the model's input order."""
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inputs = {}
    for f in sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb"))):
        t = onnx.load_tensor(f)
        inputs[t.name] = nh.to_array(t)
    order = [i.name for i in model.graph.input if i.name in inputs]
    return {name: inputs[name] for name in order}


@pytest.fixture(scope="module")
def scale_model(tmp_path_factory):
    """y = x * 2 + 1 for x float32[N, 3], compiled for batches of 1 and 4 only."""
    graph = h.make_graph(
        [h.make_node("Mul", ["x", "two"], ["m"]), h.make_node("Add", ["m", "one"], ["y"])], "scale",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
        [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1.0, np.float32), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    path = str(tmp_path_factory.mktemp("scale") / "scale.kiln")
    assert kiln.compile(model, path, profiles=["x:N=1", "x:N=4"], archs="none", progress=False) == path
    return kiln.load(path)


# --- every bundled real model against onnxruntime -------------------------------------------------

@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "own-kernels"])
@pytest.mark.parametrize("name", REAL_MODELS)
def test_real_model_matches_onnxruntime(name, onednn, tmp_path):
    model_dir = os.path.join(TESTDATA, name)
    inputs = first_test_set(model_dir)
    artifact = kiln.compile(os.path.join(model_dir, "model.onnx"), archs="none", progress=False)
    assert isinstance(artifact, bytes) and artifact[:4] != b"\0\0\0\0"
    model = kiln.load(artifact)
    assert [t.name for t in model.inputs] == list(inputs)
    ctx = model.context(device="cpu", cpu_threads=1, onednn=onednn)
    # CpuOptions::onednn: the note names oneDNN only where it runs (a runtime built with it).
    assert ("oneDNN" in ctx.device_note) == (onednn and "oneDNN" in model.context(device="cpu").device_note)
    got = ctx.run(inputs)
    session = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), providers=["CPUExecutionProvider"])
    want = session.run(None, inputs)
    assert len(got) == len(want)
    for g, w, spec in zip(got, want, model.outputs):
        assert g.shape == w.shape, spec.name
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"{name} output {spec.name}")


def test_torch_onnx_export_round_trip(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in build/venv (the tier does not install "
                                                "its ~200 MB CPU wheel); the DLPack tests use NumPy's")
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    path = str(tmp_path / "mlp.onnx")
    torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}})
    y = kiln.load(kiln.compile(path, archs="none", progress=False))(x)
    np.testing.assert_allclose(y, net(x).detach().numpy(), rtol=1e-5, atol=1e-5)


# --- compile options and the structured log -------------------------------------------------------

def test_compile_report_and_options(scale_model, tmp_path):
    report = kiln.last_compile_report()
    assert report is not None
    assert [e[0] for e in report.entries] == ["N=1", "N=4"]
    assert report.kernels == 2 and report.compile_jobs == 0  # one per entry: their shapes differ
    regions = report.of_kind("region")
    assert {e.entry for e in regions} == {"N=1", "N=4"} and all(e.text.startswith("region ") for e in regions)
    assert scale_model.entries[0].input_dims[0][0] == kiln.DimCheck(value=1)
    assert scale_model.entries[1].input_dims[0][0].accepts(4)
    # A constant input and fixed shapes: s is gone from the inputs, and x is [2, 3].
    graph = h.make_graph([h.make_node("Mul", ["x", "s"], ["y"])], "m",
                         [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]), h.make_tensor_value_info("s", T.FLOAT, [3])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])])
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    lines = []
    artifact = kiln.compile(m.SerializeToString(), shapes={"x": [2, None]}, archs=[], progress=False, log=lines.append,
                            constant_inputs={"s": np.array([1, 10, 100], np.float32)})
    model = kiln.load(artifact)
    assert [(t.name, t.shape) for t in model.inputs] == [("x", (2, 3))]
    assert model(np.ones((2, 3), np.float32)).tolist() == [[1, 10, 100], [1, 10, 100]]
    assert lines == list(kiln.last_compile_report().log) and lines
    # A scalar constant stays a scalar (a Python float, a 0-d array).
    scalar = h.make_graph([h.make_node("Mul", ["x", "s"], ["y"])], "m",
                          [h.make_tensor_value_info("x", T.FLOAT, ["N"]), h.make_tensor_value_info("s", T.FLOAT, [])],
                          [h.make_tensor_value_info("y", T.FLOAT, ["N"])])
    doubled = kiln.load(kiln.compile(h.make_model(scalar, opset_imports=[h.make_opsetid("", 13)]), archs="none",
                                     progress=False, constant_inputs={"s": np.float32(2.0)}))
    assert doubled(np.array([1.5, 4], np.float32)).tolist() == [3, 8]
    # cpu_targets: native code for the targets named (the log says which), or none.
    native = [l for l in kiln.last_compile_report().log if l.startswith("native code for ")]
    kiln.compile(m, archs="none", progress=False, cpu_targets=["x86-64"])
    assert [l.split(":")[0] for l in kiln.last_compile_report().log if l.startswith("native code for ")] == \
        (["native code for x86-64"] if native else [])  # a build without LLVM makes none
    kiln.compile(m, archs="none", progress=False, cpu_targets="none")
    assert not [l for l in kiln.last_compile_report().log if l.startswith("native code for ")]
    # cpu_layout: the CPU plan's 2-D Convs in NHWC (the log says so), or as ONNX has them.
    convs = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"]), h.make_node("Relu", ["c"], ["r"]),
                          h.make_node("Conv", ["r", "w"], ["y"])], "convs",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 2, 4, 4])],
                         [h.make_tensor("w", T.FLOAT, [2, 2, 1, 1], [1, 0, 0, 1])])  # the identity
    conv_model = h.make_model(convs, opset_imports=[h.make_opsetid("", 13)])
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4) - 16
    for layout, nhwc in (("nhwc", True), ("nchw", False)):
        art = kiln.load(kiln.compile(conv_model, archs="none", progress=False, cpu_layout=layout))
        assert any("channels-last: 2 Convs in NHWC" in l for l in kiln.last_compile_report().log) == nhwc
        assert art(x).tolist() == np.maximum(x, 0).tolist()
    with pytest.raises(kiln.Error) as e:
        kiln.compile(conv_model, archs="none", progress=False, cpu_layout="nwhc")
    assert e.value.code == "INVALID_ARGUMENT" and e.value.message == "cpu_layout 'nwhc': expected nhwc or nchw"
    with pytest.raises(kiln.Error) as e:
        kiln.compile(m, archs="none", progress=False, cpu_targets="avx2")
    assert e.value.code == "INVALID_ARGUMENT" and e.value.message.startswith("--cpu-targets: unknown CPU target 'avx2'")
    with pytest.raises(kiln.Error) as e:
        kiln.compile(m, precision="fp8", archs="none", progress=False)
    assert e.value.code == "INVALID_ARGUMENT" and e.value.message == "precision 'fp8': expected fp32, fp16 or bf16"
    with pytest.raises(kiln.Error) as e:
        kiln.compile(str(tmp_path / "missing.onnx"), archs="none", progress=False)
    assert e.value.code == "NOT_FOUND"
    def raises(line):
        raise ValueError("boom")

    with pytest.raises(kiln.Error) as e:  # a callback's exception ends the compile, named
        kiln.compile(m, archs="none", progress=False, log=raises)
    assert e.value.code == "INVALID_ARGUMENT" and e.value.message.startswith("a compile callback raised: ")
    assert "ValueError: boom" in e.value.message
    with pytest.raises(kiln.Error) as e:
        kiln.compile(42, archs="none", progress=False)
    assert e.value.code == "INVALID_ARGUMENT" and "got int" in str(e.value)


# --- DLPack, dict and list inputs -----------------------------------------------------------------

class OnlyDlpack:
    """An array that offers DLPack alone (no buffer protocol, no NumPy type), as other libraries' do."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_provenance_names_the_model_and_flags_and_is_the_same_every_compile(tmp_path):
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "relu", [h.make_tensor_value_info("x", T.FLOAT, ["N"])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["N"])])
    onnx_path = tmp_path / "relu.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(onnx_path))
    first = kiln.compile(str(onnx_path), str(tmp_path / "a.kiln"), archs="none", progress=False)
    second = kiln.compile(str(onnx_path), str(tmp_path / "b.kiln"), archs="none", progress=False, cpu_targets="none")
    p = kiln.load(first).provenance
    assert p["model_sha256"] == hashlib.sha256(onnx_path.read_bytes()).hexdigest()
    assert "--arch=none" in p["flags"] and "ONNX" in p["libraries"] and p["kiln_version"] == kiln.__version__
    assert "--cpu-targets=none" in kiln.load(second).provenance["flags"]
    again = kiln.compile(str(onnx_path), str(tmp_path / "c.kiln"), archs="none", progress=False)
    assert open(again, "rb").read() == open(first, "rb").read()


def test_inputs_by_order_by_name_and_through_dlpack(scale_model):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    want = x * 2 + 1
    ctx = scale_model.context(device="cpu")
    for inputs in ([x], (x,), {"x": x}, [OnlyDlpack(x)]):
        (y,) = ctx.run(inputs)
        assert isinstance(y, np.ndarray) and y.dtype == np.float32
        np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(np.from_dlpack(y), want)  # and out again through DLPack
    np.testing.assert_array_equal(scale_model(x=x[:1]), want[:1])


def test_outputs_into_the_callers_arrays(scale_model):
    ctx = scale_model.context(device="cpu")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.full((4, 3), -1, np.float32)
    result = ctx.run([x], out=[y])
    assert result[0] is y
    np.testing.assert_array_equal(y, x * 2 + 1)
    with pytest.raises(kiln.Error) as e:
        ctx.run([x], out=[np.empty((4, 2), np.float32)])
    assert e.value.code == "INVALID_ARGUMENT" and "output 0" in e.value.message and "[4, 2]" in e.value.message
    frozen = np.empty((4, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(kiln.Error) as e:
        ctx.run([x], out=[frozen])
    assert e.value.message == "out 0 ('y'): ndarray is not a writable array"
    with pytest.raises(kiln.Error) as e:
        ctx.run([x], out=[y, y])
    assert e.value.message == "out: expected a list of 1 arrays, one per output"


def test_torch_tensors_in_and_out(scale_model):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in build/venv")
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    (y,) = scale_model.context(device="cpu").run([x])
    assert torch.equal(torch.from_dlpack(y), x * 2 + 1)


def test_warm_prepares_shapes_without_a_call(scale_model):
    ctx = scale_model.context(device="cpu")
    ctx.warm([np.ones((4, 3), np.float32)])
    ctx.warm({"x": np.zeros((1, 3), np.float32)})
    s = kiln.compile_stats(ctx)
    assert (s.calls, s.cache_hits, s.cache_misses) == (0, 0, 0)
    (y,) = ctx.run([np.ones((4, 3), np.float32)])
    assert np.array_equal(y, np.full((4, 3), 3, np.float32))
    with pytest.raises(kiln.Error) as e:
        ctx.warm([np.ones((2, 3), np.float32)])
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.message == ("entry 0 (N=1): input 'x' dim 0 = 2, expected 1\n"
                               "entry 1 (N=4): input 'x' dim 0 = 2, expected 4")
    s = kiln.compile_stats(ctx)
    assert (s.calls, s.cache_hits, s.cache_misses) == (1, 1, 0)


def test_warm_runs_reaches_context_options(scale_model):
    (y,) = scale_model.context(device="cpu", warm_runs=0).run([np.ones((4, 3), np.float32)])
    assert np.array_equal(y, np.full((4, 3), 3, np.float32))
    with pytest.raises(kiln.Error) as e:
        scale_model.context(device="cpu", warm_runs=101)
    assert (e.value.code, e.value.message) == ("INVALID_ARGUMENT", "warm_runs is 101, expected 0 to 100")


# --- Thunder's statistics and traces --------------------------------------------------------------

def test_stats_after_hits_and_a_miss(scale_model):
    ctx = scale_model.context(device="cpu")
    one, four, two = (np.ones((n, 3), np.float32) for n in (1, 4, 2))
    ctx.run([one])
    ctx.run([four])
    with pytest.raises(kiln.Error) as e:
        ctx.run([two])
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.message == ("entry 0 (N=1): input 'x' dim 0 = 2, expected 1\n"
                               "entry 1 (N=4): input 'x' dim 0 = 2, expected 4")
    ctx.run([one])
    s = kiln.compile_stats(ctx)
    assert (s.calls, s.cache_hits, s.cache_misses) == (4, 3, 1)
    assert (kiln.cache_hits(ctx), kiln.cache_misses(ctx)) == (3, 1)
    assert s.entry_hits == (2, 1) and s.last_entry == 0
    assert s.last_compile_reasons == {"N=1": ["entry 0 (N=1): input 'x' dim 0 = 2, expected 1"],
                                      "N=4": ["entry 1 (N=4): input 'x' dim 0 = 2, expected 4"]}
    assert 0 < s.last_trace_host_start <= s.last_trace_cache_start <= s.last_trace_cache_stop
    assert s.last_prologue_execution_start <= s.last_prologue_execution_stop <= s.last_computation_execution_start
    assert s.last_computation_execution_start <= s.last_computation_execution_stop <= s.last_trace_host_stop
    assert s.last_trace_host_time() >= s.last_computation_execution_time() >= 0
    assert s.last_gpu_ns == -1  # the CPU backend
    ctx.run([four])
    traces = kiln.last_traces(ctx)  # the entry the last call ran: N=4
    assert [t.name for t in traces][:2] == ["import", "canonical"]
    assert "float32[4, 3]" in str(traces[0])
    assert [op.op for op in traces[0].ops] == ["Mul", "Add"]
    assert [op.op for op in kiln.last_traces(scale_model, entry=0)[0].ops] == ["Mul", "Add"]
    prologue = kiln.last_prologue_traces(ctx)[0]
    assert "check x.shape[0] == 4" in str(prologue)
    with pytest.raises(kiln.Error) as e:
        kiln.last_traces(ctx, entry=5)
    assert e.value.code == "INVALID_ARGUMENT"


# --- errors ---------------------------------------------------------------------------------------

def test_every_error_has_its_code_and_message(scale_model):
    ctx = scale_model.context(device="cpu")
    x = np.ones((4, 3), np.float32)

    def error(fn):
        with pytest.raises(kiln.Error) as e:
            fn()
        return e.value.code, e.value.message

    code, message = error(lambda: ctx.run([x.astype(np.float64)]))
    assert code == "INVALID_ARGUMENT" and "input 'x' dtype float64, expected float32" in message
    code, message = error(lambda: ctx.run([x[:, :2]]))
    assert code == "INVALID_ARGUMENT" and message.startswith("input 'x': not C-contiguous")
    assert error(lambda: ctx.run([x.T.copy()]))[1].startswith("entry 0 (N=1): input 'x' dim 0 = 3, expected 1")
    assert error(lambda: ctx.run([x, x])) == ("INVALID_ARGUMENT", "2 inputs, the model has 1")
    assert error(lambda: ctx.run({})) == ("INVALID_ARGUMENT", "input 'x' is missing")
    assert error(lambda: ctx.run({"x": x, "z": x})) == ("INVALID_ARGUMENT", "input 'z': the model has no such input")
    code, message = error(lambda: ctx.run(["not an array"]))
    assert code == "INVALID_ARGUMENT" and message == "input 'x': str is not an array (NumPy, or any object with __dlpack__)"
    assert error(lambda: ctx.run(x))[0] == "INVALID_ARGUMENT"
    code, message = error(lambda: ctx.run([np.ones((4, 3), np.complex64)]))
    assert code == "INVALID_ARGUMENT" and "complex64 has no Kiln type" in message
    assert error(lambda: kiln.load(b"not an artifact"))[0] == "DATA_LOSS"
    assert error(lambda: kiln.load("/nonexistent.kiln"))[0] == "NOT_FOUND"
    assert error(lambda: scale_model.context(device="tpu")) == ("INVALID_ARGUMENT",
                                                                 "device 'tpu': expected auto, cpu or cuda")
    ctx.close()
    assert ctx.closed
    assert error(lambda: ctx.run([x])) == ("FAILED_PRECONDITION", "this Context is closed")
    assert error(lambda: ctx.stats())[0] == "FAILED_PRECONDITION"
    assert isinstance(kiln.Error("x"), RuntimeError)


# --- threads and the GIL --------------------------------------------------------------------------

def test_run_releases_the_gil():
    """Run releases the GIL: while one thread is inside a long Run, another thread executes Python.
    The interpreter's switch interval is raised to 0.5 s for the test, so that neither thread is
    preempted in its Python code: the counting thread can take a step only when the running thread
    gives the GIL up, which with the GIL held for the call would be after it, when `done` is set."""
    model_dir = os.path.join(TESTDATA, "ch_ppocr_mobile_v2.0_cls")
    if not os.path.isdir(model_dir):
        pytest.skip("no PaddleOCR cls test data")
    model = kiln.load(kiln.compile(os.path.join(model_dir, "model.onnx"), archs="none", progress=False))
    x = next(iter(first_test_set(model_dir).values()))
    batch = np.repeat(x, 16, axis=0)
    ctx = model.context(device="cpu", cpu_threads=1)
    ctx.run([batch])  # plans and allocates outside the measured call
    in_call = threading.Event()
    done = threading.Event()

    def worker():
        in_call.set()
        ctx.run([batch])
        done.set()

    steps = 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        t = threading.Thread(target=worker)
        t.start()
        in_call.wait()
        while not done.is_set():
            steps += 1
        t.join()
    finally:
        sys.setswitchinterval(interval)
    assert steps > 1000, f"the counting thread took {steps} steps during the call: Run held the GIL"


def test_one_context_refuses_a_second_thread(scale_model):
    ctx = scale_model.context(device="cpu")
    x = np.ones((4, 3), np.float32)
    errors = []

    def worker():
        for _ in range(2000):
            try:
                ctx.run([x])
            except kiln.Error as e:
                errors.append(e.message)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Either thread may find the other running; every refusal says why, and nothing crashes.
    assert all(m.startswith("this Context is running a call on another thread") for m in errors)


# --- memory ---------------------------------------------------------------------------------------

def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_ten_thousand_runs_leak_nothing(scale_model):
    ctx = scale_model.context(device="cpu")
    x = np.ones((4, 3), np.float32)
    for _ in range(1000):
        ctx.run({"x": x})
    gc.collect()
    before = rss_kib()
    for _ in range(10000):
        ctx.run({"x": x})
        kiln.compile_stats(ctx)
    gc.collect()
    after = rss_kib()
    assert after - before < 2048, f"RSS {before} -> {after} KiB over 10,000 runs"


# --- the README's example, verbatim ---------------------------------------------------------------

def test_readme_example_runs_verbatim(tmp_path, monkeypatch, capsys):
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    example = re.search(r"<!-- python-example -->\n```python\n(.*?)```", readme, re.S)
    assert example, "README.md has no <!-- python-example --> block"
    code = example.group(1)
    assert len(code.strip().splitlines()) <= 10
    vad = os.path.join(TESTDATA, "silero_vad", "model.onnx")
    if not os.path.isfile(vad):
        pytest.skip("no Silero VAD test data")
    monkeypatch.chdir(tmp_path)
    os.symlink(vad, "silero_vad.onnx")
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("speech probability ") and printed[1].startswith("1 hits, 0 misses")


# --- the CUDA backend, on the emulated CUDA device ------------------------------------------------

EMULATED_LIB = os.path.join(ROOT, "build", "tests", "emulated_cuda", "lib")

CUDA_SCRIPT = r"""
import numpy as np, kiln, sys
model = kiln.load(sys.argv[1])
ctx = model.context(device="cuda", cuda_graphs=True)
x = np.arange(12, dtype=np.float32).reshape(4, 3)
for _ in range(3):
    (y,) = ctx.run([x])
    assert isinstance(y, np.ndarray) and (y == x * 2 + 1).all(), y
s = kiln.compile_stats(ctx)
print(ctx.device, s.graph_misses, s.graph_hits, s.last_gpu_ns >= 0)
"""


def test_cuda_context_on_the_emulated_device(tmp_path):
    """device="cuda": NumPy inputs staged to the device, outputs copied back into new arrays on
    the context's own stream, so that CUDA graphs capture (the second call) and replay (the
    third). The EMULATED device proves the logic, never speed."""
    import subprocess
    import sys

    if not os.path.isfile(os.path.join(EMULATED_LIB, "libcuda.so.1")):
        pytest.skip("this build has no emulated CUDA device (tests/emulated_cuda)")
    graph = h.make_graph(
        [h.make_node("Mul", ["x", "two"], ["m"]), h.make_node("Add", ["m", "one"], ["y"])], "scale",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
        [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1.0, np.float32), "one")])
    path = kiln.compile(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(tmp_path / "scale.kiln"),
                        profiles=["x:N=4"], archs=["sm_90"], progress=False)
    env = dict(os.environ, LD_LIBRARY_PATH=EMULATED_LIB + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""),
               KILN_EMULATED_CUDA_CACHE=os.path.join(ROOT, "build", "emulated-cuda-kernels"))
    r = subprocess.run([sys.executable, "-c", CUDA_SCRIPT, path], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cuda", "1", "1", "True"]


# --- what a hostile user found (each was a crash, a race or a wrong refusal) ----------------------

def identity_model(shape=("N", 3), profiles=()):
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "relu", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, shape)])
    return kiln.load(kiln.compile(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), archs="none",
                                  progress=False, profiles=profiles))


def test_stats_read_while_another_thread_runs_never_race():
    """Stats, device_note and memory_usage used to read the context while a call on another
    thread (GIL released) rewrote its miss reasons: garbage strings, std::bad_cast. They now
    take the context's lock: FAILED_PRECONDITION while it runs, exact values otherwise."""
    ctx = identity_model(profiles=["x:N=1"]).context(device="cpu")
    bad = [np.ones((2, 3), np.float32)]
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            try:
                ctx.run(bad)
            except kiln.Error:
                pass

    t = threading.Thread(target=worker)
    t.start()
    seen, refused = 0, 0
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            s = kiln.compile_stats(ctx)
            assert s.last_compile_reasons in ({}, {"N=1": ["entry 0 (N=1): input 'x' dim 0 = 2, expected 1"]})
            seen += 1
        except kiln.Error as e:
            assert e.code == "FAILED_PRECONDITION", e
            refused += 1
    stop.set()
    t.join()
    assert seen + refused > 0
    s = kiln.compile_stats(ctx)  # once the other thread is done: exact
    assert s.cache_misses == s.calls and s.last_compile_reasons == {
        "N=1": ["entry 0 (N=1): input 'x' dim 0 = 2, expected 1"]}


def test_out_element_that_drops_the_list_is_kept_alive():
    """An `out` element whose __dlpack__ clears the list run() was given (its last reference):
    the element used to be freed mid-call (a segfault)."""
    import gc

    ctx = identity_model().context(device="cpu")
    target = np.zeros((2, 3), np.float32)

    class ClearsItsList:
        def __dlpack__(self, *args, **kwargs):
            for r in gc.get_referrers(self):
                if isinstance(r, list):
                    r.clear()
            return target.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return target.__dlpack_device__()

    (got,) = ctx.run([np.full((2, 3), 5, np.float32)], out=[ClearsItsList()])
    [bytearray(56) for _ in range(1000)]
    assert isinstance(got, ClearsItsList)
    assert target.tolist() == [[5, 5, 5], [5, 5, 5]]


def test_empty_arrays_are_not_refused_for_their_strides():
    """NumPy gives an empty array strides of 0; an entry compiled for N = 0 takes it."""
    model = identity_model(profiles=["x:N=0..8"])
    (y,) = model.context(device="cpu").run([np.zeros((0, 3), np.float32)])
    assert y.shape == (0, 3)
    out = np.zeros((0, 3), np.float32)
    assert model.context(device="cpu").run([np.zeros((0, 3), np.float32)], out=[out])[0] is out


def test_names_that_are_not_utf8_come_out_escaped():
    """ONNX does not check that names are UTF-8; such a name is shown with \\x escapes, and the
    errors that echo it are still kiln.Error."""
    graph = h.make_graph([h.make_node("Relu", ["xQQQ"], ["y"])], "g", [h.make_tensor_value_info("xQQQ", T.FLOAT, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])])
    raw = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString().replace(b"xQQQ", b"x\xff\xfeQ")
    model = kiln.load(kiln.compile(raw, archs="none", progress=False))
    assert model.inputs[0].name == "x\\xff\\xfeQ"
    with pytest.raises(kiln.Error) as e:
        model.context(device="cpu").run([np.ones(2)])
    assert "x\\xff\\xfeQ" in e.value.message
    assert "x\\xff\\xfeQ" in str(kiln.last_traces(model)[0])


def test_arguments_checked_before_they_reach_cpp(tmp_path):
    from collections import UserDict

    model = identity_model()
    x = np.ones((2, 3), np.float32)
    assert model.context(device="cpu").run(UserDict(x=x))[0].tolist() == x.tolist()  # any Mapping is by name
    with pytest.raises(kiln.Error) as e:
        model.context(device="cpu").run({1: x})
    assert e.value.message == "input key 1 is not an input name (str)"
    onnx_path = str(tmp_path / "relu.onnx")
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "relu", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), onnx_path)

    def error(**kwargs):
        with pytest.raises(kiln.Error) as e:
            kiln.compile(onnx_path, archs="none", progress=False, **kwargs)
        return e.value.code, e.value.message

    assert error(constant_inputs={1: x}) == ("INVALID_ARGUMENT", "constant_inputs: a key is not an input name (str)")
    assert error(shapes={"x": "14"})[1].startswith("shapes['x']: expected a list of ints")
    assert error(shapes={"x": [1.5, 3]})[1].startswith("shapes['x']: expected a list of ints")
    assert error(output=str(tmp_path))[1].endswith("is a directory; name the .kiln file to write")
    assert not os.path.exists(str(tmp_path) + ".tmp")
    code, message = error(profiles="x:N=4..1")  # one profile as a str; its error says it once
    assert code == "INVALID_ARGUMENT" and message.count("profile 'x:N=4..1'") == 1
    with pytest.raises(kiln.Error) as e:
        kiln.load(onnx_path + "\0junk")
    assert e.value.code == "INVALID_ARGUMENT" and "not a file path" in e.value.message
