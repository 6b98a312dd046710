#!/usr/bin/env python3
"""Prints the "Supported ONNX ops" section of the conformance results from kiln_conformance --json
output: the text of benchmarks/results/*-onnx-conformance.md, which docs/adding_an_op.md links.

usage: readme_section.py build/conformance.json
"""
import json
import sys


def main():
    j = json.load(open(sys.argv[1]))
    full, partial, none = [], [], []
    for op, c in sorted(j["ops"].items()):
        in_scope = c["pass"] + c["fail"] + c["unsupported"]
        if in_scope == 0:
            continue
        if c["pass"] == in_scope:
            full.append(op)
        elif c["pass"] > 0:
            partial.append(f"{op} ({c['pass']}/{in_scope})")
        else:
            none.append(op)
    pct = 100.0 * j["pass"] / j["in_scope"]
    print("## Supported ONNX ops\n")
    print(f"Measured by ONNX's own backend node tests (onnx 1.22.0, {j['total']} cases; `kiln_conformance`, "
          f"tests/conformance/README.md): **{j['pass']} of {j['in_scope']} in-scope cases pass ({pct:.1f}%)**, "
          f"{j['pass_with_value_profiles']} of them with value profiles for inputs that carry axes, scales or trip "
          f"counts (`kiln compile --profile 'axes=[1]'`: the input stays and the prologue checks it), "
          f"{j['pass_with_constant_inputs']} with inputs bound to constants (`kiln compile --constant-input`), and "
          f"{j['pass'] - j['pass_with_value_profiles'] - j['pass_with_constant_inputs']} "
          f"({100.0 * (j['pass'] - j['pass_with_value_profiles'] - j['pass_with_constant_inputs']) / j['in_scope']:.1f}%) "
          f"with neither; {j['fail']} fail, {j['unsupported']} are unsupported, "
          f"{j['out_of_scope']} are out of scope (string, sequence, optional, complex, float8/int4/float4 types, "
          "the ai.onnx.ml and training domains, random ops, training losses, ImageDecoder).\n")
    print(f"- Every in-scope case passes ({len(full)} ops): " + ", ".join(full) + ".")
    if partial:
        print(f"- Some cases pass ({len(partial)} ops, passing/in scope): " + ", ".join(partial) + ".")
    if none:
        print(f"- Not supported ({len(none)} ops): " + ", ".join(none) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main())
