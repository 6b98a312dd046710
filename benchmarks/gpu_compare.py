#!/usr/bin/env python3
"""Kiln against PyTorch eager and torch.compile on ResNet-50, MobileNetV2 and BERT-base.

    python3 benchmarks/gpu_compare.py [--kiln build/kiln] [--device cuda] [--budget 300]
        [--models resnet50,bert,mobilenet_v2] [--batches 1,32] [--dtypes fp32,fp16]
        [--json F] [--markdown F] [--work DIR]

Run by scripts/gpu-check (step 5) on a machine with an NVIDIA GPU and PyTorch (with torchvision
and transformers). Nothing is downloaded: every model is built from its code with random
weights (seeded) in eval mode:
  resnet50      torchvision.models.resnet50(weights=None), input images float[N,3,224,224],
                its BatchNorm statistics measured on random images (see calibrated())
  mobilenet_v2  torchvision.models.mobilenet_v2(weights=None), the same
  bert          transformers.BertModel(BertConfig()) (bert-base: 12 layers, hidden 768),
                inputs input_ids and attention_mask int64[N,128], outputs last_hidden_state
                and pooler_output
Each (model, dtype) is exported once with torch.onnx.export (the TorchScript exporter,
dynamo=False, opset 17, batch axis symbolic; the fp16 file from the model's .half() copy) and
compiled once with `kiln compile --profile` into one artifact with an entry for each batch
size (kernels for the GPU's own arch only). Then, for each row (model, batch, dtype):
  1. outputs: `kiln run` on the row's inputs (saved as NAME.npy) against PyTorch eager. For
     each output, max |kiln - torch| <= tol * max |torch|: the error is measured against the
     output's scale, neither element by element (many outputs of these deep networks are near
     zero after cancellation, where any change of summation order, a cuDNN algorithm or a
     fused kernel, gives a large relative error although the result is right) nor with an
     absolute floor (the outputs' scales differ: logits of about 2, BERT's pooler below 1).
     fp32: tol 1e-3. Both sides use strict fp32 (TF32 off in PyTorch here; Kiln never uses
     it); Kiln's CPU backend was seen at 3e-5 (ResNet-50), 5e-6 (MobileNetV2) and 7e-7
     (BERT) of the scale, and GPU algorithms that reorder sums (Winograd, split-K) may add
     some, while one channel of one BatchNorm scaled by 1.5 (in ResNet-50's layer3, in
     MobileNetV2's features[5]) moves the logits by 2e-2 and 9e-2 of their scale, and a
     wrong kernel by the order of the output itself. fp16: tol 1e-1. PyTorch eager rounds
     every intermediate to fp16 where Kiln's fused kernels may keep fp32, compounded over 12
     to 50 layers: PyTorch's own fp16 ResNet-50 and MobileNetV2 differ from their fp32
     versions by 4e-2 and 2e-2 of the scale; BERT on Kiln's CPU backend was seen at 2e-3 of
     PyTorch's fp16. A wrong fp16 kernel still errs by the order of the output.
  2. Kiln: `kiln bench ART --inputs DIR --device D --warmup W --iterations N --json F`, and
     again with --cuda-graphs (CUDA only). The inputs are host tensors, so Kiln's time
     includes copying them to the GPU; PyTorch's inputs are on the GPU already.
  3. PyTorch eager, under torch.inference_mode().
  4. torch.compile(model, dynamic=False), default mode, compiled afresh for each row (its
     compile time is reported separately and not timed).
  5. torch.compile mode="max-autotune" (`--max-autotune auto`: last, after every other row,
     and only for rows whose estimated cost still fits in the budget; `on`: in each row;
     `off`: never).
Latency: the wall time of one synchronous call (torch.cuda.synchronize after each call,
perf_counter), median (p50) over N calls after W warm-up calls; Kiln's comes from kiln bench.
Throughput: batch * 1000 / p50 ms, samples per second. Ratios use Kiln's best (the smaller of
with and without CUDA graphs). Kiln host us (CUDA only): kiln bench's host_us medians, lookup
(which holds the prologue of the entry that passed, kiln/stats.h) + computation (enqueueing the
input uploads, from pageable host memory, and the kernels; with CUDA graphs, the uploads and the
graph launch), per call.
Targets (batch 1, ResNet-50 and BERT): Kiln >= 3x faster than eager and >= 1.3x faster than
torch.compile (its best mode that ran); Kiln's host time per call with CUDA graphs < 10 us.

Budget: --budget S seconds for everything. The rows run in order of importance (ResNet-50 and
BERT at batch 1 fp32 first, then MobileNetV2, batch 32, fp16, max-autotune), and every step is
run only if its estimated time (its last measured time, or a guess) fits in what is left; a
step that does not is reported as "not run: budget". The JSON and markdown files are rewritten
after every step, so a run killed at its deadline still leaves what it measured.
--device cpu tries the script on a machine without a GPU (Kiln on its CPU backend, PyTorch on
the CPU, no CUDA graphs; fp16 is not run unless --dtypes names it).

Exit status: 0 ran (targets missed or steps skipped for the budget included); 1 some Kiln
output differs from PyTorch's, or Kiln failed on a float32 model (an fp16 failure is reported
as "unsupported"); 2 bad command line; 77 skipped: PyTorch, onnx or every requested model's
package (torchvision, transformers) is missing, or --device cuda without a usable GPU.
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

SKIPPED = 77
SEQ_LEN = 128
MODELS = ("resnet50", "bert", "mobilenet_v2")  # in order of importance
# Output agreement: max |kiln - torch| <= TOLERANCE * max |torch|, per output (see the docstring).
TOLERANCE = {"fp32": 1e-3, "fp16": 1e-1}
# First guesses of each step's seconds on a GPU machine, used until the step has been measured
# once for that model (then its last time is used). max-autotune can take many minutes.
GUESS_S = {"export": 30, "kiln compile": 60, "check": 30, "kiln bench": 30, "eager": 15,
           "compile": 120, "max-autotune": 420}


def log(msg):
    print(f"gpu_compare: {msg}", file=sys.stderr, flush=True)


def kiln_error(command, result):
    """'kiln run: <the first line it printed>' for a failed kiln command."""
    for line in (result.stderr + "\n" + result.stdout).splitlines():
        if line.strip():
            line = line.strip()[:300]
            return line if line.startswith("kiln ") else f"kiln {command}: {line}"
    return f"kiln {command}: exit {result.returncode}, no message"


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "(no message)"


class Budget:
    """Seconds left of --budget, and each step's estimated cost."""

    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds
        self.measured = {}  # (step, model) -> seconds, the last time it ran

    def left(self):
        return self.deadline - time.monotonic()

    def fits(self, step, model):
        return self.left() >= self.measured.get((step, model), GUESS_S[step])

    def record(self, step, model, seconds):
        self.measured[(step, model)] = seconds


class Report:
    """The rows and their cells, written as JSON and markdown after every step."""

    COLUMNS = (("kiln", "Kiln"), ("kiln_graphs", "Kiln+graphs"), ("eager", "eager"),
               ("compile", "compile"), ("max_autotune", "max-autotune"))

    def __init__(self, args, meta):
        self.args = args
        self.meta = meta
        self.rows = []

    def row(self, model, batch, dtype):
        r = {"model": model, "batch": batch, "dtype": dtype, "outputs": {"status": "not run"}}
        for key, _ in self.COLUMNS:
            r[key] = {"status": "not run"}
        self.rows.append(r)
        return r

    @staticmethod
    def best_kiln(r):
        times = [r[k]["p50_ms"] for k in ("kiln", "kiln_graphs") if "p50_ms" in r[k]]
        return min(times) if times else None

    @staticmethod
    def best_compile(r):
        cands = [(r[k]["p50_ms"], k) for k in ("compile", "max_autotune") if "p50_ms" in r[k]]
        return min(cands) if cands else (None, None)

    def targets(self):
        out = []
        for r in self.rows:
            kiln = self.best_kiln(r)
            if r["batch"] == 1 and r["model"] in ("resnet50", "bert"):
                name = f'{r["model"]} batch 1 {r["dtype"]}'
                eager = r["eager"].get("p50_ms")
                comp, which = self.best_compile(r)
                for label, ref, goal in (("Kiln >= 3x faster than eager", eager, 3.0),
                                         (f"Kiln >= 1.3x faster than torch.compile ({which or 'any mode'})",
                                          comp, 1.3)):
                    if kiln is None or ref is None:
                        out.append({"row": name, "target": label, "status": "not measured"})
                    else:
                        ratio = ref / kiln
                        out.append({"row": name, "target": label, "ratio": round(ratio, 3),
                                    "status": "met" if ratio >= goal else "missed"})
            host = r["kiln_graphs"].get("host_us")
            if host is not None:
                out.append({"row": f'{r["model"]} batch {r["batch"]} {r["dtype"]}',
                            "target": "Kiln host time per call with CUDA graphs < 10 us",
                            "host_us": round(host, 2), "status": "met" if host < 10 else "missed"})
        return out

    def markdown(self):
        def cell(c):
            if "p50_ms" not in c:
                return c["status"].replace("|", "/")
            rate = c["samples_per_s"]
            return f'{c["p50_ms"]:.3f} ({rate:.0f}/s)' if rate >= 100 else f'{c["p50_ms"]:.3f} ({rate:.3g}/s)'

        def ratio(num, den):
            return f"{num / den:.2f}x" if num is not None and den is not None else ""

        m = self.meta
        lines = [f'PyTorch {m["torch"]} on {m["device_name"]}; Kiln: {m["kiln"]}. Latency: median ms of '
                 f'{m["iterations"]} synchronous calls after {m["warmup"]} warm-up calls, (samples/s); '
                 f'ratios against Kiln\'s best of with and without CUDA graphs. Kiln\'s calls include '
                 f'uploading their inputs from host memory; PyTorch\'s inputs are on the device already. '
                 f'fp32 is strict (no TF32) on both sides. Outputs agree: max |kiln - torch| <= '
                 f'{TOLERANCE["fp32"]:g} (fp32) or {TOLERANCE["fp16"]:g} (fp16) times max |torch|, per output. '
                 f'Kiln host us: lookup (with the prologue) + computation (enqueueing the input uploads '
                 f'and the kernels, or the graph launch), kiln bench\'s medians.', "",
                 "| model | batch | dtype | outputs agree | " + " | ".join(f"{h} ms" for _, h in self.COLUMNS) +
                 " | eager/Kiln | compile/Kiln | Kiln host us (graphs) |",
                 "|---|---|---|---|" + "---|" * (len(self.COLUMNS) + 3)]
        for r in self.rows:
            kiln = self.best_kiln(r)
            comp, _ = self.best_compile(r)
            host = r["kiln_graphs"].get("host_us", r["kiln"].get("host_us"))
            host_text = "" if host is None else f"{host:.1f}"
            if host is not None and "host_us" not in r["kiln_graphs"]:
                host_text += " (no graphs)"
            agree = r["outputs"]["status"].replace("|", "/")
            lines.append(f'| {r["model"]} | {r["batch"]} | {r["dtype"]} | {agree} | ' +
                         " | ".join(cell(r[k]) for k, _ in self.COLUMNS) +
                         f' | {ratio(r["eager"].get("p50_ms"), kiln)} | {ratio(comp, kiln)} | {host_text} |')
        lines += ["", "Targets:", ""]
        for t in self.targets():
            figure = f' ({t["ratio"]}x)' if "ratio" in t else f' ({t["host_us"]} us)' if "host_us" in t else ""
            lines.append(f'- {t["row"]}: {t["target"]}: **{t["status"]}**{figure}')
        return "\n".join(lines) + "\n"

    def write(self):
        data = {"meta": self.meta, "rows": self.rows, "targets": self.targets()}
        if self.args.json:
            with open(self.args.json + ".tmp", "w") as f:
                json.dump(data, f, indent=1)
            os.replace(self.args.json + ".tmp", self.args.json)
        if self.args.markdown:
            with open(self.args.markdown + ".tmp", "w") as f:
                f.write(self.markdown())
            os.replace(self.args.markdown + ".tmp", self.args.markdown)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    default_kiln = os.path.join(os.environ.get("KILN_BUILD_DIR", os.path.join(here, "..", "build")), "kiln")
    ap.add_argument("--kiln", default=default_kiln, help="the kiln command (default: %(default)s)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--budget", type=float, default=300, help="seconds for everything (default: %(default)s)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, of %s" % ", ".join(MODELS))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--dtypes", default=None, help="fp32,fp16 (default: fp32,fp16 on cuda, fp32 on cpu)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--max-autotune", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--work", help="folder for the ONNX files, artifacts, inputs and outputs "
                    "(default: a temporary folder, removed at the end)")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.dtypes = (args.dtypes or ("fp32,fp16" if args.device == "cuda" else "fp32")).split(",")
    for m in args.models:
        if m not in MODELS:
            ap.error(f"unknown model {m}; known: {', '.join(MODELS)}")
    for d in args.dtypes:
        if d not in TOLERANCE:
            ap.error(f"unknown dtype {d}; known: fp32, fp16")
    if not args.batches or min(args.batches) < 1 or args.warmup < 0 or args.iterations < 1 or args.budget <= 0:
        ap.error("batches and iterations must be positive, warmup not negative, budget positive")
    return args


def import_frameworks(args):
    """Returns (torch, {model: builder module}); exits 77 when nothing can run."""
    try:
        for name in ("numpy", "onnx", "torch"):
            importlib.import_module(name)
    except ImportError as e:
        log(f"skipped: {e.name} is not installed (needs torch, onnx and numpy; torchvision and transformers "
            f"for the models)")
        sys.exit(SKIPPED)
    torch = sys.modules["torch"]
    available = {}
    for model, package in (("resnet50", "torchvision"), ("mobilenet_v2", "torchvision"), ("bert", "transformers")):
        if model not in args.models:
            continue
        try:
            available[model] = importlib.import_module(package)
        except ImportError:
            log(f"{model}: {package} is not installed, left out")
    if not available:
        log("skipped: none of the requested models can be built here")
        sys.exit(SKIPPED)
    if args.device == "cuda" and not torch.cuda.is_available():
        log("skipped: PyTorch sees no CUDA device (--device cpu tries the script on the CPU)")
        sys.exit(SKIPPED)
    return torch, available


def calibrated(torch, net):
    """The network with BatchNorm statistics measured on 16 random images (seeded), in place of
    their initial mean 0 and variance 1. Without this, the activations of these randomly
    initialised networks drift through the layers (ResNet-50's logits reach about 100,
    MobileNetV2's about 3e-9, in fp16 zero, and in fp32 denormal numbers that slow the CPU
    down many times); with it they stay of order 1, as in a trained network."""
    for m in net.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # a plain average over the calibration batch
    images = torch.randn(16, 3, 224, 224).to(next(net.parameters()).device)
    with torch.no_grad():
        net.train()(images)
    return net.eval()


def bert_outputs(torch, bert):
    """BertModel as a module returning (last_hidden_state, pooler_output), plain tensors."""
    class BertOutputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    return BertOutputs()


class Bench:
    def __init__(self, args, torch, builders, report, budget, work):
        self.args, self.torch, self.builders = args, torch, builders
        self.report, self.budget, self.work = report, budget, work
        self.models = {}     # (model, dtype) -> torch module on the device
        self.artifacts = {}  # (model, dtype) -> path, or {"status": ...} when it failed
        self.failed = False
        self.arch = "none"
        if args.device == "cuda":
            major, minor = torch.cuda.get_device_capability()
            self.arch = f"sm_{major}{minor}"

    # --- models and inputs -------------------------------------------------------------------
    def torch_model(self, model, dtype):
        key = (model, dtype)
        if key not in self.models:
            torch = self.torch
            torch.manual_seed(0)
            if model == "bert":
                tf = self.builders[model]
                net = bert_outputs(torch, tf.BertModel(tf.BertConfig()))
            else:
                net = calibrated(torch, getattr(self.builders[model].models, model)(weights=None).to(self.args.device))
            net = net.eval().to(self.args.device)
            self.models[key] = net.half() if dtype == "fp16" else net
        return self.models[key]

    def inputs(self, model, batch, dtype):
        """{name: numpy array}, the same for every column of a row."""
        import numpy as np
        rng = np.random.default_rng(1000 * batch + MODELS.index(model))
        if model == "bert":
            ids = rng.integers(0, 30522, size=(batch, SEQ_LEN), dtype=np.int64)
            mask = np.ones((batch, SEQ_LEN), dtype=np.int64)
            for i in range(batch):  # some padding: lengths 120, 112, 104, 128, 120, ...
                mask[i, SEQ_LEN - 8 * ((i + 1) % 4):] = 0
            return {"input_ids": ids, "attention_mask": mask}
        images = rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)
        return {"images": images.astype(np.float16) if dtype == "fp16" else images}

    def torch_inputs(self, arrays):
        return [self.torch.from_numpy(a).to(self.args.device) for a in arrays.values()]

    # --- steps ----------------------------------------------------------------------------------
    def step(self, cell, step, model, fn):
        """Runs fn() -> dict merged into cell, if its estimated time fits; records its time."""
        if not self.budget.fits(step, model):
            cell.clear()
            cell["status"] = "not run: budget"
            log(f"  {step}: not run, {self.budget.left():.0f} s left")
            self.report.write()
            return False
        t0 = time.monotonic()
        try:
            result = fn()
        except subprocess.TimeoutExpired as e:  # a kiln command cut at the end of the budget
            result = {"status": f"not run: budget (stopped after {e.timeout:.0f} s)"}
        except Exception as e:  # a framework's error ends this cell only
            result = {"status": f"failed: {type(e).__name__}: {first_line(str(e))}"}
        self.budget.record(step, model, time.monotonic() - t0)
        cell.clear()
        cell.update(result)
        log(f'  {step}: {cell.get("status")}' + (f', p50 {cell["p50_ms"]:.3f} ms' if "p50_ms" in cell else "") +
            f" ({time.monotonic() - t0:.1f} s)")
        self.report.write()
        return cell["status"] == "ok"

    def kiln(self, cmd, timeout):
        return subprocess.run([self.args.kiln] + cmd, capture_output=True, text=True,
                              timeout=max(1, min(timeout, self.budget.left())))

    def artifact(self, model, dtype):
        """The model's artifact for every requested batch, exported and compiled on first use."""
        key = (model, dtype)
        if key in self.artifacts:
            return self.artifacts[key]
        self.artifacts[key] = {"status": "not run: budget"}
        onnx_path = os.path.join(self.work, f"{model}_{dtype}.onnx")
        art = os.path.join(self.work, f"{model}_{dtype}.kiln")
        export = {}
        if not self.step(export, "export", model, lambda: self.export(model, dtype, onnx_path)):
            if not export["status"].startswith("not run"):
                self.artifacts[key] = {"status": f'export {export["status"]}'}
            return self.artifacts[key]
        names = list(self.inputs(model, 1, dtype))
        profiles = []
        for b in self.args.batches:
            profiles += ["--profile", ";".join(f"{n}:0={b}" for n in names)]
        compiled = {}

        def compile_():
            r = self.kiln(["compile", onnx_path, "-o", art, "-q", "--arch", self.arch] + profiles, 600)
            if r.returncode != 0:
                return {"status": kiln_error("compile", r)}
            return {"status": "ok"}

        if self.step(compiled, "kiln compile", model, compile_):
            self.artifacts[key] = art
        elif not compiled["status"].startswith("not run"):
            self.artifacts[key] = {"status": self.kiln_failure(dtype, compiled["status"])}
        if os.path.exists(onnx_path):  # the artifact holds the weights now
            os.remove(onnx_path)
        return self.artifacts[key]

    def kiln_failure(self, dtype, status):
        """fp16 failures are gaps ("unsupported"); fp32 ones fail the run."""
        if dtype == "fp16":
            return f"unsupported: {status}"
        self.failed = True
        return f"failed: {status}"

    def export(self, model, dtype, path):
        torch = self.torch
        net = self.torch_model(model, dtype)
        arrays = self.inputs(model, 1, dtype)
        outputs = ["last_hidden_state", "pooler_output"] if model == "bert" else ["logits"]
        axes = {n: {0: "N"} for n in list(arrays) + outputs}
        # The exporter's deprecation notice and the tracer's warnings about Python values taken
        # as constants (the sequence length, fixed here) would only clutter the log.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, tuple(self.torch_inputs(arrays)), path, input_names=list(arrays),
                              output_names=outputs, dynamic_axes=axes, opset_version=17, dynamo=False)
        return {"status": "ok"}

    def check(self, model, batch, dtype, art, in_dir):
        import numpy as np
        from onnx import numpy_helper, load_tensor
        out_dir = os.path.join(self.work, "out")
        shutil.rmtree(out_dir, ignore_errors=True)
        r = self.kiln(["run", art, "--inputs", in_dir, "--outputs", out_dir, "--device", self.args.device], 300)
        if r.returncode != 0:
            return {"status": self.kiln_failure(dtype, kiln_error("run", r))}
        with self.torch.inference_mode():
            ref = self.torch_model(model, dtype)(*self.torch_inputs(self.inputs(model, batch, dtype)))
        ref = ref if isinstance(ref, tuple) else (ref,)
        tol = TOLERANCE[dtype]
        agree, details = True, []
        for n, t in enumerate(ref):
            want = t.float().cpu().numpy()
            got = numpy_helper.to_array(load_tensor(os.path.join(out_dir, f"output_{n}.pb"))).astype(np.float32)
            if got.shape != want.shape:
                self.failed = True
                return {"status": f"DIFFERS: output {n} shape {list(got.shape)}, torch {list(want.shape)}"}
            err = float(np.max(np.abs(got - want))) if want.size else 0.0
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            agree &= bool(err <= tol * scale)  # False for NaN
            details.append({"max_abs_err": err, "max_abs_ref": scale,
                            "err_over_tolerance": err / (tol * scale) if scale > 0 else None})
        self.failed |= not agree
        return {"status": "yes" if agree else "DIFFERS", "outputs": details, "tolerance": tol}

    def kiln_bench(self, art, batch, dtype, in_dir, graphs):
        out = os.path.join(self.work, "bench.json")
        cmd = ["bench", art, "--inputs", in_dir, "--device", self.args.device, "--warmup", str(self.args.warmup),
               "--iterations", str(self.args.iterations), "--json", out] + (["--cuda-graphs"] if graphs else [])
        r = self.kiln(cmd, 300)
        if r.returncode != 0:
            return {"status": self.kiln_failure(dtype, kiln_error("bench", r))}
        with open(out) as f:
            raw = json.load(f)
        p50 = raw["latency_ms"]["p50"]
        result = {"status": "ok", "p50_ms": p50, "samples_per_s": batch * 1000.0 / p50, "kiln_bench": raw}
        host = raw.get("host_us")
        if self.args.device == "cuda" and host:  # on the CPU backend "computation" is the whole run
            # The lookup's interval holds the prologue that passed (kiln/stats.h): not added twice.
            result["host_us"] = host["lookup"] + host["computation"]
        return result

    def time_torch(self, fn, arrays, batch):
        torch = self.torch
        sync = torch.cuda.synchronize if self.args.device == "cuda" else (lambda: None)
        args = self.torch_inputs(arrays)
        with torch.inference_mode():
            t0 = time.perf_counter()
            fn(*args)  # the first call: torch.compile compiles here
            sync()
            first_s = time.perf_counter() - t0
            for _ in range(self.args.warmup):
                fn(*args)
            sync()
            times = []
            for _ in range(self.args.iterations):
                t0 = time.perf_counter()
                fn(*args)
                sync()
                times.append((time.perf_counter() - t0) * 1000.0)
        times.sort()
        p50 = times[len(times) // 2]
        return {"status": "ok", "p50_ms": p50, "samples_per_s": batch * 1000.0 / p50,
                "min_ms": times[0], "p90_ms": times[int(0.9 * (len(times) - 1))],
                "mean_ms": sum(times) / len(times), "first_call_s": first_s}

    def time_compiled(self, model, batch, dtype, mode):
        torch = self.torch
        torch._dynamo.reset()
        fn = torch.compile(self.torch_model(model, dtype), mode=mode, dynamic=False)
        result = self.time_torch(fn, self.inputs(model, batch, dtype), batch)
        result["compile_s"] = result.pop("first_call_s")
        return result

    # --- one row ----------------------------------------------------------------------------------
    def run_row(self, r):
        model, batch, dtype = r["model"], r["batch"], r["dtype"]
        log(f"{model} batch {batch} {dtype} ({self.budget.left():.0f} s left)")
        arrays = self.inputs(model, batch, dtype)
        art = self.artifact(model, dtype)
        if self.args.device != "cuda":
            r["kiln_graphs"] = {"status": "n/a on cpu"}
        if isinstance(art, dict):
            for key in ("outputs", "kiln", "kiln_graphs")[:3 if self.args.device == "cuda" else 2]:
                r[key] = dict(art)
        else:
            import numpy as np
            in_dir = os.path.join(self.work, f"in_{model}_{batch}_{dtype}")
            os.makedirs(in_dir, exist_ok=True)
            for name, a in arrays.items():  # kiln reads NAME.npy ('/' and ':' would become '_')
                np.save(os.path.join(in_dir, name + ".npy"), a)
            self.step(r["outputs"], "check", model, lambda: self.check(model, batch, dtype, art, in_dir))
            if r["outputs"]["status"].startswith(("unsupported", "failed")):  # kiln bench would fail alike
                r["kiln"] = {"status": "not run: kiln run failed"}
                if self.args.device == "cuda":
                    r["kiln_graphs"] = dict(r["kiln"])
            else:
                self.step(r["kiln"], "kiln bench", model,
                          lambda: self.kiln_bench(art, batch, dtype, in_dir, False))
                if self.args.device == "cuda":
                    self.step(r["kiln_graphs"], "kiln bench", model,
                              lambda: self.kiln_bench(art, batch, dtype, in_dir, True))
        self.step(r["eager"], "eager", model, lambda: self.time_torch(self.torch_model(model, dtype), arrays, batch))
        self.step(r["compile"], "compile", model, lambda: self.time_compiled(model, batch, dtype, None))
        if self.args.max_autotune == "on":
            self.max_autotune(r)
        self.report.write()

    def max_autotune(self, r):
        if self.args.max_autotune == "auto":
            log(f'{r["model"]} batch {r["batch"]} {r["dtype"]}: max-autotune ({self.budget.left():.0f} s left)')
        self.step(r["max_autotune"], "max-autotune", r["model"],
                  lambda: self.time_compiled(r["model"], r["batch"], r["dtype"], "max-autotune"))


def main():
    args = parse_args()
    budget = Budget(args.budget)
    if not os.access(args.kiln, os.X_OK):
        log(f"{args.kiln} is not an executable: build the kiln target or pass --kiln")
        return 1
    torch, builders = import_frameworks(args)
    if args.device == "cuda":
        # Strict fp32, as Kiln computes it (cuBLASLt CUBLAS_COMPUTE_32F, cuDNN FMA math).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        device_name = torch.cuda.get_device_name()
    else:
        device_name = f"CPU ({os.cpu_count()} cores, torch threads {torch.get_num_threads()})"
    version = subprocess.run([args.kiln, "--version"], capture_output=True, text=True).stdout.strip()
    meta = {"torch": torch.__version__, "device": args.device, "device_name": device_name, "kiln": version,
            "budget_s": args.budget, "warmup": args.warmup, "iterations": args.iterations, "seq_len": SEQ_LEN,
            "exporter": "torch.onnx.export TorchScript (dynamo=False), opset 17", "tf32": False,
            "latency": "wall time of one synchronous call, p50", "throughput": "batch * 1000 / p50 ms"}
    for name in ("torchvision", "transformers"):
        if name in sys.modules:
            meta[name] = sys.modules[name].__version__
    report = Report(args, meta)
    order = [(m, b, d) for d in ("fp32", "fp16") for b in sorted(args.batches) for m in MODELS
             if m in builders and d in args.dtypes]
    rows = [report.row(*key) for key in order]
    for m in args.models:
        if m not in builders:
            for b in args.batches:
                for d in args.dtypes:
                    r = report.row(m, b, d)
                    for key in ("outputs",) + tuple(k for k, _ in Report.COLUMNS):
                        r[key] = {"status": "not run: package missing"}
    work = args.work or tempfile.mkdtemp(prefix="gpu_compare.")
    os.makedirs(work, exist_ok=True)
    bench = Bench(args, torch, builders, report, budget, work)
    try:
        for r in rows:
            bench.run_row(r)
        if args.max_autotune == "auto":
            for r in rows:
                bench.max_autotune(r)
    finally:
        report.write()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(report.markdown())
    log(f"done in {args.budget - budget.left():.0f} s" +
        ("; some Kiln output differs from PyTorch's, or Kiln failed on an fp32 model" if bench.failed else ""))
    return 1 if bench.failed else 0


if __name__ == "__main__":
    sys.exit(main())
