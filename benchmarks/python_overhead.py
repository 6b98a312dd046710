"""The Python package's cost per call over the C++ Run it wraps (python/README.md, "Speed").

    build/venv/bin/python benchmarks/python_overhead.py [--model build/testdata/silero_vad/model.onnx] [--calls 20000]

Compiles the model (CPU-only), then calls Context.run on its first test set's inputs, on one
thread. Per call it reads the wall time around ctx.run (time.perf_counter_ns) and the time Kiln's
C++ Run itself took (CompileStats.last_trace_host_time(): the prologue, the computation and the
outputs' delivery); the difference is the Python layer: converting the inputs, releasing and
taking the GIL, copying the outputs into new NumPy arrays. Prints the median and p90 of each, for
inputs as a list and as a dict, and for model(...) (the default context).
"""
import argparse
import glob
import os
import statistics
import time

import numpy as np
import onnx
import onnx.numpy_helper as nh

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "testdata", "silero_vad", "model.onnx"))
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    inputs = {}
    for f in sorted(glob.glob(os.path.join(os.path.dirname(a.model), "test_data_set_0", "input_*.pb"))):
        t = onnx.load_tensor(f)
        inputs[t.name] = nh.to_array(t)
    model = kiln.load(kiln.compile(a.model, archs="none", progress=False))
    order = [t.name for t in model.inputs]
    as_list = [inputs[n] for n in order]
    as_dict = dict(zip(order, as_list))
    ctx = model.context(device="cpu", cpu_threads=1)
    print(f"{os.path.basename(os.path.dirname(a.model))}: {a.calls} calls per row, 1 thread, CPU backend")
    print(f"{'call':<22} {'wall p50 (us)':>14} {'C++ Run p50 (us)':>17} {'Python p50 (us)':>16} {'Python p90 (us)':>16}")
    for label, call, stats_of in (("ctx.run(list)", lambda: ctx.run(as_list), ctx),
                                  ("ctx.run(dict)", lambda: ctx.run(as_dict), ctx),
                                  ("model(*arrays)", lambda: model(*as_list), model)):
        for _ in range(500):
            call()
        wall, run, extra = [], [], []
        for _ in range(a.calls):
            t0 = time.perf_counter_ns()
            call()
            t1 = time.perf_counter_ns()
            s = kiln.compile_stats(stats_of).last_trace_host_time()
            wall.append(t1 - t0)
            run.append(s)
            extra.append(t1 - t0 - s)
        extra.sort()
        print(f"{label:<22} {statistics.median(wall) / 1e3:>14.2f} {statistics.median(run) / 1e3:>17.2f} "
              f"{statistics.median(extra) / 1e3:>16.2f} {extra[int(0.9 * len(extra))] / 1e3:>16.2f}")


if __name__ == "__main__":
    main()
