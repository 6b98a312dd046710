#!/usr/bin/env python3
"""Kiln's CPU backend against onnxruntime's CPU provider, and OpenVINO's CPU plugin when it is
installed, on real models, side by side.

    build/venv/bin/pip install openvino==2026.4.1     # optional: the OpenVINO columns
    build/venv/bin/python benchmarks/compare.py [--threads 1,2] [--rounds 3] [--seconds 1.5] [DIR ...]

Each DIR holds model.onnx and test_data_set_0/input_N.pb (ONNX's test layout). Without DIRs:
every folder of build/testdata/ (scripts/test.sh makes them), of ../shared/models/ beside the
checkout when it exists, and ONNX's light ResNet-50 (build/onnx-tests/light-cases/resnet50/).
A folder whose model.onnx is byte-identical to an earlier one's is skipped.

For each model:
  1. `kiln compile model.onnx -o WORK/NAME.kiln --arch none -q`, unless the artifact is newer
     than both the model and the kiln binary. With `--arch ARCHS` (`default`: kiln compile's
     default GPU archs), that artifact instead, WORK/NAME.ARCHS.kiln: the CPU runs the plan a
     GPU artifact carries for it, to compare with a CPU-only one.
  2. Outputs agree: `kiln run --device cpu` and onnxruntime on test_data_set_0's inputs, every
     output within np.allclose's rule (atol 1e-4, rtol 1e-3; scripts/compare_outputs.py).
     A model whose outputs disagree is reported and not timed. A quantized model (QuantizeLinear,
     DynamicQuantizeLinear, the QLinear and Integer ops) outside that rule is held to the
     quantization's own bound instead (quantized_agreement; docs/quantization.md).
  3. For each thread count T: R rounds in this order, each one Kiln block,
     `kiln bench ART --device cpu --threads T --warmup W --iterations N --json`, then one
     onnxruntime block in this process (intra_op_num_threads T, inter_op_num_threads 1,
     sequential, default graph optimisation ORT_ENABLE_ALL): W warm-up calls, then N calls of
     session.run, each timed with time.perf_counter_ns. N is chosen so that a block takes about
     --seconds (from a short probe of both, 10 <= N <= 1000), W = N/10 (2 to 50).
     With OpenVINO (PyPI `openvino`; its CPU plugin, INFERENCE_NUM_THREADS T, one stream,
     PERFORMANCE_HINT LATENCY, INFERENCE_PRECISION_HINT f32), one OpenVINO block follows, timed the same way around
     InferRequest.infer; its outputs are checked against onnxruntime's first, by the same rule.
     A tool's figure is the median over the rounds of its round's median (p50) latency.
     Kiln's latency is kiln bench's: wall time of Run, outputs left in the context's memory;
     onnxruntime's includes its Python binding and the outputs' numpy arrays (a few
     microseconds per call, which matters only for the tiniest models).

Prints a markdown table (model, input shapes, T, Kiln, onnxruntime and OpenVINO p50, ratios
Kiln/ORT and Kiln/OpenVINO with > 1 meaning Kiln is slower, outputs agree, target) and a line naming the machine, the date,
onnxruntime's version and Kiln's commit; writes it to --markdown and every figure to --json.
Targets: Kiln within 1.5x of onnxruntime on every real model, within 2x on ONNX's light models
(ResNet-50). Progress goes to stderr. Exit status: 0 every model compared and timed, 1 some
model failed to compile or run or its outputs disagree, or a folder given lacks model.onnx or
test_data_set_0/ (a row says which), 2 setup error (missing module or kiln).
"""
import argparse
import datetime
import gc
import glob
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import compare_outputs  # noqa: E402  (scripts/compare_outputs.py: TensorProto reader, allclose rule)

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
except ImportError as e:
    print(f"error: {e}; run this script with the project's venv, build/venv/bin/python "
          "(scripts/test.sh makes it)", file=sys.stderr)
    sys.exit(2)

try:  # optional: the OpenVINO columns
    import openvino as ov
except ImportError:
    ov = None

ATOL, RTOL = 1e-4, 1e-3
TARGET_REAL, TARGET_LIGHT = 1.5, 2.0  # Kiln/ORT ratio the issue asks for
MIN_ITERS, MAX_ITERS = 10, 1000
COMPILE_TIMEOUT_S = 1800
RUN_TIMEOUT_S = 900
KILN_FLAGS = []  # added to every kiln run and kiln bench (--no-onednn, --no-native-code)


def progress(line):
    print(line, file=sys.stderr, flush=True)


def default_dirs():
    dirs = sorted(glob.glob(os.path.join(ROOT, "build", "testdata", "*", "")))
    dirs += sorted(glob.glob(os.path.join(os.path.dirname(ROOT), "shared", "models", "*", "")))
    resnet = os.path.join(ROOT, "build", "onnx-tests", "light-cases", "resnet50")
    return dirs + ([resnet] if os.path.isdir(resnet) else [])


def target_for(model_dir):
    """ONNX's light models (random weights, the issue's ResNet-50) get the looser target."""
    return TARGET_LIGHT if os.path.basename(os.path.dirname(model_dir)) == "light-cases" else TARGET_REAL


class Failure(Exception):
    """A step failed for one model; the message says which and why."""


def kiln_cmd(args, timeout):
    """Runs kiln; raises Failure with the command and its last output lines when it fails."""
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"timed out after {timeout} s: {' '.join(args)}")
    if proc.returncode != 0:
        tail = "\n".join("    | " + line for line in proc.stdout.rstrip().splitlines()[-15:])
        raise Failure(f"exit {proc.returncode}: {' '.join(args)}\n{tail}")
    return proc.stdout


def load_inputs(model_path, set_dir):
    """The test set's inputs as {graph input name: array}, in the graph's input order
    (initializers that are also listed as inputs are not runtime inputs)."""
    try:
        graph = onnx.load(model_path, load_external_data=False).graph
    except Exception as e:  # protobuf's DecodeError and onnx's own errors
        raise Failure(f"onnx cannot read {model_path}: {e}")
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    feeds = {}
    for n, name in enumerate(names):
        path = os.path.join(set_dir, f"input_{n}.pb")
        try:
            feeds[name] = numpy_helper.to_array(onnx.load_tensor(path))
        except Exception as e:
            raise Failure(f"cannot read input {n} ('{name}') of {len(names)} from {path}: {e}")
    return feeds


def shape_text(feeds):
    return ", ".join("x".join(map(str, a.shape)) if a.shape else "scalar" for a in feeds.values())


def ort_session(model_path, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3  # errors only: not one warning per initializer listed as an input
    try:
        return ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise Failure(f"onnxruntime cannot load {model_path}: {e}")


def check_outputs(kiln, art, set_dir, out_dir, session, feeds):
    """Kiln's outputs against onnxruntime's on the same inputs; returns a dict with "ok"."""
    shutil.rmtree(out_dir, ignore_errors=True)
    kiln_cmd([kiln, "run", art, "--inputs", set_dir, "--outputs", out_dir, "--device", "cpu"] + KILN_FLAGS,
             RUN_TIMEOUT_S)
    try:
        wants = session.run(None, feeds)
    except Exception as e:
        raise Failure(f"onnxruntime cannot run the model on {set_dir}: {e}")
    result = {"ok": True, "max_abs": 0.0, "worst_ratio": 0.0, "outputs": []}
    for i, (meta, want) in enumerate(zip(session.get_outputs(), wants)):
        want = np.asarray(want)
        entry = {"index": i, "name": meta.name, "dtype": str(want.dtype), "shape": list(want.shape)}
        try:
            _, dtype, dims, got = compare_outputs.read_tensor(os.path.join(out_dir, f"output_{i}.pb"))
        except (OSError, compare_outputs.TensorError) as e:
            entry.update(ok=False, error=f"cannot read Kiln's output_{i}.pb: {e}")
        else:
            if (dtype, list(dims)) != (str(want.dtype), list(want.shape)):
                entry.update(ok=False, error=f"Kiln gave {dtype}{list(dims)}")
            else:
                ok, max_abs, ratio, _, where = compare_outputs.compare(
                    got, want.astype(np.float64).ravel(), ATOL, RTOL)
                entry.update(ok=ok, max_abs=max_abs, worst_ratio=ratio)
                result["max_abs"] = max(result["max_abs"], max_abs)
                result["worst_ratio"] = max(result["worst_ratio"], ratio)
        result["ok"] = result["ok"] and entry["ok"]
        result["outputs"].append(entry)
    return result


QUANTIZED_OPS = {"QuantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger",
                 "ConvInteger"}


def quantized_model(model_path):
    return any(n.op_type in QUANTIZED_OPS for n in onnx.load(model_path, load_external_data=False).graph.node)


def quantized_agreement(model_path, model_dir, out_dir, feeds, agree):
    """The accuracy rule of a quantized model (docs/quantization.md), where Kiln's outputs are
    outside the allclose rule against onnxruntime's: a flipped rounding moves a value by a whole
    quantization step. With the float model it was made from (FLOAT_MODEL.txt, written by
    benchmarks/quantize.py), Kiln's error against that float model's onnxruntime outputs must be
    no larger than onnxruntime's own quantized outputs' (rms within 10%, max within 50%). Without,
    Kiln's max abs error against onnxruntime's unoptimised session must be at most the one that
    onnxruntime's optimised session shows against it."""
    def session(path, level):
        opts = ort.SessionOptions()
        opts.graph_optimization_level = level
        opts.log_severity_level = 3
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    def kiln_outputs(n):
        return [np.asarray(compare_outputs.read_tensor(os.path.join(out_dir, f"output_{i}.pb"))[3], dtype=np.float64)
                for i in range(n)]

    noopt = session(model_path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)
    got = kiln_outputs(len(noopt))
    result = dict(agree, ok=True, outputs=[])
    float_ref = os.path.join(model_dir, "FLOAT_MODEL.txt")
    if os.path.exists(float_ref):
        with open(float_ref) as f:
            float_model = os.path.join(model_dir, f.read().strip(), "model.onnx")
        ref = session(float_model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)
        result["rule"] = "error against the float model at most onnxruntime's (rms 1.1x, max 1.5x)"
        for i, (g, r, o) in enumerate(zip(got, ref, noopt)):
            r, o = np.asarray(r, np.float64).ravel(), np.asarray(o, np.float64).ravel()
            k_max, o_max = float(np.abs(g - r).max()), float(np.abs(o - r).max())
            k_rms, o_rms = float(np.sqrt(np.mean((g - r) ** 2))), float(np.sqrt(np.mean((o - r) ** 2)))
            ok = k_rms <= 1.1 * o_rms + 1e-6 and k_max <= 1.5 * o_max + 1e-6
            result["outputs"].append({"index": i, "ok": ok, "kiln_max_vs_float": k_max, "ort_max_vs_float": o_max,
                                      "kiln_rms_vs_float": k_rms, "ort_rms_vs_float": o_rms})
            result["ok"] = result["ok"] and ok
        return result
    opt = session(model_path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL).run(None, feeds)
    result["rule"] = "max abs error at most onnxruntime's optimised session's against its unoptimised one"
    for i, (g, o, p) in enumerate(zip(got, noopt, opt)):
        o, p = np.asarray(o, np.float64).ravel(), np.asarray(p, np.float64).ravel()
        k_max, bound = float(np.abs(g - o).max()), max(ATOL, float(np.abs(p - o).max()))
        result["outputs"].append({"index": i, "ok": k_max <= bound, "kiln_max": k_max, "bound": bound})
        result["ok"] = result["ok"] and k_max <= bound
    return result


def kiln_bench(kiln, art, set_dir, threads, warmup, iters, json_path):
    kiln_cmd([kiln, "bench", art, "--inputs", set_dir, "--device", "cpu", "--threads", str(threads),
              "--warmup", str(warmup), "--iterations", str(iters), "--json", json_path] + KILN_FLAGS,
             RUN_TIMEOUT_S)
    with open(json_path) as f:
        return json.load(f)


def ort_block(session, feeds, warmup, iters):
    """Per-call latencies (ms) of `iters` calls after `warmup` untimed ones, summarised."""
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            session.run(None, feeds)
            times.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        if gc_was_enabled:
            gc.enable()
    q = np.percentile(times, [50, 90, 99], method="inverted_cdf")  # nearest rank, as kiln bench
    return {"min": min(times), "p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]),
            "max": max(times), "mean": statistics.fmean(times)}


def ov_model(model_path, threads):
    """OpenVINO's CPU plugin on the model at `threads`, latency-tuned, one stream; or the reason
    it cannot take the model (its row then has no OpenVINO figure, and Kiln's still counts)."""
    try:
        # float32 as the others: on a CPU with AVX512-BF16 or AMX, OpenVINO computes in bfloat16 by default.
        compiled = ov.Core().compile_model(model_path, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                                "PERFORMANCE_HINT": "LATENCY",
                                                                "INFERENCE_PRECISION_HINT": "f32"})
        return compiled.create_infer_request(), None
    except Exception as e:  # OpenVINO raises RuntimeError and its own types
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return None, next((line for line in lines if line.startswith("-- ") or "failed for" in line), lines[-1:] or "")


def ov_agrees(request, session, feeds):
    """OpenVINO's outputs against onnxruntime's, by the allclose rule; (ok, worst error/tolerance)."""
    try:
        got = request.infer(feeds)
    except Exception as e:
        raise Failure(f"OpenVINO cannot run the model: {e}")
    worst, ok = 0.0, True
    for i, want in enumerate(session.run(None, feeds)):
        g = np.asarray(got[request.model_outputs[i]])
        want = np.asarray(want)
        if g.shape != want.shape:
            return False, float("inf")
        c_ok, _, ratio, _, _ = compare_outputs.compare(g.astype(np.float64).ravel(), want.astype(np.float64).ravel(),
                                                       ATOL, RTOL)
        ok, worst = ok and c_ok, max(worst, ratio)
    return ok, worst


def ov_block(request, feeds, warmup, iters):
    """As ort_block, around InferRequest.infer."""
    class Adapter:
        def run(self, _, inputs):
            return request.infer(inputs)
    return ort_block(Adapter(), feeds, warmup, iters)


def time_model(args, name, art, set_dir, session, feeds, threads, ov_request=None):
    """Alternating Kiln / onnxruntime rounds at one thread count; returns the run's record."""
    bench_json = os.path.join(args.work, f"{name}.t{threads}.bench.json")
    probe_k = kiln_bench(args.kiln, art, set_dir, threads, 1, 3, bench_json)["latency_ms"]["p50"]
    probe_o = ort_block(session, feeds, 2, 3)["p50"]
    per_call_s = max(probe_k, probe_o, 1e-3) / 1e3
    iters = max(MIN_ITERS, min(MAX_ITERS, round(args.seconds / per_call_s)))
    warmup = max(2, min(50, iters // 10))
    kiln_rounds, ort_rounds, ov_rounds = [], [], []
    for r in range(args.rounds):
        progress(f"  T={threads} round {r + 1}/{args.rounds}: {iters} calls each "
                 f"(+{warmup} warm-up)")
        kiln_rounds.append(kiln_bench(args.kiln, art, set_dir, threads, warmup, iters, bench_json))
        ort_rounds.append(ort_block(session, feeds, warmup, iters))
        if ov_request is not None:
            ov_rounds.append(ov_block(ov_request, feeds, warmup, iters))
    kiln_p50 = statistics.median(b["latency_ms"]["p50"] for b in kiln_rounds)
    ort_p50 = statistics.median(b["p50"] for b in ort_rounds)
    ov_p50 = statistics.median(b["p50"] for b in ov_rounds) if ov_rounds else None
    return {"threads": threads, "iterations": iters, "warmup": warmup,
            "kiln_p50_ms": kiln_p50, "ort_p50_ms": ort_p50, "ratio": kiln_p50 / ort_p50,
            "ov_p50_ms": ov_p50, "ov_ratio": kiln_p50 / ov_p50 if ov_p50 else None,
            "kiln_rounds": kiln_rounds, "ort_rounds": ort_rounds, "ov_rounds": ov_rounds}


def compile_artifact(kiln, model, art, arch):
    """Compiles for GPU archs `arch` ("none", "default" or a list) unless the artifact is newer
    than the model and the kiln binary; returns 'reused' or the compile time."""
    if os.path.isfile(art) and os.path.getmtime(art) > max(os.path.getmtime(model),
                                                         os.path.getmtime(kiln)):
        return "reused"
    t0 = time.monotonic()
    archs = [] if arch == "default" else ["--arch", arch]
    kiln_cmd([kiln, "compile", model, "-o", art, *archs, "-q"], COMPILE_TIMEOUT_S)
    return f"{time.monotonic() - t0:.1f} s"


def run_model(args, model_dir, name, record):
    """Fills record (one model's entry of the JSON); raises Failure when a step fails."""
    model = os.path.join(model_dir, "model.onnx")
    set_dir = os.path.join(model_dir, "test_data_set_0")
    art = os.path.join(args.work, f"{name}.kiln" if args.arch == "none" else f"{name}.{args.arch}.kiln")
    feeds = load_inputs(model, set_dir)
    record["input_shapes"] = shape_text(feeds)
    record["status"] = "compile failed"
    progress(f"  compile: {compile_artifact(args.kiln, model, art, args.arch)}")
    record["status"] = "error"
    sessions = {t: ort_session(model, t) for t in args.threads}
    agree = check_outputs(args.kiln, art, set_dir, os.path.join(args.work, f"{name}.outputs"),
                          sessions[args.threads[0]], feeds)
    record["agree"] = agree
    progress(f"  outputs {'agree' if agree['ok'] else 'DISAGREE'}: max abs error "
             f"{agree['max_abs']:.3g}, worst error/tolerance {agree['worst_ratio']:.3g}")
    if not agree["ok"] and quantized_model(model):
        agree = quantized_agreement(model, model_dir, os.path.join(args.work, f"{name}.outputs"), feeds, agree)
        record["agree"] = agree
        progress(f"  quantized model: outputs {'agree' if agree['ok'] else 'DISAGREE'} by {agree['rule']}")
    if not agree["ok"]:
        record["status"] = "outputs differ"
        return
    for t in args.threads:
        ov_request = None
        if ov is not None and record.get("ov_agree", {"ok": True})["ok"]:
            ov_request, why = ov_model(model, t)
            if ov_request is None:
                record["ov_agree"] = {"ok": False, "worst_ratio": None, "error": f"OpenVINO cannot compile it: {why}"}
                progress(f"  {record['ov_agree']['error']}")
            elif t == args.threads[0]:
                ok, worst = ov_agrees(ov_request, sessions[t], feeds)
                record["ov_agree"] = {"ok": ok, "worst_ratio": worst}
                progress(f"  OpenVINO outputs {'agree' if ok else 'DISAGREE'} with onnxruntime's: worst "
                         f"error/tolerance {worst:.3g}")
            if not record["ov_agree"]["ok"]:
                ov_request = None  # not timed: no figure, or one that would not be for the same results
        run = time_model(args, name, art, set_dir, sessions[t], feeds, t, ov_request)
        run["meets_target"] = run["ratio"] <= record["target_ratio"]
        record["runs"].append(run)
        progress(f"  T={t}: Kiln {run['kiln_p50_ms']:.4g} ms, onnxruntime {run['ort_p50_ms']:.4g} ms, "
                 f"ratio {run['ratio']:.2f}" + (f"; OpenVINO {run['ov_p50_ms']:.4g} ms, ratio {run['ov_ratio']:.2f}"
                                                if run["ov_p50_ms"] else ""))
    record["status"] = "ok"


def machine_info(kiln, load_at_start):
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    git = ["git", "-C", ROOT]
    commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD"], capture_output=True).returncode != 0
    return {"cpu": cpu, "cores": os.cpu_count(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average_1min": {"start": load_at_start, "end": os.getloadavg()[0]},
            "onnxruntime": ort.__version__, "openvino": ov.__version__ if ov is not None else None,
            "kiln_commit": commit, "kiln_tree_dirty": dirty,
            "kiln": os.path.abspath(kiln), "python": platform.python_version()}


def fmt_ms(x):
    return f"{x:.4g}"


def markdown(machine, settings, records):
    dirty = " (with uncommitted changes)" if machine["kiln_tree_dirty"] else ""
    load = machine["load_average_1min"]
    lines = [f"Machine: {machine['cpu']}, {machine['cores']} cores (load average {load['start']:.1f} "
             f"at the start, {load['end']:.1f} at the end); {machine['date']}; "
             f"onnxruntime {machine['onnxruntime']}; "
             f"{'OpenVINO ' + machine['openvino'].split('-')[0] if machine['openvino'] else 'OpenVINO not installed'}; "
             f"Kiln {machine['kiln_commit']}{dirty}"
             f"{', with ' + ' '.join(settings['kiln_flags']) if settings.get('kiln_flags') else ''}"
             f"{'' if settings.get('kiln_arch', 'none') == 'none' else ', artifacts compiled with --arch ' + settings['kiln_arch']}.",
             f"Latency: median over {settings['rounds']} alternating round(s) of each round's median "
             "per-call latency (one `kiln bench` block, then one onnxruntime block of as many calls).",
             "",
             "| model | input shape(s) | T | Kiln p50 ms | ORT p50 ms | OpenVINO p50 ms | Kiln/ORT | Kiln/OpenVINO "
             "| outputs agree | target |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for rec in records:
        agree = rec.get("agree")
        agree_text = ("yes" if agree["ok"] else f"NO (worst err/tol {agree['worst_ratio']:.3g})") \
            if agree else "-"
        target = f"<= {rec['target_ratio']:g}x"
        if not rec["runs"]:
            lines.append(f"| {rec['name']} | {rec.get('input_shapes', '-')} | - | - | - | - | - | - | "
                         f"{agree_text} | {rec['status']} |")
        for run in rec["runs"]:
            mark = "met" if run["meets_target"] else "MISSED"
            ov_agree = rec.get("ov_agree")
            ov_ms = fmt_ms(run["ov_p50_ms"]) if run.get("ov_p50_ms") else (
                "cannot compile" if ov_agree and "error" in ov_agree else
                "outputs differ" if ov_agree and not ov_agree["ok"] else "-")
            ov_ratio = f"{run['ov_ratio']:.2f}" if run.get("ov_ratio") else "-"
            lines.append(f"| {rec['name']} | {rec['input_shapes']} | {run['threads']} | "
                         f"{fmt_ms(run['kiln_p50_ms'])} | {fmt_ms(run['ort_p50_ms'])} | {ov_ms} | "
                         f"{run['ratio']:.2f} | {ov_ratio} | {agree_text} | {mark} ({target}) |")
    return "\n".join(lines) + "\n"


def parse_threads(text):
    try:
        threads = [int(t) for t in text.split(",")]
    except ValueError:
        threads = []
    if not threads or min(threads) < 1:
        raise argparse.ArgumentTypeError(f"expected a list of positive integers such as 1,2: {text!r}")
    return threads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", help="model folders (default: see above)")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"), help="kiln binary (default build/kiln)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "compare"),
                    help="folder for artifacts and outputs (default build/compare)")
    ap.add_argument("--threads", type=parse_threads, default=[1, 2], help="thread counts (default 1,2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per model and T (default 3)")
    ap.add_argument("--seconds", type=float, default=1.5, help="about how long one block takes (default 1.5)")
    ap.add_argument("--json", help="figures (default WORK/compare.json)")
    ap.add_argument("--markdown", help="the table (default WORK/compare.md)")
    ap.add_argument("--no-onednn", action="store_true",
                    help="Kiln on its own CPU kernels only (kiln run/bench --no-onednn): the before of oneDNN")
    ap.add_argument("--no-native-code", action="store_true",
                    help="Kiln's fused regions interpreted (kiln run/bench --no-native-code): the before of native code")
    ap.add_argument("--arch", default="none",
                    help="GPU archs of Kiln's artifact (kiln compile --arch; 'default': its default archs); "
                         "default none, a CPU-only artifact")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 round of short blocks (0.1 s)")
    args = ap.parse_args()
    if args.no_onednn:
        KILN_FLAGS.append("--no-onednn")
    if args.no_native_code:
        KILN_FLAGS.append("--no-native-code")
    if args.quick:
        args.rounds, args.seconds = 1, 0.1
    if args.rounds < 1 or args.seconds <= 0:
        ap.error("--rounds must be >= 1 and --seconds > 0")
    if not (os.path.isfile(args.kiln) and os.access(args.kiln, os.X_OK)):
        progress(f"error: no kiln binary at {args.kiln} (build it, or give --kiln PATH)")
        return 2
    args.json = args.json or os.path.join(args.work, "compare.json")
    args.markdown = args.markdown or os.path.join(args.work, "compare.md")
    os.makedirs(args.work, exist_ok=True)
    dirs = [os.path.normpath(d) for d in (args.dirs or default_dirs())]
    if not dirs:
        progress("error: no model folders given and none found (run scripts/test.sh)")
        return 2

    load_at_start = os.getloadavg()[0]  # other work on the machine makes timings noisy
    records, seen_models, used_names = [], {}, set()
    for n, model_dir in enumerate(dirs, 1):
        name = os.path.basename(model_dir)
        model = os.path.join(model_dir, "model.onnx")
        progress(f"[{n}/{len(dirs)}] {name} ({model_dir})")
        missing = ("no such folder" if not os.path.isdir(model_dir) else
                   "no model.onnx" if not os.path.isfile(model) else
                   "no test_data_set_0/" if not os.path.isdir(os.path.join(model_dir, "test_data_set_0")) else None)
        if missing:  # a row that says so, and exit status 1
            progress(f"  FAILED: {missing}")
            records.append({"name": name, "dir": os.path.abspath(model_dir), "target_ratio": target_for(model_dir),
                            "status": missing, "runs": []})
            continue
        with open(model, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest in seen_models:
            progress(f"  skipped: same model.onnx as {seen_models[digest]}")
            continue
        seen_models[digest] = model_dir
        if name in used_names:  # same folder name elsewhere: keep artifacts apart
            name = f"{os.path.basename(os.path.dirname(model_dir))}-{name}"
        used_names.add(name)
        record = {"name": name, "dir": os.path.abspath(model_dir), "target_ratio": target_for(model_dir),
                  "status": "error", "runs": []}
        records.append(record)
        try:
            run_model(args, model_dir, name, record)
        except Failure as e:
            record["error"] = str(e)
            progress(f"  FAILED ({record['status']}): {e}")

    settings = {"threads": args.threads, "rounds": args.rounds, "seconds_per_block": args.seconds,
                "kiln_flags": KILN_FLAGS, "kiln_arch": args.arch,
                "atol": ATOL, "rtol": RTOL, "statistic": "median over rounds of each round's p50",
                "ort": {"provider": "CPUExecutionProvider", "inter_op_num_threads": 1,
                        "execution_mode": "ORT_SEQUENTIAL",
                        "graph_optimization_level": ort.SessionOptions().graph_optimization_level.name}}
    machine = machine_info(args.kiln, load_at_start)
    table = markdown(machine, settings, records)
    for path in (args.json, args.markdown):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"machine": machine, "settings": settings, "models": records}, f, indent=1)
    with open(args.markdown, "w") as f:
        f.write(table)
    print(table, end="")
    progress(f"wrote {args.markdown} and {args.json}")
    return 0 if records and all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
