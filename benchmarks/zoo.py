#!/usr/bin/env python3
"""A benchmark zoo: the architectures users deploy, with random weights under a fixed seed,
exported to ONNX model folders that benchmarks/compare.py runs.

    bash benchmarks/zoo-setup.sh                       # once: makes build/bench-venv (torch, timm, ...)
    build/bench-venv/bin/python benchmarks/zoo.py [--only NAME[,NAME]] [--exporters ts,dynamo]
                                                  [--out build/zoo] [--seed 0] [--list]
    build/venv/bin/python benchmarks/compare.py build/zoo/convnext_tiny-ts/ ...

(Run by another python3 that lacks torch, it re-executes itself with build/bench-venv/bin/python.)

Every model is built from its configuration with random initialisation (transformers
AutoConfig.for_model/AutoModel.from_config, timm create_model(pretrained=False), ultralytics
YOLO('yolov8n.yaml')): nothing is downloaded. Weights are drawn after torch.manual_seed(SEED),
inputs from numpy's default_rng(SEED). Each model is exported twice, into OUT/NAME-ts/ by the
TorchScript exporter (torch.onnx.export(..., dynamo=False)) and into OUT/NAME-dynamo/ by the
torch.export-based one (dynamo=True, weights inside model.onnx); both at opset 18. Each folder is laid
out as ONNX's model zoo and compare.py expect: model.onnx and test_data_set_0/input_N.pb, N in the
graph's input order. compare.py computes onnxruntime's outputs itself, so no output_N.pb is written.

Each export runs in a child process of its own (a crash or a failure is reported with the error's
first line, and the next export goes on), one at a time, at nice 19, with torch and onnxruntime on
one thread. Each export is then checked with onnxruntime the way compare.py will load it
(compare.load_inputs, compare.ort_session at 1 thread): it loads, runs on the saved inputs, and its
outputs are compared with PyTorch's (max abs difference, reported, not judged); the median of 10
single-thread calls (compare.ort_block, after 1 warm-up) gives a first latency figure. The summary
(a markdown table and every figure) goes to OUT/zoo.md and OUT/zoo.json. Only the model folders and
the summary are kept in OUT.

Exit status: 0 every selected export made and checked, 1 some export failed, 2 setup error.
Never run in CI: it needs the benchmark venv (several GB) and minutes per model.
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_VENV = os.path.join(ROOT, "build", "bench-venv")
BENCH_PYTHON = os.path.join(BENCH_VENV, "bin", "python")
OPSET = 18
SEED = 0
EXPORTERS = ("ts", "dynamo")
CHILD_TIMEOUT_S = 3600

try:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
except ImportError as e:
    if os.path.isfile(BENCH_PYTHON) and os.path.realpath(sys.prefix) != os.path.realpath(BENCH_VENV) \
            and not os.environ.get("KILN_ZOO_REEXEC"):
        os.environ["KILN_ZOO_REEXEC"] = "1"  # once: the benchmark venv's python, same arguments
        os.execv(BENCH_PYTHON, [BENCH_PYTHON] + sys.argv)
    print(f"error: {e}; run `bash benchmarks/zoo-setup.sh` first, then this script with "
          "build/bench-venv/bin/python", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import compare  # noqa: E402  (compare.py: its input reader, onnxruntime session and timing block)


def progress(line):
    print(line, file=sys.stderr, flush=True)


# --- inputs -------------------------------------------------------------------------------------

def rng(seed):
    return np.random.default_rng(seed)


def image_input(seed, size):
    """A normalised image batch of 1, NCHW float32."""
    return {"input": rng(seed).standard_normal((1, 3, size, size), dtype=np.float32)}


def token_inputs(seed, vocab, tokens=128, token_types=True):
    """A batch of 1 sequence of `tokens` ids ([CLS] ... [SEP] in BERT's vocabulary), every one attended."""
    ids = rng(seed).integers(1000, vocab, size=(1, tokens), dtype=np.int64)
    ids[0, 0], ids[0, -1] = 101, 102
    feeds = {"input_ids": ids, "attention_mask": np.ones((1, tokens), np.int64)}
    if token_types:
        feeds["token_type_ids"] = np.zeros((1, tokens), np.int64)
    return feeds


# --- models -------------------------------------------------------------------------------------
# Each builder returns (torch module taking the feeds positionally, in the feeds' order; feeds).

class Outputs(torch.nn.Module):
    """A transformers model called with keyword inputs, returning the named outputs as a tuple."""

    def __init__(self, model, keys, outputs):
        super().__init__()
        self.model, self.keys, self.outputs = model, list(keys), list(outputs)

    def forward(self, *xs):
        out = self.model(**dict(zip(self.keys, xs)))
        return tuple(getattr(out, name) for name in self.outputs)


class SentenceEncoder(torch.nn.Module):
    """sentence-transformers' all-MiniLM-L6-v2 pipeline: BERT, mean pooling over the attention mask,
    L2 normalisation."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)


def calibrate_batchnorm(model, batches):
    """Sets every BatchNorm's running statistics to the mean and variance its input has on
    `batches` (seeded random inputs), as a trained network's are. Left at their initial 0 and 1,
    activations can shrink layer by layer to nothing (EfficientNet-B0's logits came out ~1e-5 that
    way: below compare.py's atol, so any output would have agreed) or blow up."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    model.eval()
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches
        m.train()
    with torch.no_grad():
        for b in batches:
            model(torch.from_numpy(b))
    for m in bns:
        m.momentum = 0.1
    model.eval()


def calibration_batches(seed, shape, low=None, high=None):
    """Two batches of 8 for calibrate_batchnorm, from another seed than the test inputs'."""
    g = rng(seed + 1)
    draw = (lambda s: g.uniform(low, high, s)) if low is not None else (lambda s: g.standard_normal(s))
    return [draw((8,) + shape).astype(np.float32) for _ in range(2)]


def timm_model(name):
    def build(seed):
        import timm
        torch.manual_seed(seed)
        model = timm.create_model(name, pretrained=False, exportable=True)
        calibrate_batchnorm(model, calibration_batches(seed, (3, 224, 224)))
        return model, image_input(seed, 224)
    return build


def hf_model(model_type, outputs, feeds, **config):
    def build(seed):
        from transformers import AutoConfig, AutoModel
        torch.manual_seed(seed)
        cfg = AutoConfig.for_model(model_type, **config)
        model = AutoModel.from_config(cfg)
        f = feeds(seed, cfg)
        return Outputs(model, f.keys(), outputs), f
    return build


def build_minilm(seed):
    from transformers import AutoConfig, AutoModel
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model("bert", hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                               intermediate_size=1536, vocab_size=30522, max_position_embeddings=512)
    return SentenceEncoder(AutoModel.from_config(cfg)), token_inputs(seed, cfg.vocab_size)


def build_whisper_encoder(seed):
    from transformers import AutoConfig, AutoModel
    torch.manual_seed(seed)
    # whisper-tiny: d_model 384, 4 encoder layers of 6 heads, FFN 1536, 80 mel bins, 1500 positions.
    cfg = AutoConfig.for_model("whisper", d_model=384, encoder_layers=4, encoder_attention_heads=6,
                               encoder_ffn_dim=1536, decoder_layers=4, decoder_attention_heads=6,
                               decoder_ffn_dim=1536, num_mel_bins=80, max_source_positions=1500,
                               vocab_size=51865)
    encoder = AutoModel.from_config(cfg).get_encoder()
    # 30 s of 16 kHz audio as Whisper's log-mel features: 80 bins x 3000 frames, in [-1, 1].
    feeds = {"input_features": rng(seed).uniform(-1, 1, (1, 80, 3000)).astype(np.float32)}
    return Outputs(encoder, feeds.keys(), ["last_hidden_state"]), feeds


def build_yolov8n(seed):
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics import YOLO
    from ultralytics.nn.modules import C2f, Detect
    torch.manual_seed(seed)
    model = YOLO("yolov8n.yaml").model  # from the YAML: random weights, 80 classes
    calibrate_batchnorm(model, calibration_batches(seed, (3, 640, 640), 0.0, 1.0))
    model = model.fuse(verbose=False)  # Conv+BatchNorm folded, as ultralytics' own ONNX export does
    for m in model.modules():  # ultralytics' exporter's settings for format=onnx, static shapes
        if isinstance(m, Detect):
            m.dynamic, m.export, m.format, m.shape = False, True, "onnx", None
        elif isinstance(m, C2f):
            m.forward = m.forward_split
    feeds = {"images": rng(seed).uniform(0, 1, (1, 3, 640, 640)).astype(np.float32)}
    return model, feeds


def wav2vec2_feeds(seed, cfg):
    return {"input_values": (0.1 * rng(seed).standard_normal((1, 16000))).astype(np.float32)}


MODELS = {
    "resnet50": timm_model("resnet50"),
    "convnext_tiny": timm_model("convnext_tiny"),
    "swin_tiny": timm_model("swin_tiny_patch4_window7_224"),
    "vit_b16": timm_model("vit_base_patch16_224"),
    "efficientnet_b0": timm_model("efficientnet_b0"),
    "mobilenetv3_large": timm_model("mobilenetv3_large_100"),
    "yolov8n": build_yolov8n,
    "bert_base": hf_model("bert", ["last_hidden_state", "pooler_output"],
                          lambda seed, cfg: token_inputs(seed, cfg.vocab_size)),  # bert-base-uncased defaults
    "distilbert": hf_model("distilbert", ["last_hidden_state"],
                           lambda seed, cfg: token_inputs(seed, cfg.vocab_size, token_types=False)),
    "minilm_l6": build_minilm,
    "whisper_tiny_encoder": build_whisper_encoder,
    "wav2vec2_base": hf_model("wav2vec2", ["last_hidden_state"], wav2vec2_feeds),  # wav2vec2-base defaults
    # GPT-2 small's defaults (12 layers of 12 heads, 768 wide), 128 tokens, no cache: its causal
    # mask and the padding mask, as a decoder's prompt step runs them.
    "gpt2": hf_model("gpt2", ["last_hidden_state"],
                     lambda seed, cfg: token_inputs(seed, cfg.vocab_size, token_types=False)),
}


# --- one export (child process) -----------------------------------------------------------------

def first_line(e):
    """The exception's type and first line, and its cause's (torch.onnx wraps torch.export's error)."""
    def one(x):
        lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(x)).splitlines() if line.strip()]
        return f"{type(x).__name__}: {lines[0] if lines else ''}"
    cause = e.__cause__ or e.__context__
    return one(e) + (f" (caused by {one(cause)})" if cause is not None else "")


def torch_outputs(model, args):
    with torch.no_grad():
        out = model(*args)
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o.detach().numpy() for o in out if isinstance(o, torch.Tensor)]


def export_one(name, exporter, out_root, seed):
    """Exports MODELS[name] with `exporter` into OUT/NAME-EXPORTER/, checks it with onnxruntime;
    returns the result record (raises on failure)."""
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work started: a second export in one process
        pass
    record = {"name": name, "exporter": exporter, "folder": f"{name}-{exporter}", "opset": OPSET}
    model, feeds = MODELS[name](seed)
    model.eval()
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    record["parameters"] = sum(p.numel() for p in model.parameters())
    final = os.path.join(out_root, record["folder"])
    tmp = os.path.join(out_root, f".tmp-{record['folder']}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "test_data_set_0"))
    path = os.path.join(tmp, "model.onnx")
    t0 = time.monotonic()
    try:
        with torch.no_grad():
            if exporter == "ts":
                torch.onnx.export(model, args, path, dynamo=False, opset_version=OPSET,
                                  input_names=list(feeds), do_constant_folding=True)
            else:
                torch.onnx.export(model, args, path, dynamo=True, opset_version=OPSET,
                                  input_names=list(feeds), external_data=False, optimize=True,
                                  artifacts_dir=tmp)
        record["export_s"] = round(time.monotonic() - t0, 1)
        # Inputs as the graph lists them (an exporter may drop an input the model never reads).
        graph = onnx.load(path, load_external_data=False).graph
        inits = {i.name for i in graph.initializer}
        names = [i.name for i in graph.input if i.name not in inits]
        missing = [n for n in names if n not in feeds]
        if missing:
            raise RuntimeError(f"the graph's inputs {missing} are not among the model's {list(feeds)}")
        for n, input_name in enumerate(names):
            onnx.save_tensor(numpy_helper.from_array(feeds[input_name], input_name),
                             os.path.join(tmp, "test_data_set_0", f"input_{n}.pb"))
        for f in os.listdir(tmp):  # only model.onnx and test_data_set_0/ stay
            if f not in ("model.onnx", "test_data_set_0"):
                p = os.path.join(tmp, f)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        # As compare.py will read and run it.
        set_dir = os.path.join(tmp, "test_data_set_0")
        loaded = compare.load_inputs(path, set_dir)
        session = compare.ort_session(path, 1)
        got = session.run(None, loaded)
        want = torch_outputs(model, args)
        record["inputs"] = compare.shape_text(loaded)
        record["outputs"] = ", ".join("x".join(map(str, g.shape)) for g in got)
        record["output_absmax"] = max(float(np.max(np.abs(g))) for g in got)  # vs compare.py's atol 1e-4
        if len(got) == len(want) and all(g.shape == w.shape for g, w in zip(got, want)):
            record["max_abs_vs_torch"] = max(float(np.max(np.abs(g.astype(np.float64) - w)))
                                             for g, w in zip(got, want))
        else:
            record["max_abs_vs_torch"] = None
            record["note"] = (f"outputs differ in number or shape from PyTorch's: "
                              f"{[g.shape for g in got]} vs {[w.shape for w in want]}")
        record["ort_1t_p50_ms"] = compare.ort_block(session, loaded, 1, 10)["p50"]
        record["size_bytes"] = os.path.getsize(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return record


def child_main(name, exporter, out_root, seed):
    try:
        record = export_one(name, exporter, out_root, seed)
        record["status"] = "ok"
    except Exception as e:  # exporters raise many types; the first line is what the table shows
        import traceback
        traceback.print_exc(file=sys.stderr)
        record = {"name": name, "exporter": exporter, "status": "failed", "error": first_line(e)}
    print("ZOO-RESULT " + json.dumps(record), flush=True)
    return 0 if record["status"] == "ok" else 1


# --- the zoo (parent) ---------------------------------------------------------------------------

def run_child(name, exporter, out_root, seed):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", YOLO_OFFLINE="1", YOLO_VERBOSE="False", PYTHONWARNINGS="ignore")
    cmd = ["nice", "-n", "19", sys.executable, os.path.abspath(__file__), "--child", name, exporter,
           "--out", out_root, "--seed", str(seed)]
    log_path = os.path.join(out_root, f".log-{name}-{exporter}")
    t0 = time.monotonic()
    try:
        with open(log_path, "w") as log:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                  timeout=CHILD_TIMEOUT_S)
        results = [line[len("ZOO-RESULT "):] for line in proc.stdout.splitlines() if line.startswith("ZOO-RESULT ")]
        if results:
            record = json.loads(results[-1])
        else:  # killed or crashed before reporting: the log's last line says why
            with open(log_path, errors="replace") as f:
                tail = [line.strip() for line in f if line.strip()]
            record = {"name": name, "exporter": exporter, "status": "failed",
                      "error": f"exit {proc.returncode}: {tail[-1] if tail else 'no output'}"}
    except subprocess.TimeoutExpired:
        record = {"name": name, "exporter": exporter, "status": "failed", "error": f"timed out after {CHILD_TIMEOUT_S} s"}
    record["wall_s"] = round(time.monotonic() - t0, 1)
    if record["status"] == "ok":
        os.remove(log_path)
    else:  # the full traceback, for the one who looks into it; removed once the export succeeds
        record["log"] = os.path.relpath(log_path, ROOT)
    return record


def markdown(machine, records):
    lines = [f"Machine: {machine['cpu']}, {machine['cores']} cores; torch {machine['torch']}, "
             f"onnxruntime {machine['onnxruntime']}; seed {machine['seed']}, opset {OPSET}. "
             "ORT p50: median of 10 calls at 1 thread (compare.ort_block).", "",
             "| folder | inputs | outputs | max abs output | MB | ORT 1-thread p50 ms | max abs vs PyTorch | export s "
             "| status |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in records:
        if r["status"] == "ok":
            diff = f"{r['max_abs_vs_torch']:.2g}" if r.get("max_abs_vs_torch") is not None else r.get("note", "-")
            lines.append(f"| {r['folder']} | {r['inputs']} | {r['outputs']} | {r.get('output_absmax', float('nan')):.3g} | "
                         f"{r['size_bytes'] / 1e6:.1f} | "
                         f"{r['ort_1t_p50_ms']:.4g} | {diff} | {r['export_s']} | ok |")
        else:
            err = r["error"].replace("|", "\\|")[:300]
            lines.append(f"| {r['name']}-{r['exporter']} | - | - | - | - | - | - | - | FAILED: {err} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "zoo"), help="output folder (default build/zoo)")
    ap.add_argument("--only", help=f"comma-separated model names (default all: {','.join(MODELS)})")
    ap.add_argument("--exporters", default=",".join(EXPORTERS), help="ts, dynamo or both (default ts,dynamo)")
    ap.add_argument("--seed", type=int, default=SEED, help=f"weights' and inputs' seed (default {SEED})")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "EXPORTER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    out_root = os.path.abspath(args.out)
    if args.child:
        return child_main(args.child[0], args.child[1], out_root, args.seed)
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else list(MODELS)
    exporters = [e.strip() for e in args.exporters.split(",") if e.strip()]
    unknown = [n for n in names if n not in MODELS] + [e for e in exporters if e not in EXPORTERS]
    if unknown or not names or not exporters:
        ap.error(f"unknown model or exporter {unknown}; models: {', '.join(MODELS)}; exporters: ts, dynamo")
    os.makedirs(out_root, exist_ok=True)
    import onnxruntime as ort
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or "unknown CPU")
    machine = {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "onnxruntime": ort.__version__,
               "onnx": onnx.__version__, "python": platform.python_version(), "seed": args.seed, "opset": OPSET}
    records = []
    for name in names:
        for exporter in exporters:
            progress(f"[{len(records) + 1}/{len(names) * len(exporters)}] {name}-{exporter}")
            r = run_child(name, exporter, out_root, args.seed)
            records.append(r)
            if r["status"] == "ok":
                diff = r.get("max_abs_vs_torch")
                progress(f"  ok: {r['size_bytes'] / 1e6:.1f} MB, onnxruntime 1 thread p50 {r['ort_1t_p50_ms']:.4g} ms, "
                         f"max abs vs PyTorch {diff if diff is not None else r.get('note')}, {r['wall_s']} s")
            else:
                progress(f"  FAILED: {r['error']} (traceback: {r['log']})")
    # Keep the summary of earlier runs' other models: merge by folder.
    json_path = os.path.join(out_root, "zoo.json")
    old = {}
    if os.path.isfile(json_path):
        try:
            with open(json_path) as f:
                old = {f"{r['name']}-{r['exporter']}": r for r in json.load(f).get("models", [])}
        except (OSError, ValueError):
            old = {}
    merged = dict(old)
    merged.update({f"{r['name']}-{r['exporter']}": r for r in records})
    order = [f"{n}-{e}" for n in MODELS for e in EXPORTERS]
    all_records = [merged[k] for k in order if k in merged]
    with open(json_path, "w") as f:
        json.dump({"machine": machine, "models": all_records}, f, indent=1)
    table = markdown(machine, all_records)
    with open(os.path.join(out_root, "zoo.md"), "w") as f:
        f.write(table)
    print(table, end="")
    progress(f"wrote {os.path.join(out_root, 'zoo.md')} and zoo.json")
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
