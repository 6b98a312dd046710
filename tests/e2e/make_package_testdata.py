#!/usr/bin/env python3
"""Real-model test data from pip packages, in the ONNX backend-test layout.

Copies trained ONNX models out of the silero-vad and rapidocr-onnxruntime wheels (installed by
scripts/setup.sh with --no-deps) and writes, for each one,

    OUT/<name>/model.onnx
    OUT/<name>/test_data_set_K/input_N.pb   (named and ordered as the graph's inputs)
    OUT/<name>/test_data_set_K/output_N.pb  (ONNX Runtime on CPU, graph optimizations off)

The inputs are synthetic but realistic, made with numpy alone (no network, no media files): a
voiced, speech-like signal for Silero VAD, and white images with dark text-like strokes
preprocessed as PaddleOCR does for the OCR models. Everything is seeded, so reruns give the
same bytes.

Idempotent: a model folder is skipped when its stamp file records the current model's sha256
and this generator's version.

usage: make_package_testdata.py --out build/testdata
"""
import argparse
import hashlib
import importlib.util
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

GENERATOR_VERSION = "1"
STAMP = "STAMP.txt"


def package_file(package, *parts):
    """Path of a data file inside an installed package, found without importing it (importing
    silero_vad or rapidocr_onnxruntime would need dependencies we do not install)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"make_package_testdata: pip package '{package}' is not installed (run scripts/setup.sh)")
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    if not os.path.isfile(path):
        sys.exit(f"make_package_testdata: {path} is missing from the '{package}' package")
    return path


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- Silero VAD: speech-like audio ---------------------------------------------------------------

SR = 16000
CONTEXT = 64
CHUNK = 512


VOWEL_FORMANTS = np.array([(730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480),
                           (660, 1720, 2410), (490, 1350, 1690)], np.float64)


def voiced_signal(seconds, seed):
    """Speech-like audio: a harmonic series on a drifting pitch, filtered by three formants that
    glide between vowel targets every 0.18 s, a syllable-rate envelope, and short noise bursts
    (consonants) at syllable boundaries. Silero VAD scores it above 0.9 after the first chunk."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    i = np.arange(n)
    t = i / SR
    f0 = 120 + 25 * np.sin(2 * np.pi * 0.9 * t) + 8 * np.sin(2 * np.pi * 3.1 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    seg = int(0.18 * SR)
    targets = VOWEL_FORMANTS[rng.integers(0, len(VOWEL_FORMANTS), n // seg + 2)]
    glide = np.clip(((i % seg) / seg - 0.7) / 0.3, 0, 1)[:, None]
    formants = targets[i // seg] + (targets[i // seg + 1] - targets[i // seg]) * glide
    bandwidths = (90, 110, 170)
    x = np.zeros(n)
    for k in range(1, 40):
        fk = k * f0
        gain = sum(1 / (1 + ((fk - formants[:, j]) / bandwidths[j]) ** 2) for j in range(3)) / k ** 0.6
        x += gain * np.sin(k * phase + rng.uniform(0, 2 * np.pi))
    x *= np.sqrt(0.5 - 0.5 * np.cos(2 * np.pi * 3.5 * t))  # ~3.5 syllables a second
    bursts = np.exp(-(np.mod(t, 1 / 3.5) / 0.02) ** 2)
    x += 0.1 * np.abs(x).max() * bursts * rng.standard_normal(n)
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


def silero_sets(session, rate=SR):
    """Streams the signal through the model as the Silero protocol prescribes (state carried; at
    16 kHz 64 context samples + 512 new, at 8 kHz 32 + 256), and returns the inputs of chunk 0
    (zero state), of a later chunk (carried, nonzero state), and both stacked as batch 2."""
    audio = voiced_signal(1.5, seed=1)[::SR // rate]
    chunk, context_len = CHUNK * rate // SR, CONTEXT * rate // SR
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(context_len, np.float32)
    sr = np.array(rate, np.int64)
    chunks = []
    for start in range(0, len(audio) - chunk + 1, chunk):
        x = np.concatenate([context, audio[start:start + chunk]])[None, :]
        chunks.append((x, state))
        _, state = session.run(None, {"input": x, "state": state, "sr": sr})
        context = x[0, -context_len:]
    first, later = chunks[0], chunks[min(20, len(chunks) - 1)]
    assert np.abs(later[1]).max() > 0, "the carried state should be nonzero"
    batch2 = (np.concatenate([first[0], later[0]]), np.concatenate([first[1], later[1]], axis=1))
    return [[x, s, sr] for x, s in (first, later, batch2)]


def silero_both_rates_sets(session):
    """silero_vad.onnx, whose If on `sr` picks its 16 kHz or its 8 kHz network: the 16 kHz sets,
    then the 8 kHz ones."""
    return silero_sets(session) + silero_sets(session, 8000)


# --- PaddleOCR: images with text-like strokes -----------------------------------------------------

def draw_text_line(img, x0, y0, height, width, rng, ink):
    """Dark glyph-like strokes (stems, bars, bowls' corners) in a line of text."""
    x = x0
    stroke = max(1, height // 8)
    while x < x0 + width - height // 2:
        w = int(rng.integers(height // 3, height * 3 // 4))
        top, bottom = y0 + int(rng.integers(0, height // 4)), y0 + height
        kind = rng.integers(0, 4)
        img[top:bottom, x:x + stroke] = ink                                # left stem
        if kind in (0, 2):
            img[top:bottom, x + w - stroke:x + w] = ink                    # right stem
        if kind in (0, 1):
            img[top:top + stroke, x:x + w] = ink                           # top bar
        if kind in (1, 2, 3):
            mid = (top + bottom) // 2
            img[mid:mid + stroke, x:x + w] = ink                           # middle bar
        if kind == 3:
            img[bottom - stroke:bottom, x:x + w] = ink                     # bottom bar
        x += w + int(rng.integers(stroke + 1, height // 2))
        if rng.random() < 0.15:
            x += height // 2                                               # word gap


def text_image(h, w, lines, seed):
    """A white BGR uint8 canvas with slightly uneven paper and a few dark text lines."""
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 235, np.uint8)
    img = np.clip(img.astype(np.int16) + rng.integers(-12, 12, (h, w, 1)), 0, 255).astype(np.uint8)
    for y0, height, x0, width in lines:
        ink = np.array(rng.integers(10, 70, 3), np.uint8)
        draw_text_line(img, x0, y0, height, width, rng, ink)
    return img


def ocr_cls_sets():
    """ch_ppocr_mobile_v2.0_cls: 3x48x192, (x/255-0.5)/0.5, right-padded with zeros, batch 2:
    an upright text line and the same line rotated 180 degrees."""
    img = text_image(48, 160, [(10, 28, 4, 150)], seed=2)
    batch = []
    for im in (img, img[::-1, ::-1]):
        x = (im.astype(np.float32) / 255.0 - 0.5) / 0.5
        x = x.transpose(2, 0, 1)
        padded = np.zeros((3, 48, 192), np.float32)
        padded[:, :, :x.shape[2]] = x
        batch.append(padded)
    return [[np.stack(batch)]]


def ocr_det_sets():
    """ch_PP-OCRv4_det: 1x3x160x320 (multiples of 32), ImageNet mean/std on x/255."""
    img = text_image(160, 320, [(18, 22, 16, 280), (58, 30, 24, 230), (108, 18, 40, 250)], seed=3)
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    x = ((img.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1)[None]
    return [[np.ascontiguousarray(x, dtype=np.float32)]]


# --- writing ----------------------------------------------------------------------------------

MODELS = [
    # (folder name, package, path in package, make input sets(session))
    ("silero_vad_16k_op15", "silero_vad", ("data", "silero_vad_16k_op15.onnx"), silero_sets),
    ("silero_vad", "silero_vad", ("data", "silero_vad.onnx"), silero_both_rates_sets),
    ("ch_ppocr_mobile_v2.0_cls", "rapidocr_onnxruntime", ("models", "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
     lambda s: ocr_cls_sets()),
    ("ch_PP-OCRv4_det", "rapidocr_onnxruntime", ("models", "ch_PP-OCRv4_det_infer.onnx"), lambda s: ocr_det_sets()),
]


def session_for(model_path):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])


def graph_io(model_path):
    model = onnx.load(model_path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    return inputs, outputs


def write_model_dir(out, name, src, make_sets):
    final = os.path.join(out, name)
    stamp_text = f"sha256 {sha256(src)}\ngenerator {GENERATOR_VERSION}\nsource {os.path.basename(src)}\n"
    stamp_path = os.path.join(final, STAMP)
    if os.path.isfile(stamp_path) and open(stamp_path).read() == stamp_text and \
            os.path.isfile(os.path.join(final, "model.onnx")):
        print(f"[testdata] {name}: up to date")
        return
    tmp = os.path.join(out, f".tmp-{name}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    model_path = os.path.join(tmp, "model.onnx")
    shutil.copyfile(src, model_path)
    input_names, output_names = graph_io(model_path)
    session = session_for(model_path)
    sets = make_sets(session)
    for k, inputs in enumerate(sets):
        set_dir = os.path.join(tmp, f"test_data_set_{k}")
        os.makedirs(set_dir)
        assert len(inputs) == len(input_names), (name, len(inputs), input_names)
        feeds = dict(zip(input_names, inputs))
        outputs = session.run(output_names, feeds)
        for n, (iname, value) in enumerate(feeds.items()):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(value), iname), os.path.join(set_dir, f"input_{n}.pb"))
        for n, (oname, value) in enumerate(zip(output_names, outputs)):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(value), oname), os.path.join(set_dir, f"output_{n}.pb"))
        shapes = ", ".join(f"{n}{list(np.shape(v))}" for n, v in feeds.items())
        print(f"[testdata] {name}/test_data_set_{k}: {shapes}")
    with open(os.path.join(tmp, STAMP), "w") as f:
        f.write(stamp_text)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder, e.g. build/testdata")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, package, parts, make_sets in MODELS:
        write_model_dir(args.out, name, package_file(package, *parts), make_sets)


if __name__ == "__main__":
    main()
