#!/usr/bin/env python3
"""Checks that `kiln compile` makes the same bytes every time (docs/reproducibility.md).

For each DIR/model.onnx, with kiln compile's default flags (every GPU arch, native code for the
host's CPU targets), four compiles into a fresh WORK folder:

    cold      an empty kernel cache, NVRTC on 2 threads
    warm      the same cache again, now full, on 1 thread
    racing-1  two processes at once, 1 thread each, reading that full cache; for a model named by
    racing-2  --cold-race, sharing a second, empty cache instead (both compile and write it: the
              costly form, which one small model covers)

Every artifact must equal the first byte for byte; a difference names the section it falls in
(header, FlatBuffer, weights) and its offset. Then `kiln inspect --json` must give a provenance
whose model_sha256 is the file's SHA-256 as hashlib computes it, whose flags name the CPU targets
resolved (never "host"), and which lists the libraries.

The last line is "N passed, M failed", counting models; the exit status is 1 when any failed.

usage: reproducible_compile.py --kiln build/kiln --work DIR [--cold-race NAME]... MODEL_DIR...
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time


def compile_cmd(kiln, model, out, cache, jobs):
    return [kiln, "compile", "-q", model, "-o", out, "--kernel-cache", cache, "-j", str(jobs)]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def section_of(data, offset):
    """The section of a .kiln file (runtime/artifact_header.h) that holds byte `offset`."""
    if offset < 64:
        return "header"
    fb_offset, fb_size, w_offset = struct.unpack_from("<QQQ", data, 16)
    if offset < fb_offset + fb_size:
        return f"FlatBuffer (byte {offset - fb_offset} of {fb_size})"
    if offset >= w_offset:
        return f"weights (byte {offset - w_offset})"
    return "padding before the weights"


def first_difference(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b))


def check_model(kiln, model_dir, work, cold_race):
    name = os.path.basename(os.path.normpath(model_dir))
    model = os.path.join(model_dir, "model.onnx")
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cold, racing = os.path.join(out, "cache-cold"), os.path.join(out, "cache-racing")
    start = time.monotonic()
    paths = {k: os.path.join(out, k + ".kiln") for k in ("cold", "warm", "racing-1", "racing-2")}
    run(compile_cmd(kiln, model, paths["cold"], cold, 2))
    run(compile_cmd(kiln, model, paths["warm"], cold, 1))
    race_cache = racing if name in cold_race else cold
    procs = [subprocess.Popen(compile_cmd(kiln, model, paths[k], race_cache, 1), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for k in ("racing-1", "racing-2")]
    for k, p in zip(("racing-1", "racing-2"), procs):
        _, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{k}: kiln compile exit {p.returncode}: {err.strip()}")
    seconds = time.monotonic() - start
    want = open(paths["cold"], "rb").read()
    problems = []
    for k in ("warm", "racing-1", "racing-2"):
        got = open(paths[k], "rb").read()
        if got != want:
            at = first_difference(want, got)
            problems.append(f"{k} differs from cold: {len(got)} bytes against {len(want)}, first at byte {at}, "
                            f"in the {section_of(want, at)}")
    info = json.loads(run([kiln, "inspect", "--json", "--no-traces", paths["cold"]]))
    p = info.get("provenance", {})
    sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
    if p.get("model_sha256") != sha:
        problems.append(f"provenance model_sha256 {p.get('model_sha256')!r}, expected {sha}")
    flags = p.get("flags", [])
    targets = [f for f in flags if f.startswith("--cpu-targets=")]
    if len(targets) != 1 or "host" in targets[0]:
        problems.append(f"provenance flags {flags}: expected one --cpu-targets, resolved (not 'host')")
    for lib in ("ONNX", "FlatBuffers"):
        if lib not in p.get("libraries", {}):
            problems.append(f"provenance libraries {p.get('libraries')}: no {lib}")
    status = "FAIL" if problems else "ok"
    race = "an empty cache" if name in cold_race else "the full cache"
    print(f"{status} {name}: 4 compiles of {len(want)} bytes in {seconds:.1f} s (racing on {race})"
          + "".join(f"\n  {x}" for x in problems), flush=True)
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cold-race", action="append", default=[], metavar="NAME",
                    help="a model (its folder's name) whose racing compiles share an empty cache")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    passed = failed = 0
    for d in args.dirs:
        try:
            ok = check_model(args.kiln, d, args.work, set(args.cold_race))
        except RuntimeError as e:
            print(f"FAIL {d}: {e}", flush=True)
            ok = False
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
