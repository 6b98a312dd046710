#!/usr/bin/env python3
"""The repaired wheel's check (scripts/wheel.sh, python/README.md#a-wheel-that-installs-anywhere).

    wheel_check.py prepare TESTDATA OUT NAME...   (build/venv, with onnx): copies each model's
        model.onnx to OUT/NAME/ and its stored test sets (input_N.pb, output_N.pb) into
        OUT/NAME/reference.npz, so the check needs no ONNX reader of its own;
    wheel_check.py run OUT [--kiln-first | --global]  (the clean venv the wheel went into): imports
        onnx and onnxruntime (pip's, each with its own protobuf) and kiln in one process, in that
        order or kiln first; --global opens onnx's and onnxruntime's extensions with RTLD_GLOBAL,
        so that the protobuf symbols they export are in the global scope when kiln is loaded (the
        wheel's compiler library has ONNX and protobuf inside, hidden, so none binds to them;
        NumPy is imported first, as usual: opened globally, its OpenBLAS's unprefixed internal
        symbols would bind the wheel's OpenBLAS, python/README.md); compiles each model with kiln.compile from an onnx.ModelProto, runs
        every stored test set on the CPU, and compares the outputs with the stored ones and with
        onnxruntime's; a compile for the default GPU archs without NVRTC (the wheel does not require
        it) must fail saying how to get it; then checks /proc/self/maps: every library Kiln's
        libraries need is mapped from the wheel (kiln/, kiln.libs/), none from the system.
"""
import os
import sys

ATOL = RTOL = 1e-4  # the Python tier's tolerance against onnxruntime (tests/python/test_kiln.py)

# Libraries the wheel bundles: mapped from anywhere but the venv, they would mean the wheel leans
# on the machine it was built on.
BUNDLED = ("libkiln_", "libonnx", "libprotobuf", "libdnnl", "libopenblas", "libgomp", "libgfortran",
           "libquadmath", "libLLVM", "libz3", "libicu", "libxml2", "libfmt", "libxxhash", "libcrypto-",
           "libOpenCL")


def prepare(testdata, out, names):
    import shutil
    import numpy as np
    import onnx
    from onnx import numpy_helper

    for name in names:
        src, dst = os.path.join(testdata, name), os.path.join(out, name)
        os.makedirs(dst, exist_ok=True)
        shutil.copyfile(os.path.join(src, "model.onnx"), os.path.join(dst, "model.onnx"))
        graph = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False).graph
        arrays = {}
        for k, case in enumerate(sorted(d for d in os.listdir(src) if d.startswith("test_data_set_"))):
            for kind, values in (("input", graph.input), ("output", graph.output)):
                for n in range(len(values)):
                    path = os.path.join(src, case, f"{kind}_{n}.pb")
                    if os.path.isfile(path):
                        tensor = onnx.load_tensor(path)
                        arrays[f"{k}/{kind}/{tensor.name or values[n].name}"] = numpy_helper.to_array(tensor)
        np.savez(os.path.join(dst, "reference.npz"), **arrays)
        print(f"[wheel_check] {name}: model.onnx and {len(arrays)} stored tensors -> {dst}")


def run(out, mode):
    import importlib
    order = ["kiln", "onnx", "onnxruntime"] if mode == "--kiln-first" else ["onnx", "onnxruntime", "kiln"]
    mods = {}
    if mode == "--global":
        import numpy  # noqa: F401  (RTLD_LOCAL, as usual: see the docstring)
    for m in order:
        if mode == "--global" and m != "kiln":
            flags = sys.getdlopenflags()
            sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)
            mods[m] = importlib.import_module(m)
            sys.setdlopenflags(flags)
        else:
            mods[m] = importlib.import_module(m)
    kiln, onnx, ort = mods["kiln"], mods["onnx"], mods["onnxruntime"]
    import numpy as np

    how = " (onnx and onnxruntime with RTLD_GLOBAL)" if mode == "--global" else ""
    print(f"[wheel_check] imported {', '.join(order)}{how}: kiln from {os.path.dirname(kiln.__file__)}")
    worst = 0.0
    for name in sorted(os.listdir(out)):
        model_path = os.path.join(out, name, "model.onnx")
        if not os.path.isfile(model_path):
            continue
        proto = onnx.load(model_path)
        onnx.checker.check_model(proto)  # pip's onnx, with the protobuf in its own extension
        model = kiln.load(kiln.compile(proto, archs="none", progress=False))
        ctx = model.context(device="cpu")
        session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        ref = np.load(os.path.join(out, name, "reference.npz"))
        cases = sorted({key.split("/")[0] for key in ref.files}, key=int)
        model_worst = 0.0
        for case in cases:
            inputs = {t.name: ref[f"{case}/input/{t.name}"] for t in model.inputs}
            got = ctx.run(inputs)
            theirs = session.run(None, inputs)
            for g, spec, o in zip(got, model.outputs, theirs):
                want = ref[f"{case}/output/{spec.name}"]
                np.testing.assert_allclose(g, want, rtol=RTOL, atol=ATOL, err_msg=f"{name} set {case} {spec.name}")
                np.testing.assert_allclose(o, want, rtol=RTOL, atol=ATOL, err_msg=f"onnxruntime, {name} {spec.name}")
                model_worst = max(model_worst, float(np.max(np.abs(g.astype(np.float64) - want))) if g.size else 0.0)
        worst = max(worst, model_worst)
        print(f"[wheel_check] {name}: compiled in this venv, {len(cases)} stored test sets on the CPU "
              f"({ctx.device_note}): max abs diff {model_worst:.3g} against the stored outputs")

    # The default archs are GPU ones, which need NVRTC: opened with dlopen, not required by the wheel.
    try:
        kiln.compile(proto, progress=False)
        print("[wheel_check] NVRTC found: a compile for the default GPU archs worked")
    except kiln.Error as e:
        if e.code != "FAILED_PRECONDITION" or "nvidia-cuda-nvrtc" not in str(e) or "--arch none" not in str(e):
            sys.exit(f"[wheel_check] FAIL: a GPU compile without NVRTC: {e}")
        print(f"[wheel_check] no NVRTC: a compile for the default GPU archs says {str(e)[:160]}...")

    venv = os.path.realpath(sys.prefix)
    outside, strays = set(), []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if ".so" not in os.path.basename(path):
                continue
            if os.path.realpath(path).startswith(venv + os.sep):
                continue
            outside.add(path)
            if os.path.basename(path).startswith(BUNDLED):
                strays.append(path)
    print("[wheel_check] libraries mapped from outside the venv:",
          " ".join(sorted(os.path.basename(p) for p in outside)))
    if strays:
        sys.exit(f"[wheel_check] FAIL: libraries the wheel should bring came from the system: {sorted(strays)}")
    print(f"[wheel_check] OK: max abs diff {worst:.3g} (tolerance {ATOL}); Kiln's libraries all from the wheel")


def main(argv):
    if len(argv) >= 4 and argv[1] == "prepare":
        prepare(argv[2], argv[3], argv[4:])
    elif len(argv) in (3, 4) and argv[1] == "run" and argv[3:] in ([], ["--kiln-first"], ["--global"]):
        run(argv[2], argv[3] if len(argv) == 4 else "")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
