"""Reference data for the Triton tier (tests/serving/triton_test.py), written as .npy files so
that the test's own venv (Triton's client and server, which pin numpy 1.x) needs nothing else.

For each model served by the test: the inputs and onnxruntime's outputs of its test set
(build/testdata/<model>/test_data_set_0, made by tests/e2e/make_package_testdata.py from
onnxruntime), and for the PaddleOCR classifier also 16 single-row inputs (seeded random images)
with onnxruntime's outputs, which the dynamic-batching check sends one request each; and a
small model of its own (gather, below) with a row whose index is out of range.

  build/venv/bin/python tests/serving/triton_refs.py --testdata build/testdata --out DIR
writes DIR/<model>/{inputs,outputs}/<name>.npy and DIR/cls_rows/{x,y}_<i>.npy.
"""
import argparse
import glob
import os

import numpy as np
import onnx
import onnx.numpy_helper as nh
import onnxruntime as ort

MODELS = ["ch_ppocr_mobile_v2.0_cls", "ch_PP-OCRv4_det", "silero_vad"]


def save_set(model_dir, out):
    for kind in ("input", "output"):
        os.makedirs(os.path.join(out, kind + "s"), exist_ok=True)
        for f in sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", kind + "_*.pb"))):
            t = onnx.load_tensor(f)
            np.save(os.path.join(out, kind + "s", t.name.replace("/", "_") + ".npy"), nh.to_array(t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    for m in MODELS:
        save_set(os.path.join(a.testdata, m), os.path.join(a.out, m))
    cls = os.path.join(a.testdata, "ch_ppocr_mobile_v2.0_cls", "model.onnx")
    session = ort.InferenceSession(cls, providers=["CPUExecutionProvider"])
    rows = os.path.join(a.out, "cls_rows")
    os.makedirs(rows, exist_ok=True)
    rng = np.random.default_rng(7)
    for i in range(16):
        x = rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
        (y,) = session.run(None, {"x": x})
        np.save(os.path.join(rows, f"x_{i}.npy"), x)
        np.save(os.path.join(rows, f"y_{i}.npy"), y)
    gather_model(os.path.join(a.out, "gather"))
    print(f"[triton refs] {len(MODELS)} test sets, 16 classifier rows and the gather model in {a.out}")


def gather_model(out):
    """gather/model.onnx: y = GatherElements(x, idx, axis=1), z = x + x, for x float32[N, 4] and
    idx int64[N, 2]; rows 0..3 with row 3's index out of range (9), and onnxruntime's outputs of
    the good rows and of an empty batch (N = 0)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    os.makedirs(out, exist_ok=True)
    graph = h.make_graph(
        [h.make_node("GatherElements", ["x", "idx"], ["y"], axis=1), h.make_node("Add", ["x", "x"], ["z"])],
        "gather",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]), h.make_tensor_value_info("idx", T.INT64, ["N", 2])],
        [h.make_tensor_value_info("y", T.FLOAT, ["N", 2]), h.make_tensor_value_info("z", T.FLOAT, ["N", 4])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    onnx.save(model, os.path.join(out, "model.onnx"))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    for i in range(5):
        n = 0 if i == 4 else 1
        x = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
        idx = rng.integers(0, 4, (n, 2)).astype(np.int64)
        if i == 3:
            idx[0, 1] = 9  # out of range: this row alone must fail
        np.save(os.path.join(out, f"x_{i}.npy"), x)
        np.save(os.path.join(out, f"idx_{i}.npy"), idx)
        if i != 3:
            y, z = session.run(None, {"x": x, "idx": idx})
            np.save(os.path.join(out, f"y_{i}.npy"), y)
            np.save(os.path.join(out, f"z_{i}.npy"), z)


if __name__ == "__main__":
    main()
