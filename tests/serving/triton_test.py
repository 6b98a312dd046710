"""The Triton tier: Kiln's backend (build/triton/backends/kiln/libtriton_kiln.so) in the real
tritonserver (2.51, from the nvidia-pytriton wheel), on loopback ports, driven by Triton's own
client (tritonclient) over HTTP and gRPC. scripts/triton.sh sets up its venv and runs it.

  python tests/serving/triton_test.py --build build --refs DIR [--backend-build DIR] [--asan-runtime SO]

--backend-build takes the backend from another build of the same tree (build/sanitize: ASan and
UBSan), and --asan-runtime preloads that build's sanitizer runtime into the server, whose own
binary is not instrumented; the server's log is then searched for sanitizer reports.

DIR holds onnxruntime's outputs (tests/serving/triton_refs.py). The test compiles the bundled
models with build/kiln into a model repository, starts the server in explicit model-control
mode, and checks, each against onnxruntime or the exact error expected:
  - inference over HTTP and gRPC (PaddleOCR cls and det, Silero VAD), and the configuration
    that auto-complete filled in from the artifact;
  - dynamic batching: 8 client threads sending single-row requests, every answer right, while
    the server's statistics show executions of more than one request;
  - errors: wrong dtype, wrong rank, missing input, a batch above max_batch_size, a value no
    entry accepts (Kiln's own miss reason), an unknown model, a corrupt artifact and a
    config.pbtxt that does not fit the artifact (both fail their load with Kiln's message while
    the other models keep serving);
  - load, unload and reload cycles with the server's memory and open files stable.
Exit status 0 when every check passes; each check prints one line.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

FAILURES = []
CYCLES = int(os.environ.get("KILN_TRITON_CYCLES", "12"))


def check(name, ok, detail=""):
    print(f"[triton] {'PASS' if ok else 'FAIL'}: {name}" + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        FAILURES.append(name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tritonserver():
    import pytriton

    path = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    if not os.access(path, os.X_OK):
        sys.exit(f"[triton] no tritonserver binary at {path}")
    return path


def compile_model(kiln, onnx_path, out, options=()):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    r = subprocess.run([kiln, "compile", onnx_path, "-o", out, *options], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"[triton] kiln compile {onnx_path} failed:\n{r.stderr}")


def make_repository(build, repo, refs, emulated):
    """cls (auto-complete, max_batch_size 4 from the artifact's batch dim), cls_batched (the
    same artifact with dynamic batching and two instances), det, vad, and two models that must
    fail their load: corrupt (bytes that are not an artifact) and mismatch (a config.pbtxt whose
    input data_type is not the artifact's)."""
    shutil.rmtree(repo, ignore_errors=True)
    kiln = os.path.join(build, "kiln")
    data = os.path.join(build, "testdata")
    sources = {"cls": "ch_ppocr_mobile_v2.0_cls", "det": "ch_PP-OCRv4_det", "vad": "silero_vad"}
    for name, src in sources.items():
        compile_model(kiln, os.path.join(data, src, "model.onnx"), os.path.join(repo, name, "1", "model.kiln"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('backend: "kiln"\ninstance_group [{ kind: KIND_CPU }]\n')
    # Every batched model below names the batch it waits for (preferred_batch_size) with a queue
    # delay of seconds: Triton's batcher then runs a batch once that many requests are queued, so
    # what the checks expect does not depend on how fast a loaded machine sends them (a short
    # delay did: under load the rows arrived apart and ran one by one). The delay only bounds the
    # wait of the requests left over at the end.
    shutil.copytree(os.path.join(repo, "cls", "1"), os.path.join(repo, "cls_batched", "1"))
    with open(os.path.join(repo, "cls_batched", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\nmax_batch_size: 8\n'
                'dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 2000000 }\n'
                'instance_group [{ kind: KIND_CPU, count: 2 }]\n'
                'parameters { key: "cpu_threads" value: { string_value: "1" } }\n')
    shutil.copytree(os.path.join(repo, "cls", "1"), os.path.join(repo, "corrupt", "1"))
    with open(os.path.join(repo, "corrupt", "1", "model.kiln"), "r+b") as f:
        f.seek(4096)  # inside the FlatBuffer, which its checksum covers
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 0xFF]))
    with open(os.path.join(repo, "corrupt", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\n')
    # gather: batched, waiting for 3 or 4 rows, so that concurrent rows stack into one Run;
    # gather_empty: unbatched (its inputs listed with dim 0), compiled with an entry for N = 0.
    gather = os.path.join(refs, "gather", "model.onnx")
    compile_model(kiln, gather, os.path.join(repo, "gather", "1", "model.kiln"))
    with open(os.path.join(repo, "gather", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\nmax_batch_size: 8\n'
                'dynamic_batching { preferred_batch_size: [ 3, 4 ] max_queue_delay_microseconds: 2000000 }\n'
                'instance_group [{ kind: KIND_CPU }]\n')
    compile_model(kiln, gather, os.path.join(repo, "gather_empty", "1", "model.kiln"), ["--profile", "x:N=0.."])
    # gather_split: entries for batches of 1 and 4 only, so that a dynamic batch of 5 runs as
    # 4 + 1; gather_badmax: the same artifact with a max_batch_size no entry accepts.
    split = os.path.join(repo, "gather_split", "1", "model.kiln")
    compile_model(kiln, gather, split, ["--profile", "x:N=1", "--profile", "x:N=4"])
    with open(os.path.join(repo, "gather_split", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\nmax_batch_size: 4\n'
                'dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 2000000 }\n'
                'instance_group [{ kind: KIND_CPU }]\n')
    shutil.copytree(os.path.join(repo, "gather_split", "1"), os.path.join(repo, "gather_badmax", "1"))
    with open(os.path.join(repo, "gather_badmax", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\nmax_batch_size: 3\n')
    with open(os.path.join(repo, "gather_empty", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\ninstance_group [{ kind: KIND_CPU }]\n'
                'input [{ name: "x", data_type: TYPE_FP32, dims: [-1, 4] },'
                ' { name: "idx", data_type: TYPE_INT64, dims: [-1, 2] }]\n')
    # cls_cuda: the CUDA backend (parameter device = "cuda") on the emulated CUDA device, when
    # this build has it (tests/emulated_cuda; the server then runs with its libcuda).
    if emulated:
        shutil.copytree(os.path.join(repo, "cls", "1"), os.path.join(repo, "cls_cuda", "1"))
        with open(os.path.join(repo, "cls_cuda", "config.pbtxt"), "w") as f:
            f.write('backend: "kiln"\ninstance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "device" value: { string_value: "cuda" } }\n')
    shutil.copytree(os.path.join(repo, "cls", "1"), os.path.join(repo, "mismatch", "1"))
    with open(os.path.join(repo, "mismatch", "config.pbtxt"), "w") as f:
        f.write('backend: "kiln"\nmax_batch_size: 4\n'
                'input [{ name: "x", data_type: TYPE_INT32, dims: [3, -1, -1] }]\n')


class Server:
    def __init__(self, backend_build, repo, log_path, env):
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [tritonserver(), f"--model-repository={repo}",
             f"--backend-directory={os.path.join(backend_build, 'triton', 'backends')}",
             "--model-control-mode=explicit", "--strict-model-config=false",
             f"--http-port={self.http}", f"--grpc-port={self.grpc}", f"--metrics-port={self.metrics}",
             "--allow-metrics=true", "--log-verbose=0", "--exit-timeout-secs=10"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"127.0.0.1:{self.http}"
        for _ in range(300):
            if self.proc.poll() is not None:
                sys.exit(f"[triton] tritonserver exited with {self.proc.returncode}; see {log_path}")
            try:
                with urllib.request.urlopen(f"http://{self.url}/v2/health/live", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit(f"[triton] tritonserver did not come up; see {log_path}")

    def stop(self, until_unloaded=False):
        """SIGINT, then the exit status; with until_unloaded, whether the server unloaded every
        model (its log's last count of live models reads 0) before it is killed."""
        self.proc.send_signal(signal.SIGINT)
        try:
            if not until_unloaded:
                return self.proc.wait(timeout=60)
            for _ in range(600):
                with open(self.log.name, errors="replace") as f:
                    if "Found 0 live models and 0 in-flight non-inference requests" in f.read():
                        return True
                time.sleep(0.1)
            return False
        except subprocess.TimeoutExpired:
            return -9
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    def open_files(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def load_refs(refs, model):
    out = {}
    for kind in ("inputs", "outputs"):
        d = os.path.join(refs, model, kind)
        out[kind] = {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}
    return out


def infer(module, client, model, inputs, outputs=None):
    args = []
    for name, value in inputs.items():
        i = module.InferInput(name, list(value.shape), module_dtype(value))
        i.set_data_from_numpy(value)
        args.append(i)
    requested = [module.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, args, outputs=requested)


def module_dtype(a):
    return {np.float32: "FP32", np.float64: "FP64", np.int64: "INT64", np.int32: "INT32"}[a.dtype.type]


def error_of(fn):
    try:
        fn()
    except InferenceServerException as e:
        return e
    return None


def check_outputs(name, result, expected, tol):
    worst = 0.0
    for out_name, want in expected.items():
        got = result.as_numpy(out_name)
        if got is None or got.shape != want.shape:
            check(name, False, f"output {out_name}: shape {None if got is None else got.shape}, expected {want.shape}")
            return
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0)
    check(name, worst <= tol, f"max |difference| against onnxruntime {worst:.3g}, tolerance {tol}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--refs", required=True)
    ap.add_argument("--backend-build", help="the build whose triton/backends to serve from (default: --build)")
    ap.add_argument("--asan-runtime", help="the sanitizer runtime to preload into the server")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    backend_build = os.path.abspath(a.backend_build or a.build)
    work = os.path.join(backend_build, "triton-test")
    repo = os.path.join(work, "repo")
    emulated_lib = os.path.join(build, "tests", "emulated_cuda", "lib")
    emulated = os.path.isfile(os.path.join(emulated_lib, "libcuda.so.1"))
    env = dict(os.environ)
    # glibc gives a thread that allocates an arena of its own, up to 8 per core, and keeps
    # its freed memory: each reload's new instance thread (and the OpenMP threads oneDNN runs
    # on) may add one until the cap, which looks like growth in the reload cycles' RSS (about
    # 2.4 MB a cycle on 2 cores, up to cycle 15, then flat). Two arenas make that warm-up a
    # few cycles on any machine.
    env["MALLOC_ARENA_MAX"] = "2"
    if emulated:
        env["LD_LIBRARY_PATH"] = emulated_lib + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        env["KILN_EMULATED_CUDA_CACHE"] = os.path.join(build, "emulated-cuda-kernels")
    if a.asan_runtime:
        env["LD_PRELOAD"] = a.asan_runtime
        # Leaks are not checked here: the server's own (not instrumented) allocations would be
        # reported too; the load/unload cycles check the memory instead.
        env["ASAN_OPTIONS"] = "detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=1"
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    make_repository(build, repo, a.refs, emulated)
    log_path = os.path.join(work, "tritonserver.log")
    server = Server(backend_build, repo, log_path, env)
    try:
        run_checks(server, a.refs, emulated, sanitized=bool(a.asan_runtime))
    finally:
        if not a.asan_runtime:
            code = server.stop()
            check("the server shuts down cleanly on SIGINT", code == 0, f"exit status {code}")
        else:
            # Under the ASan runtime tritonserver never exits, with or without Kiln's backend:
            # the wheel's own libp11-kit deadlocks in its destructor (freelocale waits on glibc's
            # setlocale lock). What Kiln does at shutdown, unloading every model, is checked.
            check("on SIGINT the server unloads every model (its exit hangs under ASan in the wheel's "
                  "libp11-kit, without Kiln's backend too)", server.stop(until_unloaded=True) is True)
            with open(log_path, errors="replace") as f:
                reports = [line for line in f if "ERROR: AddressSanitizer" in line or "runtime error:" in line]
            check("no AddressSanitizer or UBSan report in the server's log", not reports,
                  "".join(reports[:3]).strip())
    print(f"[triton] {len(FAILURES)} failed" + (": " + ", ".join(FAILURES) if FAILURES else ""), flush=True)
    return 1 if FAILURES else 0


def run_checks(server, refs, emulated, sanitized):
    """Every check; `sanitized` (the ASan run) skips the memory checks, since ASan holds freed
    memory in its quarantine (the plain run checks them)."""
    http = th.InferenceServerClient(server.url, concurrency=8)
    grpc = tg.InferenceServerClient(f"127.0.0.1:{server.grpc}")
    for model in ("cls", "cls_batched", "det", "vad", "gather", "gather_empty", "gather_split") + \
            (("cls_cuda",) if emulated else ()):
        http.load_model(model)

    # --- auto-complete ------------------------------------------------------------------------
    config = http.get_model_config("cls")
    inputs = [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]]
    check("auto-complete fills max_batch_size 4 and the inputs and outputs from the artifact",
          config["max_batch_size"] == 4 and inputs == [("x", "TYPE_FP32", [3, -1, -1])]
          and [o["name"] for o in config["output"]] == ["save_infer_model/scale_0.tmp_1"], json.dumps(inputs))
    vad_config = http.get_model_config("vad")
    check("a model without a batch dim (Silero VAD: state is [2, N, 128]) is served unbatched",
          vad_config["max_batch_size"] == 0, f"max_batch_size {vad_config['max_batch_size']}")

    # --- inference against onnxruntime --------------------------------------------------------
    cls = load_refs(refs, "ch_ppocr_mobile_v2.0_cls")
    det = load_refs(refs, "ch_PP-OCRv4_det")
    vad = load_refs(refs, "silero_vad")
    vad["inputs"]["sr"] = vad["inputs"]["sr"].reshape(1)  # a scalar is served as [1]
    cls_out = {"save_infer_model/scale_0.tmp_1": cls["outputs"]["save_infer_model_scale_0.tmp_1"]}
    check_outputs("PaddleOCR cls over HTTP", infer(th, http, "cls", cls["inputs"]), cls_out, 1e-4)
    check_outputs("PaddleOCR cls over gRPC", infer(tg, grpc, "cls", cls["inputs"]), cls_out, 1e-4)
    check_outputs("PP-OCRv4 det over gRPC", infer(tg, grpc, "det", det["inputs"]), det["outputs"], 1e-3)
    check_outputs("Silero VAD over HTTP", infer(th, http, "vad", vad["inputs"]), vad["outputs"], 1e-4)
    check_outputs("Silero VAD over gRPC, one output asked for",
                  infer(tg, grpc, "vad", vad["inputs"], ["stateN"]), {"stateN": vad["outputs"]["stateN"]}, 1e-4)

    if emulated:
        check_outputs("PaddleOCR cls on the CUDA backend (parameter device = cuda; the EMULATED CUDA device)",
                      infer(th, http, "cls_cuda", cls["inputs"]), cls_out, 1e-4)
    else:
        print("[triton] SKIP: the CUDA backend (this build has no emulated CUDA device)", flush=True)

    # --- dynamic batching ---------------------------------------------------------------------
    rows = os.path.join(refs, "cls_rows")
    xs = [np.load(os.path.join(rows, f"x_{i}.npy")) for i in range(16)]
    ys = [np.load(os.path.join(rows, f"y_{i}.npy")) for i in range(16)]
    out_name = "save_infer_model/scale_0.tmp_1"

    def client(t):
        c = th.InferenceServerClient(server.url)
        worst = 0.0
        for rep in range(4):
            i = (t * 4 + rep) % 16
            got = infer(th, c, "cls_batched", {"x": xs[i]}).as_numpy(out_name)
            worst = max(worst, float(np.max(np.abs(got - ys[i]))))
        c.close()
        return worst

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        worst = max(pool.map(client, range(8)))
    check("dynamic batching: 32 single-row requests from 8 clients, each answer against onnxruntime",
          worst <= 1e-4, f"max |difference| {worst:.3g}")
    stats = http.get_inference_statistics("cls_batched")["model_stats"][0]
    sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats.get("batch_stats", [])}
    check("dynamic batching: the server's statistics show executions of more than one request",
          any(size > 1 for size in sizes), f"executions by batch size {sizes}")
    inference = stats["inference_stats"]
    check("statistics: every request counted with its compute-infer time",
          int(inference["success"]["count"]) == 32 and int(inference["compute_infer"]["ns"]) > 0,
          f"success {inference['success']['count']}, compute_infer {inference['compute_infer']['ns']} ns")

    # One row of a stack whose data is out of range fails alone; the others are answered.
    g = os.path.join(refs, "gather")
    rows = [{"x": np.load(os.path.join(g, f"x_{i}.npy")), "idx": np.load(os.path.join(g, f"idx_{i}.npy"))}
            for i in range(5)]

    def gather_row(i):
        c = th.InferenceServerClient(server.url)
        try:
            return infer(th, c, "gather", rows[i])
        except InferenceServerException as e:
            return e
        finally:
            c.close()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(gather_row, range(4)))
    good = all(not isinstance(answers[i], Exception) and
               np.array_equal(answers[i].as_numpy("y"), np.load(os.path.join(g, f"y_{i}.npy"))) and
               np.array_equal(answers[i].as_numpy("z"), np.load(os.path.join(g, f"z_{i}.npy"))) for i in range(3))
    bad = answers[3]
    check("a stacked batch with one row out of range: that request fails alone, the others are answered",
          good and isinstance(bad, Exception) and "out of range" in str(bad), str(bad))
    # The same rows without the bad one run as one stacked execution of 3: the batcher did
    # stack them above (a failed stack is not a batch execution; its rows ran again one by one).
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        again = list(pool.map(gather_row, range(3)))
    sizes = {int(b["batch_size"]) for b in
             http.get_inference_statistics("gather")["model_stats"][0].get("batch_stats", [])}
    check("... and the good rows alone stack into one execution of 3",
          3 in sizes and not any(isinstance(a, Exception) for a in again), f"batch sizes {sorted(sizes)}")
    empty = infer(th, http, "gather_empty", rows[4])
    check("an empty batch (N = 0) of an unbatched model with inputs listed, against onnxruntime",
          empty.as_numpy("y").shape == (0, 2) and empty.as_numpy("z").shape == (0, 4)
          and http.get_model_config("gather_empty")["max_batch_size"] == 0,
          f"y {empty.as_numpy('y').shape}, z {empty.as_numpy('z').shape}")

    # Entries for 1 and 4 rows only: 5 concurrent rows run as 4 + 1, and 2 rows in one request
    # fail with Kiln's miss reason.
    def split_row(i):
        c = th.InferenceServerClient(server.url)
        try:
            return infer(th, c, "gather_split", rows[i % 3])
        finally:
            c.close()

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(split_row, range(5)))
    good = all(np.array_equal(answers[i].as_numpy("y"), np.load(os.path.join(g, f"y_{i % 3}.npy"))) for i in range(5))
    sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in
             http.get_inference_statistics("gather_split")["model_stats"][0].get("batch_stats", [])}
    check("entries for 1 and 4 rows: a dynamic batch of 5 runs split as 4 + 1, every answer right",
          good and sizes == {4: 1, 1: 1}, f"executions by batch size {sizes}")
    two = {k: np.concatenate([rows[0][k], rows[1][k]]) for k in ("x", "idx")}
    e = error_of(lambda: infer(th, http, "gather_split", two))
    check("a request of 2 rows, which no entry accepts, fails with Kiln's miss reason",
          e is not None and "entry 0 (N=1): input 'x' dim 0 = 2, expected 1" in str(e)
          and "entry 1 (N=4): input 'x' dim 0 = 2, expected 4" in str(e), str(e))
    with open(server.log.name) as f:
        log = f.read()
    check("its load logs the batch sizes no entry accepts",
          "kiln: model 'gather_split': no entry accepts a batch of 2..3 rows" in log)

    # --- metrics ------------------------------------------------------------------------------
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics}/metrics", timeout=10) as r:
        metrics = r.read().decode()

    def metric(name, model):
        for line in metrics.splitlines():
            if line.startswith(name + "{") and f'model="{model}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return None

    success = metric("nv_inference_request_success", "cls_batched")
    infer_us = metric("nv_inference_compute_infer_duration_us", "cls_batched")
    executions = metric("nv_inference_exec_count", "cls_batched")
    check("/metrics: the requests, their compute-infer time and the batched executions of cls_batched",
          success == 32 and infer_us is not None and infer_us > 0 and executions is not None and executions < 32,
          f"nv_inference_request_success {success}, nv_inference_compute_infer_duration_us {infer_us}, "
          f"nv_inference_exec_count {executions}")

    # --- errors -------------------------------------------------------------------------------
    x = cls["inputs"]["x"]
    e = error_of(lambda: infer(th, http, "cls", {"x": x.astype(np.float64)}))
    check("wrong dtype is refused with the expected type", e is not None and "expects 'FP32'" in str(e), str(e))
    e = error_of(lambda: infer(th, http, "cls", {"x": x[0]}))
    check("wrong rank is refused", e is not None and "unexpected shape for input 'x'" in str(e), str(e))
    e = error_of(lambda: infer(th, http, "vad", {k: v for k, v in vad["inputs"].items() if k != "sr"}))
    check("a missing input is refused", e is not None and "sr" in str(e), str(e))
    e = error_of(lambda: infer(th, http, "cls", {"x": np.concatenate([x, x, x])}))
    check("a batch above max_batch_size is refused", e is not None and "batch-size must be <= 4" in str(e), str(e))
    odd = dict(vad["inputs"], sr=np.array([12345], dtype=np.int64))
    e = error_of(lambda: infer(th, http, "vad", odd))
    check("a value that no entry accepts gets Kiln's miss reason", e is not None and "'sr'" in str(e)
          and "entry" in str(e), str(e))
    check("the same request with a valid value still runs",
          infer(th, http, "vad", vad["inputs"]).as_numpy("output") is not None)
    # A failed request leaks nothing (its error is deleted once sent).
    rss0 = server.rss_kib()
    for _ in range(300 if sanitized else 3000):
        error_of(lambda: infer(tg, grpc, "vad", odd))
    rss1 = server.rss_kib()
    if sanitized:
        print("[triton] SKIP: memory after 3000 failed requests (ASan's quarantine holds freed memory)", flush=True)
    else:
        check("3000 failed requests leave the server's memory where it was", rss1 - rss0 <= 1024,
              f"RSS {rss0} -> {rss1} KiB")
    e = error_of(lambda: infer(th, http, "no_such_model", {"x": x}))
    check("an unknown model is refused", e is not None and "no_such_model" in str(e), str(e))
    e = error_of(lambda: http.load_model("corrupt"))
    check("a corrupt artifact fails its model's load with Kiln's verifier message",
          e is not None and "kiln: model 'corrupt': cannot load" in str(e) and "DATA_LOSS" in str(e), str(e))
    e = error_of(lambda: http.load_model("mismatch"))
    check("a config.pbtxt that does not fit the artifact fails its load, naming the field",
          e is not None and "input 'x': data_type TYPE_INT32, the artifact's is TYPE_FP32" in str(e), str(e))
    e = error_of(lambda: http.load_model("gather_badmax"))
    check("a max_batch_size that no entry accepts fails the load",
          e is not None and "max_batch_size 3: no entry accepts a batch of 3 (entries: N=1; N=4)" in str(e), str(e))
    check_outputs("after the failed loads the other models keep serving", infer(th, http, "cls", cls["inputs"]),
                  cls_out, 1e-4)

    # --- load, unload, reload -----------------------------------------------------------------
    samples = []
    for cycle in range(CYCLES):
        http.unload_model("cls", unload_dependents=False)
        while http.is_model_ready("cls"):
            time.sleep(0.05)
        http.load_model("cls")
        infer(th, http, "cls", cls["inputs"])
        # After a warm-up (glibc's malloc arenas: MALLOC_ARENA_MAX above).
        if cycle in (3, CYCLES - 1):
            samples.append((server.rss_kib(), server.open_files()))
    (rss0, fds0), (rss1, fds1) = samples
    if sanitized:
        check(f"{CYCLES} unload/load cycles: open files stable after warm-up (memory: not under ASan)",
              fds1 <= fds0 + 2, f"open files {fds0} -> {fds1}")
    else:
        check(f"{CYCLES} unload/load cycles: memory and open files stable after warm-up",
              rss1 - rss0 <= 16 * 1024 and fds1 <= fds0 + 2,
              f"RSS {rss0} -> {rss1} KiB, open files {fds0} -> {fds1}")
    check_outputs("the reloaded model answers", infer(tg, grpc, "cls", cls["inputs"]), cls_out, 1e-4)
    http.close()
    grpc.close()


if __name__ == "__main__":
    sys.exit(main())
