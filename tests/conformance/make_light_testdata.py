#!/usr/bin/env python3
"""ONNX's `light` backend models with inputs and onnxruntime reference outputs.

The light models (ResNet-50, DenseNet-121, Inception v1/v2, ShuffleNet, SqueezeNet, VGG-19,
AlexNet, ZFNet-512: real architectures with constant weights) ship in the onnx wheel without
inputs (tests/conformance/get_onnx_tests.py fetches them). For each, this writes

    OUT/<name>/model.onnx                    the light model, without a final Softmax (below)
    OUT/<name>/test_data_set_0/input_N.pb    seeded uniform [0, 1) values, one per graph input
    OUT/<name>/test_data_set_0/output_N.pb   onnxruntime on CPU, graph optimizations off

so tests/e2e/run_model_dir.py compares Kiln with onnxruntime on the same inputs. Idempotent:
a model folder is skipped when its stamp records the model's sha256 and this script's version.

A final Softmax is removed, so the models output their logits (tests/README.md, "Conditioning").
The light models' weights are constants, so every one of their 1,000 logits is the same number,
about 1e10 on these inputs, and the Softmax of them is saturated: one unit in the last place of
a logit (1,024 at that magnitude), a legitimate difference of summation order between GEMM
kernels, turns its 0.001 into 0. The logits themselves compare well at a relative tolerance.

usage: make_light_testdata.py --light build/onnx-tests/light --out build/onnx-tests/light-cases
"""
import argparse
import glob
import hashlib
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

GENERATOR_VERSION = "2"
STAMP = "STAMP.txt"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def without_final_softmax(model):
    """The model with each graph output that a Softmax computes replaced by that Softmax's
    input (the logits), named as the logits are, and the Softmax removed."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}
    producers = {out: node for node in model.graph.node for out in node.output}
    for k, vi in enumerate(model.graph.output):
        node = producers.get(vi.name)
        if node is None or node.op_type != "Softmax":
            continue
        logits = node.input[0]
        if logits not in types:
            sys.exit(f"make_light_testdata: no type inferred for {logits!r}, the input of Softmax {node.name!r}")
        model.graph.output[k].CopyFrom(types[logits])
        model.graph.node.remove(node)
    onnx.checker.check_model(model)
    return model


def make_case(model_path, out_dir, seed):
    model = without_final_softmax(onnx.load(model_path))
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        feeds[vi.name] = rng.random(shape, dtype=np.float64).astype(dtype)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    set_dir = os.path.join(out_dir, "test_data_set_0")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(set_dir)
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    for k, (name, value) in enumerate(feeds.items()):
        with open(os.path.join(set_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, name).SerializeToString())
    for k, (info, value) in enumerate(zip(session.get_outputs(), outputs)):
        with open(os.path.join(set_dir, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(value), info.name).SerializeToString())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--light", required=True, help="folder of light_*.onnx")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    models = sorted(glob.glob(os.path.join(args.light, "light_*.onnx")))
    if not models:
        sys.exit(f"make_light_testdata: no light_*.onnx in {args.light} (run get_onnx_tests.py)")
    for seed, path in enumerate(models):
        name = os.path.basename(path)[len("light_"):-len(".onnx")]
        out_dir = os.path.join(args.out, name)
        stamp = os.path.join(out_dir, STAMP)
        want = f"{sha256(path)} v{GENERATOR_VERSION}"
        if os.path.exists(stamp) and open(stamp).read().strip() == want:
            continue
        make_case(path, out_dir, seed)
        with open(stamp, "w") as f:
            f.write(want + "\n")
        print(f"[light] {name}: inputs and onnxruntime outputs in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
