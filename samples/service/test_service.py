"""End-to-end test of the service sample on Silero VAD (run by check.sh).

  python test_service.py SERVICE_BINARY MODEL.kiln MODEL.onnx

Starts the service on a free loopback port, sends concurrent valid requests in both body formats
and checks every answer against onnxruntime on the same inputs, sends malformed requests of each
kind and checks status and message, checks /metrics against what was sent, then stops the service
with SIGTERM while a request is in flight and checks that the request completes and the exit
status is 0. A second service with one context checks the 503 of a request that finds no free
context within --wait-ms. Exits nonzero with the first failure's description.
"""
import io
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import numpy as np
import onnxruntime as ort

CLIENTS, PER_CLIENT = 8, 20
CONTEXTS = 2
MAX_BODY = 16 << 20
ATOL, RTOL = 1e-4, 1e-3  # as tests/e2e
SEQ = 576  # 512 new samples + 64 of context, the 16 kHz chunk the artifact's entry accepts

# Loopback only: no proxy from the environment may see these requests.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
sent = Counter()  # HTTP status -> responses the test received, to compare with /metrics
sent_lock = threading.Lock()


def fail(msg):
    print(f"test_service: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def request(url, body=None, content_type=None, method=None, timeout=60):
    """(status, headers, body bytes); counts the status."""
    headers = {"Content-Type": content_type} if content_type else {}
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with OPENER.open(req, timeout=timeout) as r:
            status, hdrs, data = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, data = e.code, e.headers, e.read()
    with sent_lock:
        sent[status] += 1
    return status, hdrs, data


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def multipart(parts):
    """A multipart/form-data body with one part per (name, bytes)."""
    boundary = "test%032x" % random.getrandbits(128)
    body = b""
    for name, data in parts.items():
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{name}.npy"\r\n'
                 f"Content-Type: application/x-npy\r\n\r\n").encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def parse_multipart(body, content_type):
    boundary = re.search(r"boundary=(\S+)", content_type).group(1).encode()
    out = {}
    for chunk in body.split(b"--" + boundary)[1:-1]:
        head, _, data = chunk.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]+)"', head).group(1).decode()
        assert data.endswith(b"\r\n")
        out[name] = np.load(io.BytesIO(data[:-2]))
    return out


def json_body(inputs):
    return json.dumps({"inputs": {k: {"dtype": str(v.dtype), "shape": list(v.shape), "data": v.ravel().tolist()}
                                  for k, v in inputs.items()}}).encode()


def make_inputs(rng, batch, seq=SEQ):
    return {"input": rng.uniform(-1, 1, (batch, seq)).astype(np.float32),
            "state": (0.5 * rng.standard_normal((2, batch, 128))).astype(np.float32),
            "sr": np.array(16000, np.int64)}


def infer(base, inputs, fmt):
    """Sends one inference; returns (status, outputs dict or error message)."""
    if fmt == "json":
        status, hdrs, data = request(base + "/v1/infer", json_body(inputs), "application/json")
        if status != 200:
            return status, json.loads(data)["error"]
        doc = json.loads(data)["outputs"]
        return status, {k: np.array(v["data"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in doc.items()}
    body, ct = multipart({k: npy_bytes(v) for k, v in inputs.items()})
    status, hdrs, data = request(base + "/v1/infer", body, ct)
    if status != 200:
        return status, json.loads(data)["error"]
    return status, parse_multipart(data, hdrs["Content-Type"])


def check_outputs(session, inputs, got, what):
    want = dict(zip(["output", "stateN"], session.run(["output", "stateN"], inputs)))
    if sorted(got) != sorted(want):
        fail(f"{what}: outputs {sorted(got)}, expected {sorted(want)}")
    for name, w in want.items():
        g = got[name]
        if g.dtype != w.dtype or g.shape != w.shape:
            fail(f"{what}: {name} is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}")
        if not np.allclose(g, w, atol=ATOL, rtol=RTOL):
            fail(f"{what}: {name} differs from onnxruntime by up to {np.max(np.abs(g - w)):.3g}")


def start(binary, artifact, contexts=CONTEXTS, extra=()):
    proc = subprocess.Popen([binary, artifact, "--port", "0", "--contexts", str(contexts), "--threads-per-context", "1",
                             "--max-body-bytes", str(MAX_BODY), *extra], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not m:
        proc.kill()
        fail(f"the service did not start: {line!r}")
    base = m.group(1)
    deadline = time.time() + 10
    while True:  # the port is open once the line is printed; /healthz must say so
        try:
            status, _, data = request(base + "/healthz", timeout=2)
            if status == 200 and data == b"ok":
                return proc, base
        except OSError:
            pass
        if time.time() > deadline:
            fail("/healthz did not answer 200 'ok' within 10 s")
        time.sleep(0.05)


def concurrent_inference(base, session):
    latencies, errors = [], []

    def client(k):
        rng = np.random.default_rng(k)
        for i in range(PER_CLIENT):
            inputs = make_inputs(rng, batch=1 + (k + i) % 3)
            fmt = "json" if (k + i) % 2 == 0 else "npy"
            t = time.perf_counter()
            status, got = infer(base, inputs, fmt)
            latencies.append(time.perf_counter() - t)
            if status != 200:
                errors.append(f"client {k} request {i} ({fmt}): {status} {got}")
            else:
                got_inputs.append((inputs, got, f"client {k} request {i} ({fmt})"))

    got_inputs = []
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        fail(errors[0])
    for inputs, got, what in got_inputs:
        check_outputs(session, inputs, got, what)
    lat = sorted(latencies)
    n = len(lat)
    print(f"test_service: {n} requests from {CLIENTS} clients x {PER_CLIENT} over {CONTEXTS} contexts in {wall:.2f} s "
          f"({n / wall:.0f}/s), latency median {1e3 * lat[n // 2]:.1f} ms, p90 {1e3 * lat[n * 9 // 10]:.1f} ms, "
          f"max {1e3 * lat[-1]:.1f} ms; all match onnxruntime")
    return n


def malformed(base):
    """Sends each kind of bad request; returns how many of them reached Run (the 422s)."""
    rng = np.random.default_rng(99)
    good = make_inputs(rng, 1)
    short = dict(good, input=good["input"][:, :100])
    mismatched = dict(good, state=np.zeros((2, 2, 128), np.float32))
    js = lambda inputs: json.loads(json_body(inputs))
    no_sr = js(good)
    del no_sr["inputs"]["sr"]
    renamed = js(good)
    renamed["inputs"]["audio"] = renamed["inputs"].pop("input")
    int32_sr = js(good)
    int32_sr["inputs"]["sr"]["dtype"] = "int32"
    long_shape = js(good)
    long_shape["inputs"]["input"]["data"].pop()
    stringy = js(good)
    stringy["inputs"]["input"]["data"][3] = "x"
    npy_parts = {k: npy_bytes(v) for k, v in good.items()}
    J = "application/json"
    cases = [
        # (what, method, path, body, content type, status, distinctive part of the message)
        ("bad JSON", "POST", "/v1/infer", b'{"inputs": ]', J, 400, "parse error at line 1, column 12"),
        ("unknown input", "POST", "/v1/infer", json.dumps(renamed).encode(), J, 400, "unknown input 'audio'"),
        ("missing input", "POST", "/v1/infer", json.dumps(no_sr).encode(), J, 400, "missing input 'sr'"),
        ("wrong dtype", "POST", "/v1/infer", json.dumps(int32_sr).encode(), J, 400,
         "input 'sr': dtype int32, the model expects int64"),
        ("data length", "POST", "/v1/infer", json.dumps(long_shape).encode(), J, 400,
         "input 'input': shape [1, 576] has 576 elements, the data has 575"),
        ("element type", "POST", "/v1/infer", json.dumps(stringy).encode(), J, 400,
         "inputs.input.data[3]: expected a number"),
        ("npy garbage", "POST", "/v1/infer", *multipart(dict(npy_parts, sr=b"not npy")), 400,
         "input 'sr': .npy: not a .npy file"),
        ("npy big-endian", "POST", "/v1/infer", *multipart(dict(npy_parts, input=npy_bytes(good["input"].astype(">f4")))),
         400, "big-endian"),
        ("npy wrong dtype", "POST", "/v1/infer", *multipart(dict(npy_parts, input=npy_bytes(good["input"].astype("<f8")))),
         400, "input 'input': dtype float64, the model expects float32"),
        ("npy truncated", "POST", "/v1/infer", *multipart(dict(npy_parts, state=npy_parts["state"][:-3])), 400,
         "input 'state': .npy: truncated: shape [2, 1, 128] of float32 needs 1024 data bytes but the file has 1021"),
        ("prologue: sequence", "POST", "/v1/infer", json_body(short), J, 422, "input 'input' dim 1"),
        ("prologue: batch", "POST", "/v1/infer", *multipart({k: npy_bytes(v) for k, v in mismatched.items()}), 422,
         "input 'state' dim 1"),
        ("too large", "POST", "/v1/infer", b" " * (MAX_BODY + 1), J, 413, f"over the limit of {MAX_BODY} bytes"),
        ("too large, chunked", "POST", "/v1/infer", iter([b" " * (1 << 16)] * (MAX_BODY // (1 << 16) + 1)), J, 413,
         f"request body is over the limit of {MAX_BODY} bytes"),
        ("too large, chunked", "PUT", "/healthz", iter([b" " * (1 << 16)] * (MAX_BODY // (1 << 16) + 1)), J, 413,
         f"request body is over the limit of {MAX_BODY} bytes"),
        ("media type", "POST", "/v1/infer", b"{}", "text/plain", 415, "send application/json or multipart/form-data"),
        ("unknown path", "GET", "/v2/models", None, None, 404, "no route for GET /v2/models"),
        ("wrong method", "GET", "/v1/infer", None, None, 405, "method GET is not allowed on /v1/infer"),
        ("wrong method", "DELETE", "/metrics", None, None, 405, "method DELETE is not allowed on /metrics"),
        ("wrong method", "POST", "/healthz", b"{}", J, 405, "method POST is not allowed on /healthz"),
        ("unknown path", "POST", "/v1/infer/x", b"{}", J, 404, "no route for POST /v1/infer/x"),
    ]
    for what, method, path, body, ct, want_status, want_text in cases:
        status, hdrs, data = request(base + path, body, ct, method=method)
        try:
            message = json.loads(data)["error"]
        except (ValueError, KeyError):
            fail(f"{what}: body is not {{\"error\": ...}}: {data[:200]!r}")
        if status != want_status or want_text not in message:
            fail(f"{what}: got {status} {message!r}, expected {want_status} with {want_text!r}")
        if status == 405 and not hdrs.get("Allow"):
            fail(f"{what}: 405 without an Allow header")
    # Never a crash, always a 4xx: every prefix-cut of a valid JSON body and of a .npy part.
    valid = json_body(good)
    npy_body, npy_ct = multipart(npy_parts)
    for cut in sorted(random.Random(5).sample(range(len(valid)), 40)):
        status, _, data = request(base + "/v1/infer", valid[:cut], J)
        if not 400 <= status < 500:
            fail(f"JSON body cut at byte {cut}: status {status} {data[:200]!r}")
    for cut in sorted(random.Random(6).sample(range(len(npy_parts["sr"])), 20)):
        status, _, data = request(base + "/v1/infer", *multipart(dict(npy_parts, sr=npy_parts["sr"][:cut])))
        if not 400 <= status < 500:
            fail(f".npy part cut at byte {cut}: status {status} {data[:200]!r}")
    print(f"test_service: {len(cases)} malformed requests got their status and message; "
          f"60 truncated bodies got 4xx")
    return sum(1 for c in cases if c[5] == 422)


def metric_values(text):
    values, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
        elif line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values, typed


def check_metrics(base, ok_runs, refused_runs):
    with sent_lock:
        expected_http = dict(sent)  # the /metrics request itself is counted after its body is made
    status, hdrs, data = request(base + "/metrics")
    if status != 200 or not hdrs["Content-Type"].startswith("text/plain; version=0.0.4"):
        fail(f"/metrics: {status} {hdrs['Content-Type']}")
    values, typed = metric_values(data.decode())
    want = {
        "kiln_run_calls_total": ok_runs + refused_runs,
        "kiln_cache_hits_total": ok_runs,
        "kiln_cache_misses_total": refused_runs,
        "kiln_computation_seconds_count": ok_runs,
        "kiln_prologue_seconds_count": ok_runs,
        "kiln_run_seconds_count": ok_runs + refused_runs,
        'kiln_run_seconds_bucket{le="+Inf"}': ok_runs + refused_runs,
        "kiln_contexts": CONTEXTS,
        "kiln_contexts_busy": 0,
    }
    want.update({f'kiln_http_requests_total{{code="{c}"}}': n for c, n in expected_http.items()})
    for name, v in want.items():
        if values.get(name) != v:
            fail(f"/metrics: {name} = {values.get(name)}, expected {v}")
    entry_hits = sum(v for k, v in values.items() if k.startswith("kiln_entry_hits_total{"))
    if entry_hits != ok_runs:
        fail(f"/metrics: kiln_entry_hits_total sums to {entry_hits}, expected {ok_runs}")
    codes = {k for k in values if k.startswith("kiln_http_requests_total{")}
    if len(codes) != len(expected_http):
        fail(f"/metrics: codes {sorted(codes)}, expected {sorted(expected_http)}")
    buckets = [v for k, v in values.items() if k.startswith("kiln_computation_seconds_bucket")]
    if buckets != sorted(buckets) or not 0 < values["kiln_computation_seconds_sum"] < 60:
        fail(f"/metrics: kiln_computation_seconds buckets {buckets}, sum {values['kiln_computation_seconds_sum']}")
    for family in ["kiln_run_calls_total", "kiln_cache_hits_total", "kiln_computation_seconds", "kiln_http_requests_total",
                   "kiln_contexts_busy"]:
        if family not in typed:
            fail(f"/metrics: no TYPE line for {family}")
    print(f"test_service: /metrics counts match ({ok_runs} hits, {refused_runs} misses, "
          f"{sum(expected_http.values())} HTTP responses by code)")


def slow_request(base, batch=3000):
    """Starts a request whose Run takes some 100s of ms (at batch 3000) and returns once it holds a
    context: (its inputs, its thread, a dict that gets "response" and "at", the time it came)."""
    inputs = make_inputs(np.random.default_rng(7), batch=batch)
    result = {}

    def slow():
        result["response"] = infer(base, inputs, "npy")
        result["at"] = time.perf_counter()

    t = threading.Thread(target=slow)
    t.start()
    deadline = time.time() + 20
    while True:
        _, _, data = request(base + "/metrics")
        if metric_values(data.decode())[0]["kiln_contexts_busy"] >= 1:
            return inputs, t, result
        if time.time() > deadline or not t.is_alive():
            fail("the slow request never showed as busy in /metrics")
        time.sleep(0.002)


def busy_pool(binary, artifact):
    """With its one context lent, a service with --wait-ms 50 answers 503 and Retry-After.
    The slow request must still hold the context 50 ms after the second one came, which no
    batch size guarantees on every machine: where the second got its answer (200) because the
    first had ended, the first is made 4 times longer and the pair tried again."""
    proc, base = start(binary, artifact, contexts=1, extra=("--wait-ms", "50", "--max-body-bytes", str(1 << 28)))
    try:
        for batch in (3000, 12000, 48000):
            _, t, result = slow_request(base, batch)
            status, hdrs, data = request(base + "/v1/infer", json_body(make_inputs(np.random.default_rng(8), 1)),
                                         "application/json")
            t.join(60)
            if result.get("response", (None,))[0] != 200:
                fail(f"busy pool: the slow request got {result.get('response')}")
            if status == 200:  # the context came free within 50 ms: only after the slow request ended
                if "error" in json.loads(data):
                    fail(f"busy pool: got 200 with an error: {data!r}")
                print(f"test_service: busy pool: the slow request of batch {batch} ended within 50 ms of the next; "
                      f"trying a longer one")
                continue
            want = "all 1 contexts stayed busy for 50 ms"
            if status != 503 or want not in json.loads(data)["error"] or hdrs.get("Retry-After") != "1":
                fail(f"busy pool: got {status} {data!r} Retry-After {hdrs.get('Retry-After')}, expected 503 with "
                     f"{want!r}")
            break
        else:
            fail("busy pool: no slow request held its context for 50 ms (batch up to 48000)")
    finally:
        proc.kill()
        proc.wait()
    print("test_service: a request finding no free context within --wait-ms got 503")


def graceful_shutdown(proc, base, session):
    inputs, t, result = slow_request(base)  # in flight: it holds a context
    proc.send_signal(signal.SIGTERM)
    signalled = time.perf_counter()
    refused = False
    for _ in range(200):  # the listening socket closes at once
        try:
            request(base + "/healthz", timeout=1)
        except OSError:
            refused = True
            break
        time.sleep(0.01)
    t.join(30)
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("the service did not exit within 15 s of SIGTERM")
    if not refused:
        fail("the service kept accepting connections after SIGTERM")
    status, got = result.get("response", (None, None))
    if status != 200:
        fail(f"the in-flight request got {status} {got}")
    check_outputs(session, inputs, got, "in-flight request")
    if code != 0:
        fail(f"exit status {code} after SIGTERM")
    print(f"test_service: SIGTERM: new connections refused, the in-flight request completed "
          f"{1e3 * (result['at'] - signalled):.0f} ms after the signal and matches onnxruntime, exit 0")


def main():
    binary, artifact, onnx_model = sys.argv[1:4]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_model, opts, providers=["CPUExecutionProvider"])
    proc, base = start(binary, artifact)
    try:
        ok_runs = concurrent_inference(base, session)
        refused_runs = malformed(base)
        check_metrics(base, ok_runs, refused_runs)
        graceful_shutdown(proc, base, session)
    finally:
        if proc.poll() is None:
            proc.kill()
    busy_pool(binary, artifact)
    print("test_service: PASS")


if __name__ == "__main__":
    main()
