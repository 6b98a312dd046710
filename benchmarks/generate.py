"""Time per generated token of a decoder with a KV cache: Kiln's CPU backend against onnxruntime and OpenVINO.

The decoder is in the layout of Hugging Face Optimum and ORT GenAI (input_ids, attention_mask,
past_key_values.N.key/value [batch, heads, past, head_dim] in; logits and present.N.key/value out),
as benchmarks/export_decoder.py and tests/python/make_transformer_models.py export it. For each
thread count: a random prompt on an empty cache, then greedy steps of one token each, feeding the
present keys and values back. The engines:
  kiln          the cache bound to the context (Context.bind_cache): one buffer per past of
                prompt + steps rows per head, which each step reads in place and appends its row to;
  kiln-copied   the cache fed back as arrays, as for any model (the present is written whole at
                each step, and read back as the next past);
  onnxruntime   its CPU provider, intra_op_num_threads T;
  openvino      its CPU plugin (when the `openvino` package is installed), INFERENCE_NUM_THREADS T,
                one stream, latency hint, float32.
Every engine is fed the same tokens (onnxruntime's choice, teacher forcing). Before any timing,
each engine's last-position logits at every step are compared with onnxruntime's and the largest
difference printed; then the engines alternate for --rounds rounds, the prompt call untimed, and
the p50 of the per-step times is printed.

    build/bench-venv/bin/python benchmarks/generate.py MODEL.onnx MODEL.kiln [--threads 1,2] [--prompt 32] [--steps 32]

MODEL.kiln: the model compiled as it comes (kiln compile MODEL.onnx -o MODEL.kiln). The kiln
package must be installed in the venv that runs this (pip install --no-build-isolation --no-deps .
after cmake --install).
"""
import argparse
import re
import time

import numpy as np
import onnx
import onnxruntime as ort

import kiln

try:
    import openvino as ov
except ImportError:  # the OpenVINO rows are left out
    ov = None


def cache_layout(onnx_path):
    """The past inputs' names, heads and head size, and the vocabulary, from the model's signature."""
    graph = onnx.load(onnx_path, load_external_data=False).graph
    past = [i for i in graph.input if re.fullmatch(r"past_key_values\.\d+\.(key|value)", i.name)]
    if not past:
        raise SystemExit(f"{onnx_path}: no past_key_values.N.key/value inputs (expected the Optimum KV layout)")
    dims = past[0].type.tensor_type.shape.dim
    heads, head_dim = dims[1].dim_value, dims[3].dim_value
    vocab = graph.output[0].type.tensor_type.shape.dim[-1].dim_value
    if not heads or not head_dim or not vocab:
        raise SystemExit(f"{onnx_path}: the heads, head size and vocabulary must be fixed in the signature")
    return [i.name for i in past], heads, head_dim, vocab


def generate(step, names, prompt, steps, forced=None):
    """Greedy steps after the prompt; `step(tokens, past, total)` runs one call and returns the
    logits [1, seq, vocab] (a cache is the engine's own). Returns the step times (s), the tokens
    and each call's last logits."""
    tokens, total, times, chosen, logits = prompt, 0, [], [], []
    for s in range(steps + 1):
        past, total = total, total + tokens.shape[1]
        start = time.perf_counter()
        out = step(tokens, past, total)
        if s > 0:
            times.append(time.perf_counter() - start)
        logits.append(np.array(out[0, -1]))
        token = int(logits[-1].argmax()) if forced is None else forced[s]
        chosen.append(token)
        tokens = np.array([[token]], np.int64)
    return times, chosen, logits


def fed_back(run, names, heads, head_dim):
    """A step function for an engine that takes the cache as arrays and returns the presents."""
    cache = {}

    def step(tokens, past, total):
        if past == 0:
            cache.clear()
            cache.update({n: np.zeros((1, heads, 0, head_dim), np.float32) for n in names})
        out = run({"input_ids": tokens, "attention_mask": np.ones((1, total), np.int64), **cache})
        cache.update(zip(names, out[1:]))
        return out[0]
    return step


def bound(ctx, order, outputs, names, heads, head_dim, vocab, capacity):
    """Kiln with the cache bound: each past is buffer[:, :, :past], its present buffer[:, :, :total]."""
    ctx.bind_cache({n: n.replace("past_key_values.", "present.") for n in names}, capacity)
    buffers = {n: np.zeros((1, heads, capacity, head_dim), np.float32) for n in names}

    def step(tokens, past, total):
        logits = np.empty((1, tokens.shape[1], vocab), np.float32)
        feeds = {"input_ids": tokens, "attention_mask": np.ones((1, total), np.int64),
                 **{n: b[:, :, :past] for n, b in buffers.items()}}
        out = [logits if o == "logits" else buffers[o.replace("present.", "past_key_values.")][:, :, :total]
               for o in outputs]
        ctx.run([feeds[n] for n in order], out=out)
        return logits
    return step


def openvino_step(model_path, threads, names, heads, head_dim):
    """OpenVINO's CPU plugin, latency-tuned, one stream, float32; or the reason it cannot run the model."""
    try:
        compiled = ov.Core().compile_model(model_path, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                                "PERFORMANCE_HINT": "LATENCY",
                                                                "INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
    except Exception as e:  # OpenVINO raises RuntimeError and its own types
        return None, str(e).strip().splitlines()[-1]

    def run(feeds):
        result = request.infer(feeds)
        return [np.asarray(result[o]) for o in compiled.outputs]
    return fed_back(run, names, heads, head_dim), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("onnx_model")
    ap.add_argument("artifact")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    ap.add_argument("--steps", type=int, default=32, help="generated tokens after the prompt's (default 32)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    args = ap.parse_args()
    names, heads, head_dim, vocab = cache_layout(args.onnx_model)
    prompt = np.random.default_rng(0).integers(0, vocab, (1, args.prompt)).astype(np.int64)
    model = kiln.load(args.artifact)
    print(f"onnxruntime {ort.__version__}; {'OpenVINO ' + ov.__version__ if ov else 'OpenVINO not installed'}; "
          f"prompt {args.prompt}, {args.steps} steps, {args.rounds} rounds", flush=True)
    for threads in (int(t) for t in args.threads.split(",")):
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(args.onnx_model, options, providers=["CPUExecutionProvider"])
        order = [i.name for i in session.get_inputs()]
        outputs = [o.name for o in session.get_outputs()]
        copied_ctx = model.context(device="cpu", cpu_threads=threads)
        engines = {
            "kiln": bound(model.context(device="cpu", cpu_threads=threads), order, outputs, names, heads, head_dim,
                          vocab, args.prompt + args.steps + 1),
            "kiln-copied": fed_back(lambda f: copied_ctx.run([f[n] for n in order]), names, heads, head_dim),
            "onnxruntime": fed_back(lambda f: session.run(None, f), names, heads, head_dim),
        }
        if ov is not None:
            step, why = openvino_step(args.onnx_model, threads, names, heads, head_dim)
            if step is None:
                print(f"threads {threads}: openvino cannot run the model: {why}")
            else:
                engines["openvino"] = step
        # Outputs first: every engine's logits at every step against onnxruntime's.
        _, tokens, want = generate(engines["onnxruntime"], names, prompt, args.steps)
        worst = {}
        for name, step in engines.items():
            _, _, got = generate(step, names, prompt, args.steps, tokens)
            worst[name] = max(float(np.abs(a - b).max()) for a, b in zip(got, want))
        times = {name: [] for name in engines}
        for _ in range(args.rounds):
            for name, step in engines.items():
                times[name] += generate(step, names, prompt, args.steps, tokens)[0]
        print(f"threads {threads}: per generated token p50 " +
              ", ".join(f"{name} {1e3 * np.median(t):.2f} ms" for name, t in times.items()) +
              f"; max |logits - onnxruntime's| over {args.steps + 1} steps " +
              ", ".join(f"{name} {worst[name]:.1e}" for name in engines if name != "onnxruntime"), flush=True)


if __name__ == "__main__":
    main()
