"""Kiln's Triton backend against onnxruntime in Triton's Python backend, under Triton's own load
generator (perf_analyzer), in one server, side by side (serving/triton/README.md, "Speed").

  python3 -m venv build/triton-bench-venv    # once
  build/triton-bench-venv/bin/pip install nvidia-pytriton==0.7.0 "tritonclient[all]==2.51.0" onnxruntime onnx
  build/triton-bench-venv/bin/python benchmarks/triton_compare.py --build build

tritonclient 2.51's wheel carries perf_analyzer (PyPI's `perf-analyzer` is an empty placeholder),
matching the server (tritonserver 2.51 from nvidia-pytriton). For each model (PaddleOCR cls at [1, 3, 48, 192], PP-OCRv4 det at the
test set's [1, 3, 160, 320]) the repository holds two models: `<m>_kiln` (the .kiln artifact,
KIND_CPU, cpu_threads 1) and `<m>_ort` (a model.py running the same .onnx with onnxruntime,
intra_op_num_threads 1), each one instance, no dynamic batching, so that both do the same work
per request. perf_analyzer then measures each at concurrency 1, 4 and 16 (HTTP, the inputs
random, 5 s windows until stable), alternating the two. It prints one table row per model,
backend and concurrency: throughput (inferences/s), p50 / p99 latency (us), and the server's
compute-input, compute-infer and compute-output times per request as the backend reports them
(Kiln's: reading and stacking the inputs, the Run, copying the outputs into the responses),
with Kiln's own Run time (`kiln bench`, same artifact, 1 thread) for comparison.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

MODELS = {
    "cls": ("ch_ppocr_mobile_v2.0_cls", "x", [1, 3, 48, 192]),
    "det": ("ch_PP-OCRv4_det", "x", [1, 3, 160, 320]),
}

ORT_MODEL_PY = '''
import sys
sys.path[:0] = SITE_PACKAGES  # this venv's onnxruntime and numpy: the stub's Python has none
import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        path = args["model_repository"] + "/" + args["model_version"] + "/model.onnx"
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]

    def execute(self, requests):
        responses = []
        for request in requests:
            feed = {i.name: pb_utils.get_input_tensor_by_name(request, i.name).as_numpy()
                    for i in self.session.get_inputs()}
            results = self.session.run(None, feed)
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor(n, r) for n, r in zip(self.outputs, results)]))
        return responses
'''


def dims_text(dims):
    return "[" + ", ".join(str(d) for d in dims) + "]"


def write_repository(build, repo):
    import onnx

    for key, (src, inp, shape) in MODELS.items():
        onnx_path = os.path.join(build, "testdata", src, "model.onnx")
        kiln_dir = os.path.join(repo, f"{key}_kiln", "1")
        os.makedirs(kiln_dir)
        subprocess.run([os.path.join(build, "kiln"), "compile", onnx_path, "-o", os.path.join(kiln_dir, "model.kiln")],
                       check=True, capture_output=True)
        with open(os.path.join(repo, f"{key}_kiln", "config.pbtxt"), "w") as f:
            f.write('backend: "kiln"\nmax_batch_size: 0\n'
                    f'input [{{ name: "{inp}", data_type: TYPE_FP32, dims: {dims_text(shape)} }}]\n'
                    'instance_group [{ kind: KIND_CPU, count: 1 }]\n'
                    'parameters { key: "cpu_threads" value: { string_value: "1" } }\n')
        ort_dir = os.path.join(repo, f"{key}_ort", "1")
        os.makedirs(ort_dir)
        shutil.copy(onnx_path, os.path.join(ort_dir, "model.onnx"))
        with open(os.path.join(ort_dir, "model.py"), "w") as f:
            site = [p for p in sys.path if p.endswith("site-packages")]
            f.write(ORT_MODEL_PY.replace("SITE_PACKAGES", repr(site)))
        m = onnx.load(onnx_path)
        outs = "".join(f'{{ name: "{o.name}", data_type: TYPE_FP32, dims: '
                       f'{dims_text([d.dim_value if d.dim_value > 0 else -1 for d in o.type.tensor_type.shape.dim])} }},'
                       for o in m.graph.output).rstrip(",")
        with open(os.path.join(repo, f"{key}_ort", "config.pbtxt"), "w") as f:
            f.write('backend: "python"\nmax_batch_size: 0\n'
                    f'input [{{ name: "{inp}", data_type: TYPE_FP32, dims: {dims_text(shape)} }}]\n'
                    f'output [{outs}]\n'
                    'instance_group [{ kind: KIND_CPU, count: 1 }]\n')


def perf_env(work):
    """perf_analyzer links libb64.so.0d and libcudart.so.12, which nvidia-pytriton's wheel
    carries under mangled names: links to them, on LD_LIBRARY_PATH."""
    import glob

    import pytriton

    libs = os.path.join(os.path.dirname(os.path.dirname(pytriton.__file__)), "nvidia_pytriton.libs")
    links = os.path.join(work, "perf-libs")
    os.makedirs(links, exist_ok=True)
    for name, pattern in (("libb64.so.0d", "libb64-*.so.0d"), ("libcudart.so.12", "libcudart-*.so.12*")):
        found = glob.glob(os.path.join(libs, pattern))
        if found and not os.path.exists(os.path.join(links, name)):
            os.symlink(found[0], os.path.join(links, name))
    return dict(os.environ, LD_LIBRARY_PATH=links + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))


def perf(perf_analyzer, env, url, model, concurrency, shape_arg):
    out = subprocess.run([perf_analyzer, "-m", model, "-u", url, "-i", "http", "--concurrency-range",
                          f"{concurrency}:{concurrency}", "--measurement-interval", "5000", "--percentile", "99", "--stability-percentage", "25", "--max-trials", "20",
                          "--shape", shape_arg], capture_output=True, text=True, timeout=600, env=env)
    text = out.stdout + out.stderr
    thr = re.search(r"Throughput: ([\d.]+) infer/sec", text)
    p50 = re.search(r"p50 latency: (\d+) usec", text)
    p99 = re.search(r"p99 latency: (\d+) usec", text)
    phases = [re.search(rf"compute {phase} (\d+) usec", text) for phase in ("input", "infer", "output")]
    if not (thr and p50 and p99 and all(phases)):
        sys.exit(f"perf_analyzer failed for {model}:\n{text[-3000:]}")
    return float(thr.group(1)), int(p50.group(1)), int(p99.group(1)), [int(p.group(1)) for p in phases]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    venv_bin = os.path.dirname(sys.executable)
    perf_analyzer = os.path.join(venv_bin, "perf_analyzer")
    if not os.access(perf_analyzer, os.X_OK):
        sys.exit(f"no perf_analyzer in {venv_bin}: pip install 'tritonclient[all]==2.51.0' (see this file's header)")
    import pytriton

    server_bin = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    backends = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "backends")
    work = tempfile.mkdtemp(prefix="kiln-triton-bench-")
    repo = os.path.join(work, "repo")
    write_repository(build, repo)
    # The Kiln backend next to Triton's own python backend, in one backend directory.
    backend_dir = os.path.join(work, "backends")
    shutil.copytree(backends, backend_dir)
    # The Python backend's stub for this interpreter, which the wheel keeps per Python version; a
    # link, since it finds its libraries relative to where it really is.
    stub = os.path.join(os.path.dirname(backends), "python_backend_stubs",
                        f"{sys.version_info.major}.{sys.version_info.minor}", "triton_python_backend_stub")
    os.symlink(stub, os.path.join(backend_dir, "python", "triton_python_backend_stub"))
    shutil.copytree(os.path.join(build, "triton", "backends", "kiln"), os.path.join(backend_dir, "kiln"))
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen([server_bin, f"--model-repository={repo}", f"--backend-directory={backend_dir}",
                               "--http-port=18500", "--grpc-port=18501", "--metrics-port=18502"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen("http://127.0.0.1:18500/v2/health/ready", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            sys.exit(f"the server did not become ready; see {work}/server.log")
        print(f"machine: {os.cpu_count()} CPUs, {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}; "
              f"{time.strftime('%Y-%m-%d')}")
        env = perf_env(work)
        direct = {}
        print("| model | backend | concurrency | throughput (infer/s) | p50 (us) | p99 (us) | compute input / infer / output (us) |")
        print("|---|---|---|---|---|---|---|")
        for key, (_, inp, shape) in MODELS.items():
            shape_arg = f"{inp}:{','.join(str(d) for d in shape)}"
            bench = subprocess.run([os.path.join(build, "kiln"), "bench", os.path.join(repo, f"{key}_kiln", "1", "model.kiln"),
                                    "--random", "--shape", f"{inp}:{'x'.join(str(d) for d in shape)}", "--threads", "1",
                                    "--device", "cpu", "--iterations", "200", "--json", "-"],
                                   capture_output=True, text=True, check=True)
            direct[key] = json.loads(bench.stdout)["latency_ms"]["p50"] * 1000
            for c in (1, 4, 16):
                for backend in ("kiln", "ort"):
                    thr, p50, p99, (cin, cinfer, cout) = perf(perf_analyzer, env, "127.0.0.1:18500", f"{key}_{backend}", c,
                                                              shape_arg)
                    name = "Kiln" if backend == "kiln" else "onnxruntime (Python backend)"
                    print(f"| {key} | {name} | {c} | {thr:.1f} | {p50} | {p99} | {cin} / {cinfer} / {cout} |", flush=True)
            print(f"(kiln bench {key}: Run p50 {direct[key]:.0f} us, 1 thread, the same artifact and shape)", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


if __name__ == "__main__":
    main()
