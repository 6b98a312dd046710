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
- whisper_encoder.onnx: a Whisper-class audio encoder (16 mel bins, 64 frames: the frame count is
  fixed by its 32 source positions), TorchScript exporter, dynamic batch; input_features
  [batch, 16, 64] -> last_hidden_state [batch, 32, 64].
- whisper_decoder.onnx: its decoder with the LM head, no cache: input_ids [batch, seq],
  encoder_hidden_states [batch, 32, 64] -> logits.
- whisper_decoder_kv.onnx: the decoder with a self-attention KV cache (Optimum's
  decoder_with_past names): input_ids, encoder_hidden_states and past_key_values.{i}.decoder.key/value
  [batch, heads, past_seq, head_dim] in; logits and present.{i}.decoder.key/value out. The
  cross-attention keys and values are recomputed from encoder_hidden_states at every step.
"""
import os
import sys

import torch
import transformers.masking_utils as masking_utils
from transformers import (BertConfig, BertModel, DynamicCache, EncoderDecoderCache, GPT2Config, GPT2LMHeadModel,
                          WhisperConfig, WhisperForConditionalGeneration)

# transformers' packed-sequence detection calls torch.diff, which the TorchScript exporter has
# no symbolic for; every sequence here is one sequence, which is what returning None says.
masking_utils.find_packed_sequence_indices = lambda position_ids: None

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
VOCAB, HIDDEN, HEADS, LAYERS = 512, 64, 4, 2
MELS, SOURCE_POSITIONS = 16, 32  # the encoder takes 2 * SOURCE_POSITIONS frames (conv2 has stride 2)


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
    """A GPT-2's past_key_values as flat tensors in, present ones out (Optimum's decoder_with_past
    layout); benchmarks/export_decoder.py exports larger ones with it."""

    def __init__(self, model, config):
        super().__init__()
        self.model, self.config = model, config

    def forward(self, input_ids, attention_mask, *past):
        cache = DynamicCache(config=self.config)
        for i in range(self.config.n_layer):
            cache.update(past[2 * i], past[2 * i + 1], i)
        start = past[0].shape[2]
        positions = torch.arange(start, start + input_ids.shape[1]).unsqueeze(0).expand(input_ids.shape[0], -1)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                         position_ids=positions, use_cache=True)
        present = []
        for layer in out.past_key_values.layers[:self.config.n_layer]:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


class AudioEncoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.encoder = model.model.encoder

    def forward(self, input_features):
        return self.encoder(input_features).last_hidden_state


class SpeechLogits(torch.nn.Module):
    """Whisper's decoder and LM head over the whole sequence, without a cache."""

    def __init__(self, model):
        super().__init__()
        self.decoder, self.head = model.model.decoder, model.proj_out

    def forward(self, input_ids, encoder_hidden_states):
        out = self.decoder(input_ids=input_ids, encoder_hidden_states=encoder_hidden_states, use_cache=False)
        return self.head(out.last_hidden_state)


class SpeechWithCache(torch.nn.Module):
    """Whisper's decoder with self-attention past_key_values as flat tensors in, present ones out; the
    cross-attention cache starts empty at every call, so its keys and values come from encoder_hidden_states."""

    def __init__(self, model, config):
        super().__init__()
        self.decoder, self.head, self.config = model.model.decoder, model.proj_out, config

    def forward(self, input_ids, encoder_hidden_states, *past):
        cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        for i in range(LAYERS):
            cache.self_attention_cache.update(past[2 * i], past[2 * i + 1], i)
        start = past[0].shape[2]
        positions = torch.arange(start, start + input_ids.shape[1]).unsqueeze(0).expand(input_ids.shape[0], -1)
        out = self.decoder(input_ids=input_ids, encoder_hidden_states=encoder_hidden_states, cache=cache,
                           position_ids=positions, use_cache=True)
        present = []
        for layer in out.past_key_values.self_attention_cache.layers[:LAYERS]:
            present += [layer.keys, layer.values]
        return (self.head(out.last_hidden_state), *present)


def export_whisper():
    torch.manual_seed(0)  # its own seed, so that its weights do not depend on the models exported before it
    config = WhisperConfig(vocab_size=VOCAB, num_mel_bins=MELS, d_model=HIDDEN, encoder_layers=LAYERS,
                           decoder_layers=LAYERS, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
                           encoder_ffn_dim=4 * HIDDEN, decoder_ffn_dim=4 * HIDDEN,
                           max_source_positions=SOURCE_POSITIONS, max_target_positions=64,
                           attn_implementation="eager", pad_token_id=VOCAB - 1, bos_token_id=VOCAB - 1,
                           eos_token_id=VOCAB - 1, decoder_start_token_id=VOCAB - 2, begin_suppress_tokens=None)
    whisper = WhisperForConditionalGeneration(config).eval()
    features = torch.randn(2, MELS, 2 * SOURCE_POSITIONS)
    export(AudioEncoder(whisper).eval(), (features,), "whisper_encoder.onnx", ["input_features"],
           ["last_hidden_state"], {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}})

    ids = torch.randint(0, VOCAB, (2, 7))
    encoded = torch.randn(2, SOURCE_POSITIONS, HIDDEN)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "encoder_hidden_states": {0: "batch"},
            "logits": {0: "batch", 1: "seq"}}
    export(SpeechLogits(whisper).eval(), (ids, encoded), "whisper_decoder.onnx",
           ["input_ids", "encoder_hidden_states"], ["logits"], axes)

    past = [torch.randn(2, HEADS, 5, HIDDEN // HEADS) for _ in range(2 * LAYERS)]
    kv_names = [f"past_key_values.{i}.decoder.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    present_names = [f"present.{i}.decoder.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    axes.update({n: {0: "batch", 2: "past_seq"} for n in kv_names})
    axes.update({n: {0: "batch", 2: "total_seq"} for n in present_names})
    export(SpeechWithCache(whisper, config).eval(), (ids, encoded, *past), "whisper_decoder_kv.onnx",
           ["input_ids", "encoder_hidden_states", *kv_names], ["logits", *present_names], axes)


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
    export_whisper()
    return 0


if __name__ == "__main__":
    sys.exit(main())
