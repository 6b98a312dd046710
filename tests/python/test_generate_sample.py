"""samples/generate end to end: the kiln tool compiles gpt2_kv.onnx (a random-weight GPT-2 exported
with a KV cache, make_transformer_models.py) as it comes, the sample generates greedily from it,
and its tokens, their logits and their margins to the second-best logit are compared with a greedy
loop in onnxruntime on the ONNX model, which carries its own cache. Random weights make near-ties,
where float32 sums in another order may pick the other token: the prompt is one whose margins are
far above the logits' tolerance at every step, and the test checks that they still are. Then the
sample's errors: a model without a cache, and bad arguments. With --warmup the same tokens come
from the second generation on the context.

The binaries: $KILN_TOOL and $KILN_GENERATE, else build/kiln and build/samples/generate (samples/
generate/check.sh runs this file on the installed package's).

    build/venv/bin/python -m pytest tests/python/test_generate_sample.py   (scripts/python.sh runs it)
"""
import functools
import os
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper as h

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "tests", "python", "models")
KILN = os.environ.get("KILN_TOOL", os.path.join(ROOT, "build", "kiln"))
GENERATE = os.environ.get("KILN_GENERATE", os.path.join(ROOT, "build", "samples", "generate"))
PROMPT, TOKENS = [10, 20, 30, 40, 50], 8
# Logits ~1 summed in another order than onnxruntime's: a few ulps (test_exported_transformers.py).
TOLERANCE = 1e-4
# The smallest margin at which the token is taken as decided: far above the logits' differences.
CLEAR_MARGIN = 100 * TOLERANCE

pytestmark = pytest.mark.skipif(not (os.access(KILN, os.X_OK) and os.access(GENERATE, os.X_OK)),
                                reason=f"needs the kiln tool ({KILN}) and the generate sample ({GENERATE}) built")


@functools.lru_cache(maxsize=None)
def artifact(tmp_dir, name):
    out = os.path.join(tmp_dir, name.replace(".onnx", ".kiln"))
    subprocess.run([KILN, "compile", os.path.join(MODELS, name), "-o", out, "--arch", "none", "-q"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return str(tmp_path_factory.mktemp("generate"))


def generate(*args):
    return subprocess.run([GENERATE, *map(str, args)], capture_output=True, text=True, timeout=300)


def reference(prompt, tokens):
    """onnxruntime's greedy loop: (id, logit, margin) per generated token."""
    session = ort.InferenceSession(os.path.join(MODELS, "gpt2_kv.onnx"), providers=["CPUExecutionProvider"])
    pasts = [i.name for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    cache = {n: np.zeros((1, 4, 0, 16), np.float32) for n in pasts}
    step, total, got = np.array([prompt], np.int64), len(prompt), []
    for _ in range(tokens):
        outputs = dict(zip([o.name for o in session.get_outputs()],
                           session.run(None, {"input_ids": step, "attention_mask": np.ones((1, total), np.int64),
                                              **cache})))
        last = outputs["logits"][0, -1]
        best = int(last.argmax())
        got.append((best, float(last[best]), float(last[best] - np.delete(last, best).max())))
        cache = {n: outputs[n.replace("past_key_values.", "present.")] for n in pasts}
        step, total = np.array([[best]], np.int64), total + 1
    return got


@pytest.mark.parametrize("warmup", [False, True])
def test_greedy_generation_matches_onnxruntime(work, warmup):
    run = generate(artifact(work, "gpt2_kv.onnx"), "--prompt", ",".join(map(str, PROMPT)), "--tokens", TOKENS,
                   "--threads", 1, *(["--warmup"] if warmup else []))
    assert run.returncode == 0, run.stderr
    print(run.stdout)
    tokens = [(int(i), float(v), float(m)) for i, v, m in
              re.findall(r"^token \d+: id (\d+), logit (\S+), margin (\S+)$", run.stdout, re.M)]
    want = reference(PROMPT, TOKENS)
    assert min(m for _, _, m in want) >= CLEAR_MARGIN, f"the prompt has a near-tie in onnxruntime: {want}"
    assert len(tokens) == TOKENS, run.stdout
    assert [t[0] for t in tokens] == [w[0] for w in want]
    for (_, logit, margin), (_, want_logit, want_margin) in zip(tokens, want):
        assert abs(logit - want_logit) <= TOLERANCE and abs(margin - want_margin) <= 2 * TOLERANCE, (tokens, want)
    assert f"generated: {','.join(str(w[0]) for w in want)}\n" in run.stdout
    # The cache stayed in the sample's buffers, each step appending its row (ExecutionContext::BindCache).
    assert f"kv cache: appended in place, {len(PROMPT) + TOKENS - 1} rows per head" in run.stdout
    assert re.search(r"^time to first token: \d+\.\d+ ms", run.stdout, re.M)
    assert re.search(rf"^time per generated token: \d+\.\d+ ms mean, .* over {TOKENS - 1} steps", run.stdout, re.M)
    # The prompt (an empty cache) and every later step ran through the one entry; the warm-up as many.
    runs = 2 if warmup else 1
    assert f"'default' {runs * TOKENS} calls\n" in run.stdout


def test_position_ids(work):
    # A decoder with a position_ids input (Optimum's GPT-2 export has one; gpt2_kv.onnx computes
    # the positions from the cache's length) whose logits are one-hot at position + 1 and whose
    # cache holds the positions: the tokens are the positions that the sample fed.
    vocab = 16
    dims = ["batch", 1, "past_seq", 1]
    graph = h.make_graph(
        [h.make_node("Add", ["position_ids", "one"], ["next"]),
         h.make_node("Mod", ["next", "vocab"], ["wrapped"]),
         h.make_node("Gather", ["eye", "wrapped"], ["logits"]),
         h.make_node("Cast", ["position_ids"], ["positions"], to=TensorProto.FLOAT),
         h.make_node("Unsqueeze", ["positions", "axes"], ["new"]),
         h.make_node("Concat", ["past_key_values.0.key", "new"], ["present.0.key"], axis=2),
         h.make_node("Concat", ["past_key_values.0.value", "new"], ["present.0.value"], axis=2)],
        "positions",
        [h.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         h.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]),
         h.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, dims),
         h.make_tensor_value_info("past_key_values.0.value", TensorProto.FLOAT, dims)],
        [h.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab]),
         h.make_tensor_value_info("present.0.key", TensorProto.FLOAT, ["batch", 1, "total_seq", 1]),
         h.make_tensor_value_info("present.0.value", TensorProto.FLOAT, ["batch", 1, "total_seq", 1])],
        [h.make_tensor("one", TensorProto.INT64, [], [1]), h.make_tensor("vocab", TensorProto.INT64, [], [vocab]),
         h.make_tensor("eye", TensorProto.FLOAT, [vocab, vocab], np.eye(vocab, dtype=np.float32).ravel()),
         h.make_tensor("axes", TensorProto.INT64, [2], [1, 3])])
    model = os.path.join(work, "positions.onnx")
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), model)
    out = os.path.join(work, "positions.kiln")
    subprocess.run([KILN, "compile", model, "-o", out, "--arch", "none", "-q"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = generate(out, "--prompt", "9,9,9", "--tokens", 15)
    assert run.returncode == 0, run.stderr
    assert "generated: 3,4,5,6,7,8,9,10,11,12,13,14,15,0,1\n" in run.stdout
    # Its presents are Concats that no Attention reads: the context refuses to bind them, and the
    # sample swaps two sets of buffers instead.
    assert "kv cache: copied at each step (BindCache: INVALID_ARGUMENT: BindCache: entry 0 (default): input " \
           "'past_key_values.0.key' -> output 'present.0.key': the present is computed by" in run.stdout


def test_model_without_cache_is_refused(work):
    run = generate(artifact(work, "gpt2.onnx"), "--prompt", "1,2", "--tokens", 2)
    assert run.returncode == 1 and run.stdout == ""
    assert "not a decoder with a KV cache: expected inputs input_ids, past_key_values.N.key" in run.stderr
    assert "found inputs input_ids int64 [batch, seq]; outputs logits float32 [batch, seq, 512]" in run.stderr
    assert "no input past_key_values.0.key" in run.stderr and "no output present.0.key" in run.stderr


@pytest.mark.parametrize("args, message", [
    (["--prompt", "1,512", "--tokens", 2], "token 2 is not an id in 0 .. 511 (the model's vocabulary)"),
    (["--prompt", "1;2", "--tokens", 2], "expected a comma after token 1"),
    (["--prompt", "1,2", "--tokens", 0], "usage: generate MODEL.kiln"),
    (["--prompt", "1,2"], "usage: generate MODEL.kiln"),
])
def test_bad_arguments(work, args, message):
    run = generate(artifact(work, "gpt2_kv.onnx"), *args)
    assert run.returncode == 2 and message in run.stderr, run.stderr
