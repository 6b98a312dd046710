#!/usr/bin/env python3
"""A face detector with non-maximum suppression in the graph, from ultraface-rfb-320.

The deployment export of a detector ends in NonMaxSuppression, whose output size depends on the
data: Kiln compiles it with a run-time dim (schema/VERSIONS.md, format 5). This script appends
the standard post-processing to ultraface-rfb-320 (scores [1, 4420, 2] and normalized corner
boxes [1, 4420, 4]) with onnx.helper, after converting the model from opset 9 to 11 (the first
opsets with NonMaxSuppression and input-driven Slice):

    face    = scores[:, :, 1:2] transposed to [1, 1, 4420]       (class 1: face)
    keep    = NonMaxSuppression(boxes, face, 200, iou 0.3, score 0.7)   -> int64 [K, 3]
    index   = keep[:, 2]                                          -> [K]
    box_px  = boxes[0][index] * [320, 240, 320, 240]              -> float32 [K, 4] (pixels)
    score   = face[0, 0][index]                                   -> float32 [K]

and writes OUT/ultraface_nms/model.onnx with test sets in the ONNX backend-test layout: the
model's two real images (different numbers of faces) and a mid-gray image (no face, K = 0).
Expected outputs come from ONNX Runtime on CPU, graph optimizations off.

Idempotent: skipped when OUT/ultraface_nms/STAMP.txt records the source model's sha256 and this
generator's version.

usage: make_nms_detector.py --detector DIR/ultraface-rfb-320 --out build/testdata
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, version_converter

from make_package_testdata import STAMP, sha256

GENERATOR_VERSION = "1"
NAME = "ultraface_nms"


def with_nms(model):
    """ultraface at opset 11 with the post-processing above appended."""
    g = model.graph
    # The old exporter lists every initializer as a graph input too; keep only the image.
    inits = {t.name for t in g.initializer}
    keep_inputs = [i for i in g.input if i.name not in inits]
    del g.input[:]
    g.input.extend(keep_inputs)
    model = version_converter.convert_version(model, 11)
    g = model.graph
    consts = {
        "nms_face_start": np.array([1], np.int64),
        "nms_face_end": np.array([2], np.int64),
        "nms_face_axis": np.array([2], np.int64),
        "nms_max_per_class": np.array([200], np.int64),
        "nms_iou": np.array([0.3], np.float32),
        "nms_score": np.array([0.7], np.float32),
        "nms_box_column": np.array(2, np.int64),
        "nms_flat": np.array([-1], np.int64),
        "nms_pixels": np.array([320, 240, 320, 240], np.float32),
    }
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    nodes = [
        helper.make_node("Slice", ["scores", "nms_face_start", "nms_face_end", "nms_face_axis"], ["nms_face_col"],
                         name="nms_face_column"),
        helper.make_node("Transpose", ["nms_face_col"], ["nms_face"], perm=[0, 2, 1], name="nms_face_scores"),
        helper.make_node("NonMaxSuppression",
                         ["boxes", "nms_face", "nms_max_per_class", "nms_iou", "nms_score"], ["nms_keep"],
                         name="nms"),
        helper.make_node("Gather", ["nms_keep", "nms_box_column"], ["nms_index"], axis=1, name="nms_box_index"),
        helper.make_node("Squeeze", ["boxes"], ["nms_boxes0"], axes=[0], name="nms_batch0"),
        helper.make_node("Gather", ["nms_boxes0", "nms_index"], ["nms_kept_boxes"], axis=0, name="nms_gather_boxes"),
        helper.make_node("Mul", ["nms_kept_boxes", "nms_pixels"], ["box_px"], name="nms_to_pixels"),
        helper.make_node("Reshape", ["nms_face", "nms_flat"], ["nms_face_flat"], name="nms_flat_scores"),
        helper.make_node("Gather", ["nms_face_flat", "nms_index"], ["score"], axis=0, name="nms_gather_scores"),
    ]
    g.node.extend(nodes)
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info("box_px", onnx.TensorProto.FLOAT, ["K", 4]),
                     helper.make_tensor_value_info("score", onnx.TensorProto.FLOAT, ["K"])])
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detector", required=True, help="the ultraface-rfb-320 folder (model.onnx, test_data_set_K)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    src = os.path.join(args.detector, "model.onnx")
    if not os.path.isfile(src):
        sys.exit(f"make_nms_detector: no {src}")
    out = os.path.join(args.out, NAME)
    stamp = f"{sha256(src)} {GENERATOR_VERSION}\n"
    stamp_path = os.path.join(out, STAMP)
    if os.path.isfile(stamp_path) and open(stamp_path).read() == stamp:
        print(f"make_nms_detector: {out} is up to date")
        return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    model = with_nms(onnx.load(src))
    onnx.save(model, os.path.join(out, "model.onnx"))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(os.path.join(out, "model.onnx"), options, providers=["CPUExecutionProvider"])
    images = []
    for k in range(2):
        tensor = onnx.load_tensor(os.path.join(args.detector, f"test_data_set_{k}", "input_0.pb"))
        images.append(numpy_helper.to_array(tensor))
    images.append(np.zeros((1, 3, 240, 320), np.float32))  # mid-gray, (127 - 127) / 128: no face
    counts = []
    for k, image in enumerate(images):
        folder = os.path.join(out, f"test_data_set_{k}")
        os.makedirs(folder)
        onnx.save_tensor(numpy_helper.from_array(image, "input"), os.path.join(folder, "input_0.pb"))
        results = session.run(None, {"input": image})
        for i, (name, value) in enumerate(zip(("box_px", "score"), results)):
            onnx.save_tensor(numpy_helper.from_array(value, name), os.path.join(folder, f"output_{i}.pb"))
        counts.append(results[1].shape[0])
    if len(set(counts)) != len(counts):
        sys.exit(f"make_nms_detector: the test sets should keep different numbers of faces, found {counts}")
    with open(stamp_path, "w") as f:
        f.write(stamp)
    print(f"make_nms_detector: {out}: faces kept per test set {counts}")


if __name__ == "__main__":
    main()
