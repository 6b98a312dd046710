"""Exports the small random-weight transformers that tests/python/test_exported_transformers.py
runs against onnxruntime, as the usual exporters write them, into tests/python/models/ (committed,
each under 1 MB: vocabulary 512, hidden size 64, 2 layers). Run once, with torch and
transformers (the benchmark venv, scripts/bench-venv.sh), when the set changes:

    build/bench-venv/bin/python tests/python/make_transformer_models.py

- gpt2.onnx: a GPT-2-class decoder, torch.onnx's TorchScript exporter, dynamic batch and
  sequence; input_ids -> logits. Its shape arithmetic is what once grew with depth.
- gpt2_dynamo.onnx: the same weights through the dynamo exporter (torch.export).
- gpt2_kv.onnx: the decoder with a KV cache in the layout of Hugging Face Optimum and ORT
  GenAI: input_ids, attention_mask and past_key_values.{i}.key/value [batch, heads, past_seq,
  head_dim] in; logits and present.{i}.key/value [batch, heads, past_seq + seq, head_dim] out.
- bert.onnx: a BERT-class encoder, TorchScript exporter: input_ids, attention_mask ->
  last_hidden_state.
"""
import os
import sys

import torch
import transformers.masking_utils as masking_utils
from transformers import BertConfig, BertModel, DynamicCache, GPT2Config, GPT2LMHeadModel

# transformers' packed-sequence detection calls torch.diff, which the TorchScript exporter has
# no symbolic for; every sequence here is one sequence, which is what returning None says.
masking_utils.find_packed_sequence_indices = lambda position_ids: None

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
VOCAB, HIDDEN, HEADS, LAYERS = 512, 64, 4, 2


def export(module, args, name, inputs, outputs, axes, dynamo=False):
    path = os.path.join(OUT, name)
    torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=axes,
                      opset_version=18, dynamo=dynamo, external_data=False)
    size = os.path.getsize(path)
    assert size < 1 << 20, f"{name}: {size} bytes, over 1 MB"
    print(f"wrote {path} ({size} bytes)")


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class WithCache(torch.nn.Module):
    """past_key_values as flat tensors in, present ones out (Optimum's decoder_with_past layout)."""

    def __init__(self, model, config):
        super().__init__()
        self.model, self.config = model, config

    def forward(self, input_ids, attention_mask, *past):
        cache = DynamicCache(config=self.config)
        for i in range(LAYERS):
            cache.update(past[2 * i], past[2 * i + 1], i)
        start = past[0].shape[2]
        positions = torch.arange(start, start + input_ids.shape[1]).unsqueeze(0).expand(input_ids.shape[0], -1)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                         position_ids=positions, use_cache=True)
        present = []
        for layer in out.past_key_values.layers[:LAYERS]:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    gpt2_config = GPT2Config(n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB, n_positions=128,
                             attn_implementation="eager")
    gpt2 = GPT2LMHeadModel(gpt2_config).eval()
    ids = torch.randint(0, VOCAB, (2, 7))  # batch 2: the dynamo exporter would specialise a 1
    seq_axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    export(Logits(gpt2).eval(), (ids,), "gpt2.onnx", ["input_ids"], ["logits"], seq_axes)
    export(Logits(gpt2).eval(), (ids,), "gpt2_dynamo.onnx", ["input_ids"], ["logits"], seq_axes, dynamo=True)

    past_len, head_dim = 5, HIDDEN // HEADS
    past = [torch.randn(2, HEADS, past_len, head_dim) for _ in range(2 * LAYERS)]
    mask = torch.ones(2, past_len + 7, dtype=torch.int64)
    kv_names = [f"past_key_values.{i}.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    present_names = [f"present.{i}.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total_seq"},
            "logits": {0: "batch", 1: "seq"}}
    axes.update({n: {0: "batch", 2: "past_seq"} for n in kv_names})
    axes.update({n: {0: "batch", 2: "total_seq"} for n in present_names})
    export(WithCache(gpt2, gpt2_config).eval(), (ids, mask, *past), "gpt2_kv.onnx",
           ["input_ids", "attention_mask", *kv_names], ["logits", *present_names], axes)

    bert_config = BertConfig(num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                             intermediate_size=4 * HIDDEN, vocab_size=VOCAB, max_position_embeddings=128,
                             attn_implementation="eager")
    bert = BertModel(bert_config).eval()
    bert_axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                 "last_hidden_state": {0: "batch", 1: "seq"}}
    export(Encoder(bert).eval(), (ids, torch.ones_like(ids)), "bert.onnx", ["input_ids", "attention_mask"],
           ["last_hidden_state"], bert_axes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
