#!/usr/bin/env python3
"""KILN_MAX_CPU_ISA (runtime/cpu/arch/x86/cpu_isa.h) through `kiln run`, on the PP-OCRv4 text detector,
whose depthwise convolutions have an AVX2+FMA kernel and a baseline one.

- An unknown value fails the run: exit 1, naming the variable, the value and the accepted values.
- "baseline": the device line says so exactly when this CPU has AVX2 and FMA (otherwise the
  baseline kernels run anyway and there is nothing to say).
- On such a CPU the baseline run takes the other path: its outputs differ from the default run's
  in some bits (an FMA rounds once), and agree within atol 1e-5, rtol 1e-4.
- "avx2" and "avx512" give the default's outputs bit for bit: the depthwise convolution has no
  AVX-512 kernel, and the fused-program interpreter's builds give the same bits.

usage: cpu_isa_check.py KILN ONNX_MODEL_DIR WORK
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def cpu_has_avx2_fma():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "avx2" in flags and "fma" in flags
    except OSError:
        pass
    return False


def run(kiln, artifact, inputs, out_dir, isa):
    env = dict(os.environ)
    env.pop("KILN_MAX_CPU_ISA", None)
    if isa is not None:
        env["KILN_MAX_CPU_ISA"] = isa
    shutil.rmtree(out_dir, ignore_errors=True)
    # --no-onednn: Kiln's own kernels run every Conv (oneDNN reads its own ONEDNN_MAX_CPU_ISA).
    args = [kiln, "run", artifact, "--inputs", inputs, "--device", "cpu", "--outputs", out_dir, "--no-onednn"]
    return subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def output(out_dir):
    return numpy_helper.to_array(onnx.load_tensor(os.path.join(out_dir, "output_0.pb")))


def main():
    kiln, model_dir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    artifact = os.path.join(work, "det.kiln")
    subprocess.run([kiln, "compile", os.path.join(model_dir, "model.onnx"), "-o", artifact, "--arch", "none", "-q"],
                   check=True, stdout=subprocess.DEVNULL)
    inputs = os.path.join(model_dir, "test_data_set_0")
    failures = []

    bad = run(kiln, artifact, inputs, os.path.join(work, "bad"), "sse")
    want = ("KILN_MAX_CPU_ISA is 'sse', expected 'baseline' (baseline x86-64 kernels only), 'avx2' (at most AVX2+FMA) "
            "or 'avx512'")
    if bad.returncode != 1 or want not in bad.stderr:
        failures.append(f"KILN_MAX_CPU_ISA=sse: exit {bad.returncode}, stderr {bad.stderr!r}; expected exit 1 and {want!r}")

    runs = {isa: run(kiln, artifact, inputs, os.path.join(work, str(isa)), isa)
            for isa in (None, "avx512", "avx2", "baseline")}
    for isa, r in runs.items():
        if r.returncode != 0:
            failures.append(f"KILN_MAX_CPU_ISA={isa}: exit {r.returncode}: {r.stderr}")
    if failures:
        print("\n".join("FAIL " + f for f in failures))
        return 1

    capped = cpu_has_avx2_fma()
    note = ", baseline x86-64 kernels (KILN_MAX_CPU_ISA=baseline)"
    device_line = runs["baseline"].stdout.splitlines()[0]
    print(f"CPU has AVX2 and FMA: {capped}; baseline run: {device_line}")
    if (note in device_line) != capped:
        failures.append(f"the device line {'lacks' if capped else 'has'} {note!r}")

    default, avx512, avx2, baseline = (output(os.path.join(work, str(isa)))
                                       for isa in (None, "avx512", "avx2", "baseline"))
    for name, out in (("avx512", avx512), ("avx2", avx2)):
        if not np.array_equal(default, out):
            failures.append(f"KILN_MAX_CPU_ISA={name} changed the outputs; they should be the default's bits")
    differ = int(np.count_nonzero(default != baseline))
    worst = float(np.max(np.abs(default.astype(np.float64) - baseline)))
    print(f"baseline against default kernels: {differ} of {default.size} elements differ, max |diff| {worst:.3g}")
    if capped and differ == 0:
        failures.append("the baseline run gave the default run's bits: the AVX2+FMA kernels still ran")
    if not capped and differ != 0:
        failures.append("without AVX2+FMA both runs take the baseline kernels, yet the outputs differ")
    if not np.allclose(baseline, default, atol=1e-5, rtol=1e-4):
        failures.append(f"baseline and default kernels disagree beyond atol 1e-5, rtol 1e-4 (max |diff| {worst:.3g})")
    for f in failures:
        print("FAIL " + f)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
