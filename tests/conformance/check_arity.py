"""The op table's operand counts (runtime/op_table.cc, as `kiln ops --json` prints them)
against ONNX's own operator schemas, read from the onnx wheel (onnx.defs.get_schema at Kiln's
newest opset): min and max inputs and outputs, and which inputs are required (an input whose
option is Single; a variadic op's inputs all are). The table's arity column is copied by hand
from these schemas, so this is what keeps it true.

    check_arity.py KILN MAX_OPSET

Known differences, each with its reason (KNOWN below): MatMul, Gemm and Conv take up to 4 inputs
(an epilogue-annotated node's optional bias and residual, runtime/kernels/epilogue.h), and
CausalConvWithState also takes com.microsoft's form, whose present_state output is optional.
Exit status 0 when every op agrees, 1 with one line per difference.
"""
import json
import subprocess
import sys

import onnx.defs as defs

EPILOGUE_OPS = {"MatMul", "Gemm", "Conv"}
# (op, field): Kiln's value, and why it differs from the schema's.
KNOWN = {("CausalConvWithState", "min_outputs"): (1, "com.microsoft's form: present_state is optional")}
# onnxruntime's com.microsoft ops that are registry ops of Kiln's: their counts from onnxruntime's
# docs/ContribOperators.md (the onnx wheel has no schema for them).
CONTRIB = {"QGemm": {"min_inputs": 6, "max_inputs": 9, "required": [True] * 6 + [False] * 3,
                     "min_outputs": 1, "max_outputs": 1}}
VARIADIC = 2147483647  # a schema's max_input / max_output for a variadic formal parameter


def schema_counts(s):
    opt = defs.OpSchema.FormalParameterOption
    max_in = None if s.max_input == VARIADIC else s.max_input
    max_out = None if s.max_output == VARIADIC else s.max_output
    required = [p.option != opt.Optional for p in s.inputs]
    if max_in is None:
        required = [True] * s.min_input
    return {"min_inputs": s.min_input, "max_inputs": max_in, "required": required,
            "min_outputs": s.min_output, "max_outputs": max_out}


def main():
    kiln, max_opset = sys.argv[1], int(sys.argv[2])
    ops = json.loads(subprocess.run([kiln, "ops", "--json"], check=True, capture_output=True, text=True).stdout)
    problems, checked, skipped = [], 0, []  # skipped: known differences seen
    for op in ops:
        name, have = op["name"], op["arity"]
        if have is None:
            problems.append(f"{name}: no operand counts in runtime/op_table.cc")
            continue
        if name in CONTRIB:
            want, s = CONTRIB[name], None
        else:
            try:
                s = defs.get_schema(name, max_opset, "")
            except defs.SchemaError:
                problems.append(f"{name}: no ONNX schema at opset {max_opset}")
                continue
            want = schema_counts(s)
        if name in EPILOGUE_OPS:
            want["max_inputs"] = 4
            want["required"] = want["required"] + [False] * (4 - len(want["required"]))
        for key in ("min_inputs", "max_inputs", "required", "min_outputs", "max_outputs"):
            known = KNOWN.get((name, key))
            if known and have[key] == known[0]:
                skipped.append(f"{name} {key} ({known[1]})")
                continue
            if have[key] != want[key]:
                problems.append(f"{name}: {key} is {have[key]} in Kiln, {want[key]} in "
                                + (f"ONNX's schema (opset {s.since_version})" if s else "onnxruntime's spec"))
        checked += 1
    for p in problems:
        print("MISMATCH", p)
    print(f"check_arity: {checked} ops agree with ONNX's schemas at opset {max_opset}" if not problems else
          f"check_arity: {len(problems)} differences over {len(ops)} ops",
          f"(onnx {__import__('onnx').__version__}; known differences: {'; '.join(skipped) or 'none'})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
