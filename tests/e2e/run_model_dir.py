#!/usr/bin/env python3
"""Compiles real models with Kiln, runs them on their test sets, and checks the outputs.

Each DIR holds model.onnx and test_data_set_K/{input_N.pb, output_N.pb} (the ONNX backend-test
layout). For each DIR:

    kiln compile DIR/model.onnx -o WORK/<name>.kiln
    kiln run WORK/<name>.kiln --inputs DIR/test_data_set_K --outputs WORK/<name>/test_data_set_K

and every WORK/.../output_N.pb is compared with DIR/.../output_N.pb the way np.allclose does:
|got - want| <= atol + rtol * |want|, with atol 1e-4 and rtol 1e-3 (atol 1e-2 for folders whose
name starts with "mnist", whose published outputs are only that close). One line per output
gives the worst absolute error and the worst error relative to the tolerance (<= 1 passes).
With --compare-unfused, each model is also compiled with `--no-fuse --arch none` (one
instruction per op), run on the same inputs, and every fused output is compared with the
unfused one at atol 1e-5, rtol 1e-4: fusion reorders float32 arithmetic and keeps
normalisation statistics in float32 rather than double, which moves results by a few ulps,
never by the model's tolerance. A set passes only when both comparisons pass.
The last line is "N passed, M failed", counting test sets; the exit status is 1 when any set
fails, including when a kiln command fails.

usage: run_model_dir.py [--kiln build/kiln] [--work build/e2e] [--compare-unfused] DIR...
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL = 1e-3
ATOL = 1e-4
ATOL_BY_PREFIX = {"mnist": 1e-2}
COMPILE_TIMEOUT_S = 1800
RUN_TIMEOUT_S = 900


def say(line=""):
    print(line, flush=True)


def numbered(folder, pattern):
    """Files or folders matching e.g. 'output_*.pb', sorted by their number."""
    def key(path):
        m = re.search(r"_(\d+)(\.pb)?$", path)
        return int(m.group(1)) if m else -1
    return sorted(glob.glob(os.path.join(folder, pattern)), key=key)


def run_command(args, timeout):
    """Runs a kiln command; returns (ok, seconds, output, exit code or None)."""
    start = time.monotonic()
    try:
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=timeout)
        return proc.returncode == 0, time.monotonic() - start, proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        return False, time.monotonic() - start, out + f"\n(timed out after {timeout} s)", None
    except OSError as e:
        return False, time.monotonic() - start, str(e), None


def show_failure(what, args, output, rc):
    say(f"  FAIL {what}: exit {rc if rc is not None else 'n/a'}: {' '.join(args)}")
    lines = output.rstrip().splitlines()
    for line in lines[-25:]:
        say(f"    | {line}")


def load_tensor(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


UNFUSED_ATOL = 1e-5
UNFUSED_RTOL = 1e-4


def compare(want, got, atol, rtol=RTOL):
    """np.allclose(got, want) (a NaN anywhere fails); returns (ok, worst abs error, worst
    error / tolerance, note)."""
    if want.shape != got.shape:
        return False, float("inf"), float("inf"), f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype != got.dtype:
        return False, float("inf"), float("inf"), f"dtype {got.dtype}, expected {want.dtype}"
    if want.size == 0:
        return True, 0.0, 0.0, ""
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    ok = bool(np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=False))
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)
        ratio = err / (atol + rtol * np.abs(w))
    finite = ~np.isnan(ratio)
    if not finite.any():
        return ok, float("nan"), float("nan"), "all NaN"
    worst = np.unravel_index(int(np.argmax(np.where(finite, ratio, -1.0))), ratio.shape)
    note = ""
    nans = int((~finite).sum())
    if nans:
        note = f"{int(np.isnan(g).sum())} NaN in output, {int(np.isnan(w).sum())} expected"
    elif not ok:
        note = f"worst at {list(map(int, worst))}: got {g[worst]:.6g}, expected {w[worst]:.6g}"
    return ok, float(err[worst]), float(ratio[worst]), note


def check_unfused(kiln, unfused, label, set_dir, out_dir, wanted):
    """Runs the unfused artifact on the set; True when every fused output in out_dir matches it."""
    ref_dir = out_dir + "_unfused"
    shutil.rmtree(ref_dir, ignore_errors=True)
    args = [kiln, "run", unfused, "--inputs", set_dir, "--outputs", ref_dir]
    ok, _, output, rc = run_command(args, RUN_TIMEOUT_S)
    if not ok:
        show_failure(f"{label}: kiln run (unfused)", args, output, rc)
        return False
    all_ok = True
    for want_path in wanted:
        fname = os.path.basename(want_path)
        try:
            ref = load_tensor(os.path.join(ref_dir, fname))
            got = load_tensor(os.path.join(out_dir, fname))
        except Exception as e:
            say(f"  FAIL {label} {fname}: cannot read the fused or unfused output: {e}")
            all_ok = False
            continue
        ok, worst_abs, worst_ratio, note = compare(ref, got, UNFUSED_ATOL, UNFUSED_RTOL)
        all_ok = all_ok and ok
        say(f"  {'ok  ' if ok else 'FAIL'} {label} {fname} fused vs unfused: max|err| {worst_abs:.3g}, "
            f"worst err/tol {worst_ratio:.3g}{' (' + note + ')' if note else ''}")
    return all_ok


def check_set(kiln, artifact, model_dir, set_dir, out_dir, atol, unfused=None):
    """Runs one test set; returns True when every output matches (and matches the unfused
    artifact's, when one is given)."""
    set_name = os.path.basename(set_dir)
    label = f"{os.path.basename(model_dir)}/{set_name}"
    shutil.rmtree(out_dir, ignore_errors=True)
    args = [kiln, "run", artifact, "--inputs", set_dir, "--outputs", out_dir]
    ok, secs, output, rc = run_command(args, RUN_TIMEOUT_S)
    if not ok:
        show_failure(f"{label}: kiln run", args, output, rc)
        return False
    wanted = numbered(set_dir, "output_*.pb")
    if not wanted:
        say(f"  FAIL {label}: no output_N.pb in {set_dir}")
        return False
    all_ok = True
    for want_path in wanted:
        fname = os.path.basename(want_path)
        got_path = os.path.join(out_dir, fname)
        want_proto = onnx.load_tensor(want_path)
        name = want_proto.name or fname
        if not os.path.isfile(got_path):
            say(f"  FAIL {label} {fname} '{name}': kiln wrote no {got_path}")
            all_ok = False
            continue
        try:
            want = numpy_helper.to_array(want_proto)
            got = load_tensor(got_path)
        except Exception as e:  # a malformed file from kiln is a failure, not a crash
            say(f"  FAIL {label} {fname} '{name}': cannot read: {e}")
            all_ok = False
            continue
        ok, worst_abs, worst_ratio, note = compare(want, got, atol)
        all_ok = all_ok and ok
        say(f"  {'ok  ' if ok else 'FAIL'} {label} {fname} '{name}' {want.dtype}{list(want.shape)}: "
            f"max|err| {worst_abs:.3g}, worst err/tol {worst_ratio:.3g}"
            f"{' (' + note + ')' if note else ''}")
    if unfused:
        all_ok = check_unfused(kiln, unfused, label, set_dir, out_dir, wanted) and all_ok
    say(f"  {label}: {'passed' if all_ok else 'FAILED'} (run {secs:.2f} s)")
    return all_ok


def check_model_dir(kiln, work, model_dir, compare_unfused=False):
    """Compiles and runs one model folder; returns (passed, failed) test-set counts."""
    model_dir = os.path.normpath(model_dir)
    name = os.path.basename(model_dir)
    atol = next((a for prefix, a in ATOL_BY_PREFIX.items() if name.startswith(prefix)), ATOL)
    sets = [d for d in numbered(model_dir, "test_data_set_*") if os.path.isdir(d)]
    model = os.path.join(model_dir, "model.onnx")
    say(f"== {name}: {len(sets)} test set(s), atol {atol:g}, rtol {RTOL:g}")
    if not os.path.isfile(model) or not sets:
        say(f"  FAIL {name}: needs model.onnx and test_data_set_* in {model_dir}")
        return 0, max(1, len(sets))
    os.makedirs(work, exist_ok=True)
    artifact = os.path.join(work, f"{name}.kiln")
    args = [kiln, "compile", model, "-o", artifact]
    ok, secs, output, rc = run_command(args, COMPILE_TIMEOUT_S)
    if not ok:
        show_failure(f"{name}: kiln compile", args, output, rc)
        return 0, len(sets)
    say(f"  compiled {artifact} in {secs:.1f} s")
    unfused = None
    if compare_unfused:
        unfused = os.path.join(work, f"{name}.unfused.kiln")
        args = [kiln, "compile", model, "-o", unfused, "--no-fuse", "--arch", "none", "-q"]
        ok, _, output, rc = run_command(args, COMPILE_TIMEOUT_S)
        if not ok:
            show_failure(f"{name}: kiln compile --no-fuse", args, output, rc)
            return 0, len(sets)
    passed = sum(check_set(kiln, artifact, model_dir, s, os.path.join(work, name, os.path.basename(s)), atol, unfused)
                 for s in sets)
    return passed, len(sets) - passed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="model folder (model.onnx + test_data_set_*)")
    parser.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"), help="the kiln CLI binary")
    parser.add_argument("--work", default=os.path.join(ROOT, "build", "e2e"), help="where artifacts and outputs go")
    parser.add_argument("--compare-unfused", action="store_true",
                        help="also compare every output with an unfused (--no-fuse) compile of the model")
    args = parser.parse_args()
    kiln = os.path.abspath(args.kiln)
    if not os.path.isfile(kiln):
        say(f"error: {kiln} does not exist; build it first (bash scripts/setup.sh)")
        sets = sum(max(1, len(numbered(d, "test_data_set_*"))) for d in args.dirs)
        say(f"0 passed, {sets} failed")
        return 1
    passed = failed = 0
    for d in args.dirs:
        p, f = check_model_dir(kiln, os.path.abspath(args.work), d, args.compare_unfused)
        passed += p
        failed += f
    say(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
