// An If on tensor data (compiler/passes/control_flow/runtime_if.cc): both branches in the
// canonical trace, each node under its branch's predicate, the outputs merged by Where (one
// shape) or kiln.IfOutput (shapes that differ in one dim), and outputs whose shapes differ in
// two dims refused once something reads them.
#include <doctest/doctest.h>

#include "compiler/passes/canonicalize.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// x float32[N, 2]: c = ReduceSum(x) > 0; y = If(c) then `then_op`(x) else `else_out`, where the
// else-branch computes Neg(x) and outputs `else_out` ("n", or "n2" = Concat(n, n) on axis 1).
onnx::ModelProto DataIfModel(const std::string& then_op, const std::string& else_out) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "2"});
  AddFloatInit(g, "zero", {}, {0.0f});
  AttrInt(AddNode(g, "ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  AddNode(g, "Greater", {"s", "zero"}, {"c"}, "positive");
  auto* node = AddNode(g, "If", {"c"}, {"y"}, "choose");
  auto* then_g = AddBranch(node, "then_branch");
  AddNode(then_g, then_op, {"x"}, {"t"}, "then_op");
  AddOutput(then_g, "t");
  auto* else_g = AddBranch(node, "else_branch");
  AddNode(else_g, "Neg", {"x"}, {"n"}, "neg");
  AttrInt(AddNode(else_g, "Concat", {"n", "n"}, {"n2"}, "twice"), "axis", 1);
  AddOutput(else_g, else_out);
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("control flow: an If on tensor data runs each branch under its predicate, merged by Where") {
  auto r = Canonical(DataIfModel("Relu", "n"));
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"ReduceSum", "Greater", "Relu", "Neg", "Where"});
  const auto& nodes = t.body.nodes;
  REQUIRE(nodes[2].when.size() == 1);
  CHECK(t.value(nodes[2].when[0].cond).name == "c");
  CHECK(nodes[2].when[0].value);
  REQUIRE(nodes[3].when.size() == 1);
  CHECK(t.value(nodes[3].when[0].cond).name == "c");
  CHECK_FALSE(nodes[3].when[0].value);
  CHECK(nodes[4].when.empty());  // the merge runs whichever branch ran
  CHECK(t.value(nodes[4].outputs[0]).name == "y");
}

TEST_CASE("control flow: branch outputs that differ in one dim merge into kiln.IfOutput, in two are refused") {
  auto widths = Canonical(DataIfModel("Relu", "n2"));  // [N, 2] against [N, 4]
  REQUIRE_MESSAGE(widths.ok(), widths.status().ToString());
  CHECK(Ops(widths->trace) ==
        std::vector<std::string>{"ReduceSum", "Greater", "Relu", "Neg", "Concat", "kiln.IfOutput"});
  CHECK(widths->trace.body.nodes.back().attrs.GetInt("axis", -1) == 1);

  auto two = Canonical(DataIfModel("Transpose", "n"));  // [2, N] against [N, 2]
  REQUIRE_FALSE(two.ok());
  CHECK(two.status().code() == kiln::StatusCode::kUnimplemented);
  CHECK(two.status().message() ==
        "node 'choose' (If): output 0 has shape [2, N] in then_branch and [N, 2] in else_branch; a run-time If "
        "carries outputs whose shapes differ in one dim at most; model output 'y' reads it");
}
