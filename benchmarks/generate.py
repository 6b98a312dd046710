"""Time per generated token of a decoder with a KV cache, Kiln's CPU backend against onnxruntime.

The decoder is in the layout of Hugging Face Optimum and ORT GenAI (input_ids, attention_mask,
past_key_values.N.key/value [batch, heads, past, head_dim] in; logits and present.N.key/value out),
as tests/python/make_transformer_models.py exports it. For each thread count: a random prompt on
an empty cache, then greedy steps of one token each, feeding the present keys and values back;
Kiln and onnxruntime alternate for --rounds rounds, the prompt call is not timed, and the p50 of
the per-step times is printed. Both are fed the same tokens (Kiln's choice, teacher forcing), and
the largest difference of their last-position logits over all steps is printed with the times, so
a row whose outputs differ shows it.

    build/venv/bin/python benchmarks/generate.py MODEL.onnx MODEL.kiln [--threads 1,2] [--prompt 32] [--steps 32]

MODEL.kiln: the model compiled as it comes (kiln compile MODEL.onnx -o MODEL.kiln).
"""
import argparse
import re
import time

import numpy as np
import onnx
import onnxruntime as ort

import kiln


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


def generate(run, names, heads, head_dim, prompt, steps, forced=None):
    """Greedy steps after the prompt; returns the step times (s), the tokens and the last logits."""
    cache = {n: np.zeros((1, heads, 0, head_dim), np.float32) for n in names}
    tokens, total, times, chosen, logits = prompt, 0, [], [], []
    for s in range(steps + 1):
        total += tokens.shape[1]
        feeds = {"input_ids": tokens, "attention_mask": np.ones((1, total), np.int64), **cache}
        start = time.perf_counter()
        out = run(feeds)
        if s > 0:
            times.append(time.perf_counter() - start)
        logits.append(np.array(out[0][0, -1]))
        cache = dict(zip(names, out[1:]))
        token = int(logits[-1].argmax()) if forced is None else forced[s]
        chosen.append(token)
        tokens = np.array([[token]], np.int64)
    return times, chosen, logits


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
    for threads in (int(t) for t in args.threads.split(",")):
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = ort.InferenceSession(args.onnx_model, options, providers=["CPUExecutionProvider"])
        order = [i.name for i in session.get_inputs()]
        ctx = model.context(device="cpu", cpu_threads=threads)
        times = {"kiln": [], "onnxruntime": []}
        worst = 0.0
        for _ in range(args.rounds):
            t, tokens, got = generate(lambda f: ctx.run([f[n] for n in order]), names, heads, head_dim, prompt,
                                      args.steps)
            times["kiln"] += t
            t, _, want = generate(lambda f: session.run(None, f), names, heads, head_dim, prompt, args.steps, tokens)
            times["onnxruntime"] += t
            worst = max(worst, max(float(np.abs(a - b).max()) for a, b in zip(got, want)))
        print(f"threads {threads}: per generated token p50 kiln {1e3 * np.median(times['kiln']):.2f} ms, "
              f"onnxruntime {1e3 * np.median(times['onnxruntime']):.2f} ms; max |logits difference| over "
              f"{args.steps + 1} steps {worst:.2e}", flush=True)


if __name__ == "__main__":
    main()
