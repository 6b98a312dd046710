#!/usr/bin/env python3
"""Fetches ONNX's backend test data (node and light cases) for the conformance runner.

The data ships inside the `onnx` wheel; the wheel pinned here is downloaded with pip (no
install, no dependencies) and its `onnx/backend/test/data/{node,light}` folders are extracted to

    OUT/node/<case>/model.onnx, test_data_set_K/{input,output}_N.pb
    OUT/light/light_<model>.onnx, light_<model>_output_0.pb

Idempotent: nothing is done when OUT/STAMP.txt names the pinned version.

usage: get_onnx_tests.py --out build/onnx-tests
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

# 1.22.0: 1,765 node cases. Newer wheels no longer ship the node data.
ONNX_VERSION = "1.22.0"
STAMP = "STAMP.txt"
PARTS = ("node", "light")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    stamp = os.path.join(args.out, STAMP)
    if os.path.exists(stamp) and open(stamp).read().strip() == ONNX_VERSION:
        print(f"[onnx-tests] onnx {ONNX_VERSION} test data already in {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
               "--only-binary", ":all:", "-d", tmp, f"onnx=={ONNX_VERSION}"]
        print(f"[onnx-tests] {' '.join(cmd[2:])}")
        if subprocess.call(cmd) != 0:
            print(f"[onnx-tests] error: could not download onnx {ONNX_VERSION}", file=sys.stderr)
            return 1
        wheel = glob.glob(os.path.join(tmp, "onnx-*.whl"))[0]
        for part in PARTS:
            shutil.rmtree(os.path.join(args.out, part), ignore_errors=True)
        prefix = "onnx/backend/test/data/"
        count = 0
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if not name.startswith(prefix) or name.endswith("/"):
                    continue
                rel = name[len(prefix):]
                if rel.split("/", 1)[0] not in PARTS:
                    continue
                target = os.path.join(args.out, rel)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(name) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                count += 1
    with open(stamp, "w") as f:
        f.write(ONNX_VERSION + "\n")
    cases = len(os.listdir(os.path.join(args.out, "node")))
    print(f"[onnx-tests] {count} files: {cases} node cases and the light models in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
