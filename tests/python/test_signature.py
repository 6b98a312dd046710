"""kiln.load's trusted_public_keys and weights_key (docs/security.md, "Signed artifacts"): an
artifact signed and encrypted by `kiln sign` with keys the openssl command line made.

    KILN_TOOL=build/kiln build/venv/bin/python -m pytest tests/python -k sign
"""
import os
import shutil
import subprocess

import numpy as np
import onnx.numpy_helper as nh
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILN_TOOL = os.environ.get("KILN_TOOL", os.path.join(ROOT, "build", "kiln"))

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None or not os.access(KILN_TOOL, os.X_OK),
                                reason="needs the openssl command and the kiln tool (KILN_TOOL)")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """y = x * 2 + 1, compiled, signed with key a, and signed with key a with its weights
    encrypted under key id 'py'; the PEM public keys a and b and the weights key."""
    d = tmp_path_factory.mktemp("sign")
    graph = h.make_graph(
        [h.make_node("Mul", ["x", "two"], ["m"]), h.make_node("Add", ["m", "one"], ["y"])], "scale",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
        [nh.from_array(np.array([2, 2, 2], np.float32), "two"), nh.from_array(np.array([1, 1, 1], np.float32), "one")])
    plain = kiln.compile(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(d / "plain.kiln"),
                         archs="none", progress=False)
    for k in "ab":
        openssl("genpkey", "-algorithm", "ED25519", "-out", str(d / f"{k}.pem"))
        openssl("pkey", "-in", str(d / f"{k}.pem"), "-pubout", "-out", str(d / f"{k}.pub.pem"))
    key = bytes(range(32))
    (d / "w.key").write_bytes(key)
    subprocess.run([KILN_TOOL, "sign", plain, "--key", str(d / "a.pem"), "-o", str(d / "signed.kiln")], check=True,
                   capture_output=True)
    subprocess.run([KILN_TOOL, "sign", plain, "--key", str(d / "a.pem"), "--encrypt-weights", str(d / "w.key"),
                    "--key-id", "py", "-o", str(d / "sealed.kiln")], check=True, capture_output=True)
    return {"plain": plain, "signed": str(d / "signed.kiln"), "sealed": str(d / "sealed.kiln"), "key": key,
            "a": (d / "a.pub.pem").read_text(), "b": (d / "b.pub.pem").read_text()}


def code_of(fn):
    with pytest.raises(kiln.Error) as e:
        fn()
    return e.value.code, e.value.message


def test_sign_required_signature(signed):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = kiln.load(signed["signed"], trusted_public_keys=[signed["b"], signed["a"]])
    np.testing.assert_array_equal(model(x), x * 2 + 1)
    with open(signed["signed"], "rb") as f:
        assert kiln.load(f.read(), trusted_public_keys=[signed["a"]]).format_version == 3
    code, message = code_of(lambda: kiln.load(signed["plain"], trusted_public_keys=[signed["a"]]))
    assert code == "FAILED_PRECONDITION" and "the artifact is not signed" in message
    code, message = code_of(lambda: kiln.load(signed["signed"], trusted_public_keys=[signed["b"]]))
    assert code == "FAILED_PRECONDITION" and "which is not among the 1 trusted public key(s)" in message
    assert code_of(lambda: kiln.load(signed["signed"], trusted_public_keys=["not a key"]))[0] == "INVALID_ARGUMENT"


def test_sign_encrypted_weights_key_as_bytes_or_callable(signed):
    x = np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(kiln.load(signed["sealed"], weights_key=signed["key"])(x), x * 2 + 1)
    asked = []

    def lookup(key_id):
        asked.append(key_id)
        return signed["key"]

    model = kiln.load(signed["sealed"], trusted_public_keys=[signed["a"]], weights_key=lookup)
    assert asked == ["py"] and model.format_version == 10
    np.testing.assert_array_equal(model(x), x * 2 + 1)

    code, message = code_of(lambda: kiln.load(signed["sealed"]))
    assert code == "FAILED_PRECONDITION" and "LoadOptions::weights_key is not set" in message
    code, message = code_of(lambda: kiln.load(signed["sealed"], trusted_public_keys=[signed["a"]],
                                              weights_key=bytes(32)))
    assert code == "INVALID_ARGUMENT" and "so the key is wrong" in message
    assert code_of(lambda: kiln.load(signed["sealed"], weights_key=b"short"))[0] == "INVALID_ARGUMENT"

    def failing(key_id):
        raise KeyError(key_id)

    code, message = code_of(lambda: kiln.load(signed["sealed"], weights_key=failing))
    assert code == "INVALID_ARGUMENT" and "weights_key raised" in message and "py" in message
