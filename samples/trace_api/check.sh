#!/usr/bin/env bash
# samples/trace_api's check, run by scripts/samples.sh against the installed package:
#   check.sh SAMPLE_BUILD_DIR INSTALL_PREFIX KILN_BUILD_DIR
# Runs the trace_api binary in a fresh folder and compares what it prints with values worked
# out by hand: for x = [[1, 2, 3], [-1, 0, 1]], hidden = Relu(x @ W1 + b1) = [[1, 2, 3, 0],
# [0, 0, 1, 1]], logits = hidden @ W2 + b2 = [[4, 5.5], [1, -0.5]], so probs = [[s, 1 - s],
# [1 - s, s]] with s = 1 / (1 + e^1.5) = 0.182426. Also checks the printed trace names the ops
# as the sample named them, and that the artifact was written and the kiln tool can inspect it.
set -euo pipefail
SAMPLE=$1 PREFIX=$2
WORK="$SAMPLE/check"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK"
fail() { echo "trace_api check: FAIL: $*"; exit 1; }

"$SAMPLE/trace_api" model.kiln >out.txt 2>err.txt || { cat out.txt err.txt; fail "trace_api exited $?"; }
cat out.txt
for line in "fc1.matmul = MatMul(x, fc1.weight)" "fc1 = Add(fc1.matmul, fc1.bias)" "hidden = Relu(fc1)" \
            "probs = Softmax(fc2, axis=-1)" "wrote model.kiln"; do
  grep -qF -- "$line" out.txt || fail "the output has no line with '$line'"
done
[[ -s model.kiln ]] || fail "model.kiln was not written"
awk -v s=0.18242552 '
  function check(got, want) { if (got - want > 1e-5 || want - got > 1e-5) { print "trace_api check: FAIL: " $0 ": expected " want; bad = 1 } }
  $1 == "probs[0]" { check($3, s); check($4, 1 - s); n++ }
  $1 == "probs[1]" { check($3, 1 - s); check($4, s); n++ }
  END { if (n != 2) { print "trace_api check: FAIL: expected lines probs[0] and probs[1], found " n; bad = 1 } exit bad }
' out.txt
"$PREFIX/bin/kiln" inspect model.kiln >inspect.txt || fail "kiln inspect model.kiln failed"
grep -qF "provenance: traced by kiln::trace::Builder 'tiny_mlp'" inspect.txt || fail "kiln inspect does not show the traced model's provenance"
echo "trace_api check: OK"
