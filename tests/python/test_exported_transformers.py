"""Small random-weight transformers as torch.onnx exports them (tests/python/models/, written by
make_transformer_models.py), compiled as they come, with no --shape or --profile, and run
against onnxruntime on the same inputs: batch 1 and 3, sequence lengths 1, 7 and 64, and for
the decoder with a KV cache past lengths 0 (the first step), 1 and 7, and a greedy generation
under teacher forcing whose logits are compared step by step (random weights make near-ties,
so the tokens alone would not be a check).

    build/venv/bin/python -m pytest tests/python/test_exported_transformers.py   (scripts/python.sh runs it)
"""
import functools
import os

import numpy as np
import onnxruntime as ort
import pytest

import kiln

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
VOCAB, HEADS, HEAD_DIM, LAYERS = 512, 4, 16, 2
# float32 sums of 64-wide rows in another order than onnxruntime's: a few ulps of logits ~1.
TOLERANCE = 1e-4


@functools.lru_cache(maxsize=None)
def compiled(name):
    path = os.path.join(MODELS, name)
    model = kiln.load(kiln.compile(path, archs="none", progress=False))
    return model, model.context(device="cpu", cpu_threads=1)


@functools.lru_cache(maxsize=None)
def reference(name):
    return ort.InferenceSession(os.path.join(MODELS, name), providers=["CPUExecutionProvider"])


def run_both(name, feeds):
    _, ctx = compiled(name)
    session = reference(name)
    order = [i.name for i in session.get_inputs()]
    got = ctx.run([feeds[n] for n in order])
    want = session.run(None, feeds)
    assert len(got) == len(want)
    return got, want


def check(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if w.size:
            assert float(np.abs(g - w).max()) <= TOLERANCE


def ids(rng, batch, seq):
    return rng.integers(0, VOCAB, (batch, seq)).astype(np.int64)


@pytest.mark.parametrize("name", ["gpt2.onnx", "gpt2_dynamo.onnx"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("seq", [1, 7, 64])
def test_decoder_without_cache(name, batch, seq):
    rng = np.random.default_rng(batch * 100 + seq)
    check(*run_both(name, {"input_ids": ids(rng, batch, seq)}))


def test_decoder_shapes_stay_small():
    # The TorchScript export's where(seq == -1, 1, seq) and residual max() once doubled a dim per
    # layer (4097 terms at a 12-layer GPT-2's 9th layer); now every dim is batch, seq or a constant.
    model, _ = compiled("gpt2.onnx")
    (logits,) = model.outputs
    assert [str(d) for d in logits.shape] == ["batch", "seq", str(VOCAB)]


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("seq", [1, 7, 64])
def test_encoder(batch, seq):
    rng = np.random.default_rng(batch * 100 + seq)
    mask = np.ones((batch, seq), np.int64)
    mask[0, seq // 2 + 1:] = 0  # the first row padded
    check(*run_both("bert.onnx", {"input_ids": ids(rng, batch, seq), "attention_mask": mask}))


def cache_feeds(rng, batch, past, seq):
    feeds = {"input_ids": ids(rng, batch, seq), "attention_mask": np.ones((batch, past + seq), np.int64)}
    for i in range(LAYERS):
        for kind in ("key", "value"):
            shape = (batch, HEADS, past, HEAD_DIM)
            feeds[f"past_key_values.{i}.{kind}"] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("past", [0, 1, 7])
@pytest.mark.parametrize("seq", [1, 7])
def test_decoder_with_cache(batch, past, seq):
    rng = np.random.default_rng(batch * 100 + past * 10 + seq)
    check(*run_both("gpt2_kv.onnx", cache_feeds(rng, batch, past, seq)))


def test_one_entry_takes_every_length():
    # Every symbolic dim may be 0 without a profile: the empty cache runs through the one entry.
    model, _ = compiled("gpt2_kv.onnx")
    assert [e.name for e in model.entries] == ["default"]
    assert all(c.min == 0 for dims in model.entries[0].input_dims for c in dims if c.symbol)


@pytest.mark.parametrize("name,batch,seq,past", [("gpt2.onnx", 1, 0, None), ("gpt2.onnx", 0, 7, None),
                                                  ("gpt2_dynamo.onnx", 1, 0, None), ("gpt2_dynamo.onnx", 0, 7, None),
                                                  ("bert.onnx", 1, 0, None), ("bert.onnx", 0, 7, None),
                                                  ("gpt2_kv.onnx", 1, 0, 7), ("gpt2_kv.onnx", 0, 1, 0),
                                                  ("gpt2_kv.onnx", 3, 0, 0)])
def test_empty_lengths_as_onnxruntime_takes_them(name, batch, seq, past):
    # A sequence or batch of 0, compiled as the model comes: where onnxruntime runs it, the same
    # outputs; where it refuses, Kiln refuses too. These exports all reshape with a -1 beside a
    # dim of 0 (or a 0 past the input's rank), which ONNX's Reshape does not define (the -1 divides
    # by 0) and onnxruntime refuses,
    # except with allowzero=1 (the dynamo export), where it infers a value: Kiln refuses that too,
    # as ONNX and PyTorch's view do, naming the rule.
    rng = np.random.default_rng(batch * 100 + seq)
    if past is not None:
        feeds = cache_feeds(rng, batch, past, seq)
    else:
        feeds = {"input_ids": ids(rng, batch, seq)}
        if name == "bert.onnx":
            feeds["attention_mask"] = np.ones((batch, seq), np.int64)
    session = reference(name)
    _, ctx = compiled(name)
    try:
        session.run(None, feeds)
        refused = name == "gpt2_dynamo.onnx"
    except Exception:  # onnxruntime's own errors: the model does not take this length
        refused = True
    if refused:
        with pytest.raises(kiln.Error, match=r"\(Reshape\), (the dims besides the -1 must not multiply to 0|a 0 at "
                                             r"index \d is past the input rank)"):
            ctx.run([feeds[i.name] for i in session.get_inputs()])
    else:
        check(*run_both(name, feeds))


def test_greedy_generation_matches_step_by_step():
    # Prompt of 5 tokens with an empty cache, then 12 steps of one token each: Kiln's logits at
    # every step against onnxruntime's, both fed the same (teacher-forced) tokens and each its own
    # cache, so a cache that drifted would show at the next step.
    rng = np.random.default_rng(3)
    feeds = cache_feeds(rng, 1, 0, 5)
    kiln_cache = ort_cache = {k: v for k, v in feeds.items() if k.startswith("past")}
    tokens = feeds["input_ids"]
    _, ctx = compiled("gpt2_kv.onnx")
    session = reference("gpt2_kv.onnx")
    order = [i.name for i in session.get_inputs()]
    total = 0
    for step in range(13):
        total += tokens.shape[1]
        common = {"input_ids": tokens, "attention_mask": np.ones((1, total), np.int64)}
        got = ctx.run([{**common, **kiln_cache}[n] for n in order])
        want = session.run(None, {**common, **ort_cache})
        check(got, want)
        names = [f"past_key_values.{i}.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
        kiln_cache = dict(zip(names, got[1:]))
        ort_cache = dict(zip(names, want[1:]))
        assert kiln_cache[names[0]].shape[2] == total
        tokens = np.array([[int(want[0][0, -1].argmax())]], np.int64)  # onnxruntime's choice for both


@pytest.mark.parametrize("batch", [1, 3])
def test_bound_cache_appends_in_place_and_matches_step_by_step(batch):
    # The same generation with the cache bound (Context.bind_cache): one buffer per past, 20 rows
    # per head, which each step's run reads and appends to in place. Logits and presents against
    # onnxruntime's at every step; rows past those in use keep what they held.
    rng = np.random.default_rng(5 + batch)
    capacity, untouched = 20, np.float32(777)
    model, _ = compiled("gpt2_kv.onnx")
    ctx = model.context(device="cpu", cpu_threads=1)
    session = reference("gpt2_kv.onnx")
    order = [i.name for i in session.get_inputs()]
    names = [f"past_key_values.{i}.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    outputs = [o.name for o in session.get_outputs()]
    ctx.bind_cache({n: n.replace("past_key_values.", "present.") for n in names}, capacity)
    buffers = {n: np.full((batch, HEADS, capacity, HEAD_DIM), untouched, np.float32) for n in names}
    ort_cache = {n: np.zeros((batch, HEADS, 0, HEAD_DIM), np.float32) for n in names}
    tokens, total = ids(rng, batch, 5), 0
    for step in range(10):
        past, total = total, total + tokens.shape[1]
        common = {"input_ids": tokens, "attention_mask": np.ones((batch, total), np.int64)}
        logits = np.empty((batch, tokens.shape[1], VOCAB), np.float32)
        out = [logits if o == "logits" else buffers[o.replace("present.", "past_key_values.")][:, :, :total]
               for o in outputs]
        got = ctx.run([{**common, **{n: b[:, :, :past] for n, b in buffers.items()}}[n] for n in order], out=out)
        want = session.run(None, {**common, **ort_cache})
        check([got[0], *(b[:, :, :total] for b in (buffers[n] for n in names))], want)
        assert all((b[:, :, total:] == untouched).all() for b in buffers.values())
        ort_cache = dict(zip(names, want[1:]))
        tokens = want[0][:, -1].argmax(-1).reshape(batch, 1).astype(np.int64)
    # Unbound, the context hands out its own arrays again: the next step, on onnxruntime's cache.
    ctx.bind_cache({}, 1)
    feeds = {"input_ids": tokens, "attention_mask": np.ones((batch, total + 1), np.int64), **ort_cache}
    check(ctx.run([feeds[n] for n in order]), session.run(None, feeds))


def test_bind_cache_errors():
    model, _ = compiled("gpt2_kv.onnx")
    ctx = model.context(device="cpu", cpu_threads=1)
    with pytest.raises(kiln.Error, match="bind_cache: the model has no input 'past'"):
        ctx.bind_cache({"past": "present.0.key"}, 8)
    with pytest.raises(kiln.Error, match="only one of its present_key and present_value is bound: bind both"):
        ctx.bind_cache({"past_key_values.0.key": "present.0.key"}, 8)
    with pytest.raises(kiln.Error, match="capacity 0, expected at least 1"):
        ctx.bind_cache({"past_key_values.0.key": "present.0.key"}, 0)
