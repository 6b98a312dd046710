"""Exports a random-weight GPT-2-class decoder with a KV cache, for benchmarks/generate.py and
`kiln bench --generate`: the layout of Hugging Face Optimum and ORT GenAI (input_ids,
attention_mask, past_key_values.N.key/value [batch, heads, past_seq, head_dim] in; logits and
present.N.key/value out), torch.onnx's TorchScript exporter, dynamic batch, sequence and past, as
tests/python/make_transformer_models.py exports the small one the tests run. Needs torch and
transformers (the benchmark venv, benchmarks/zoo-setup.sh).

    build/bench-venv/bin/python benchmarks/export_decoder.py OUT.onnx                       # GPT-2 small
    build/bench-venv/bin/python benchmarks/export_decoder.py OUT.onnx --layers 48 --hidden 64 --heads 1 --vocab 512
"""
import argparse
import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from make_transformer_models import WithCache  # noqa: E402  (also sets transformers up for the exporter)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("output", help="the .onnx file to write")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--positions", type=int, default=1024, help="the longest past + sequence")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    config = GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads, vocab_size=a.vocab, n_positions=a.positions,
                        attn_implementation="eager")
    model = GPT2LMHeadModel(config).eval()
    head_dim = a.hidden // a.heads
    ids = torch.randint(0, a.vocab, (1, 3))
    past = [torch.randn(1, a.heads, 4, head_dim) for _ in range(2 * a.layers)]
    mask = torch.ones(1, 7, dtype=torch.int64)
    kv = [f"past_key_values.{i}.{kind}" for i in range(a.layers) for kind in ("key", "value")]
    present = [f"present.{i}.{kind}" for i in range(a.layers) for kind in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total_seq"},
            "logits": {0: "batch", 1: "seq"}}
    axes.update({n: {0: "batch", 2: "past_seq"} for n in kv})
    axes.update({n: {0: "batch", 2: "total_seq"} for n in present})
    with torch.no_grad():
        torch.onnx.export(WithCache(model, config), (ids, mask, *past), a.output, input_names=["input_ids",
                          "attention_mask", *kv], output_names=["logits", *present], dynamic_axes=axes, opset_version=18,
                          dynamo=False)
    print(f"wrote {a.output} ({os.path.getsize(a.output)} bytes): {a.layers} layers, {a.hidden} wide, {a.heads} heads, "
          f"vocabulary {a.vocab}")


if __name__ == "__main__":
    main()
