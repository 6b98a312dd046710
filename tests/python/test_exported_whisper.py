"""A small random-weight Whisper-class speech model as torch.onnx's TorchScript exporter writes it
(tests/python/models/whisper_*.onnx, written by make_transformer_models.py), compiled as it comes,
with no --shape or --profile, and run against onnxruntime on the same inputs: the encoder at batch
1 and 3 (its 64 frames fixed by the model); the decoder without a cache at sequence lengths 1, 7
and 64 (its last position); the decoder with a self-attention KV cache at past lengths 0 (the
first step), 1 and 7; a greedy decode (encoder once, then the cached decoder token by token)
whose logits are compared step by step under teacher forcing; and a batch or sequence of 0,
which both refuse.

    build/venv/bin/python -m pytest tests/python/test_exported_whisper.py   (scripts/python.sh runs it)
"""
import numpy as np
import pytest

import kiln
from test_exported_transformers import check, compiled, reference, run_both

VOCAB, HEADS, HEAD_DIM, LAYERS = 512, 4, 16, 2
MELS, FRAMES, SOURCE_POSITIONS, HIDDEN = 16, 64, 32, 64
PAST_NAMES = [f"past_key_values.{i}.decoder.{kind}" for i in range(LAYERS) for kind in ("key", "value")]


def features(rng, batch):
    return rng.standard_normal((batch, MELS, FRAMES)).astype(np.float32)


def encoded(rng, batch):
    return rng.standard_normal((batch, SOURCE_POSITIONS, HIDDEN)).astype(np.float32)


def ids(rng, batch, seq):
    return rng.integers(0, VOCAB, (batch, seq)).astype(np.int64)


@pytest.mark.parametrize("batch", [1, 3])
def test_encoder(batch):
    rng = np.random.default_rng(batch)
    check(*run_both("whisper_encoder.onnx", {"input_features": features(rng, batch)}))


def test_encoder_shape_is_fixed_but_batch():
    model, _ = compiled("whisper_encoder.onnx")
    (hidden,) = model.outputs
    assert [str(d) for d in hidden.shape] == ["batch", str(SOURCE_POSITIONS), str(HIDDEN)]


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("seq", [1, 7, 64])
def test_decoder_without_cache(batch, seq):
    rng = np.random.default_rng(batch * 100 + seq)
    feeds = {"input_ids": ids(rng, batch, seq), "encoder_hidden_states": encoded(rng, batch)}
    check(*run_both("whisper_decoder.onnx", feeds))


def cache_feeds(rng, batch, past, seq):
    feeds = {"input_ids": ids(rng, batch, seq), "encoder_hidden_states": encoded(rng, batch)}
    for name in PAST_NAMES:
        feeds[name] = rng.standard_normal((batch, HEADS, past, HEAD_DIM)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("past", [0, 1, 7])
@pytest.mark.parametrize("seq", [1, 7])
def test_decoder_with_cache(batch, past, seq):
    rng = np.random.default_rng(batch * 100 + past * 10 + seq)
    check(*run_both("whisper_decoder_kv.onnx", cache_feeds(rng, batch, past, seq)))


def test_decoder_with_cache_up_to_the_last_position():
    # 57 past tokens and 7 new ones fill all 64 decoder positions.
    check(*run_both("whisper_decoder_kv.onnx", cache_feeds(np.random.default_rng(5), 3, 57, 7)))


def test_greedy_decode_matches_step_by_step():
    # The encoder once, then a 4-token prompt with an empty cache and 12 steps of one token each:
    # Kiln's encoder output, logits and cache at every step against onnxruntime's, each decoder fed
    # its own encoder output and cache and both the same (teacher-forced) tokens, so an encoder or
    # cache that drifted would show in the next step's logits.
    rng = np.random.default_rng(7)
    kiln_encoded, ort_encoded = run_both("whisper_encoder.onnx", {"input_features": features(rng, 1)})
    check(kiln_encoded, ort_encoded)
    feeds = cache_feeds(rng, 1, 0, 4)
    kiln_cache = ort_cache = {n: feeds[n] for n in PAST_NAMES}
    tokens = feeds["input_ids"]
    _, ctx = compiled("whisper_decoder_kv.onnx")
    session = reference("whisper_decoder_kv.onnx")
    order = [i.name for i in session.get_inputs()]
    total = 0
    for step in range(13):
        total += tokens.shape[1]
        kiln_feeds = {"input_ids": tokens, "encoder_hidden_states": kiln_encoded[0], **kiln_cache}
        got = ctx.run([kiln_feeds[n] for n in order])
        want = session.run(None, {"input_ids": tokens, "encoder_hidden_states": ort_encoded[0], **ort_cache})
        check(got, want)
        kiln_cache = dict(zip(PAST_NAMES, got[1:]))
        ort_cache = dict(zip(PAST_NAMES, want[1:]))
        assert kiln_cache[PAST_NAMES[0]].shape[2] == total
        tokens = np.array([[int(want[0][0, -1].argmax())]], np.int64)  # onnxruntime's choice for both


@pytest.mark.parametrize("name,batch,seq,past", [("whisper_encoder.onnx", 0, None, None),
                                                  ("whisper_decoder.onnx", 1, 0, None),
                                                  ("whisper_decoder.onnx", 0, 3, None),
                                                  ("whisper_decoder_kv.onnx", 1, 0, 5),
                                                  ("whisper_decoder_kv.onnx", 0, 1, 0)])
def test_empty_lengths_as_onnxruntime_takes_them(name, batch, seq, past):
    # A batch or sequence of 0, compiled as the model comes. Every one of these reshapes its heads
    # with a -1 beside a dim of 0, which ONNX's Reshape leaves undefined: onnxruntime refuses each,
    # and Kiln does too, naming the rule (test_exported_transformers.py runs the same check).
    rng = np.random.default_rng(7)
    if seq is None:
        feeds = {"input_features": features(rng, batch)}
    elif past is None:
        feeds = {"input_ids": ids(rng, batch, seq), "encoder_hidden_states": encoded(rng, batch)}
    else:
        feeds = cache_feeds(rng, batch, past, seq)
    session = reference(name)
    with pytest.raises(Exception):
        session.run(None, feeds)
    _, ctx = compiled(name)
    with pytest.raises(kiln.Error, match=r"\(Reshape\), the dims besides the -1 must not multiply to 0"):
        ctx.run([feeds[i.name] for i in session.get_inputs()])
