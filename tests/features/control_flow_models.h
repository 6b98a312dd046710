// Models with run-time control flow that more than one test runs (tests/features/, and the toy
// backend's test, tests/runtime/toy_backend/): built with tests/compiler/onnx_model_builder.h.
#pragma once

#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {

// M int64 (a value input) and x0 float32[N]: while ReduceSum(x) > 1 and fewer than M
// iterations, x = x * 0.5; outputs the last x and each iteration's sum, stacked.
inline onnx::ModelProto HalvingModel() {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "M", {}, onnx::TensorProto::INT64);
  AddInput(g, "x0", {"N"});
  AddFloatInit(g, "one", {}, {1.0f});
  AttrInt(AddNode(g, "ReduceSum", {"x0"}, {"s0"}, "sum0"), "keepdims", 0);
  AddNode(g, "Greater", {"s0", "one"}, {"c0"}, "above0");
  auto* loop = AddNode(g, "Loop", {"M", "c0", "x0"}, {"x_last", "sums"}, "halve");
  auto* body = AddBranch(loop, "body");
  AddInput(body, "i", {}, onnx::TensorProto::INT64);
  AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  AddInput(body, "x", {"N"});
  AddFloatInit(body, "half", {}, {0.5f});
  AddNode(body, "Mul", {"x", "half"}, {"x_next"}, "mul");
  AttrInt(AddNode(body, "ReduceSum", {"x_next"}, {"s"}, "sum"), "keepdims", 0);
  AddNode(body, "Greater", {"s", "one"}, {"go_on"}, "above");
  AddOutput(body, "go_on");
  AddOutput(body, "x_next");
  AddOutput(body, "s");
  AddOutput(g, "x_last");
  AddOutput(g, "sums");
  return m;
}

// x float32[N, 2]: y = If(ReduceSum(x) > 0) then Relu(x) * 2, else If(ReduceMax(x) > -1) then
// 1 - x, else x * x; z = y + 0.5. The inner If sits in the outer else-branch.
inline onnx::ModelProto BranchModel() {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "2"});
  AddFloatInit(g, "zero", {}, {0.0f});
  AddFloatInit(g, "half", {}, {0.5f});
  AttrInt(AddNode(g, "ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  AddNode(g, "Greater", {"s", "zero"}, {"c"}, "positive");
  auto* outer = AddNode(g, "If", {"c"}, {"y"}, "outer");
  auto* then_g = AddBranch(outer, "then_branch");
  AddFloatInit(then_g, "two", {}, {2.0f});
  AddNode(then_g, "Relu", {"x"}, {"r"}, "relu");
  AddNode(then_g, "Mul", {"r", "two"}, {"t"}, "double");
  AddOutput(then_g, "t");
  auto* else_g = AddBranch(outer, "else_branch");
  AddFloatInit(else_g, "minus_one", {}, {-1.0f});
  AttrInt(AddNode(else_g, "ReduceMax", {"x"}, {"mx"}, "max"), "keepdims", 0);
  AddNode(else_g, "Greater", {"mx", "minus_one"}, {"d"}, "above");
  auto* inner = AddNode(else_g, "If", {"d"}, {"e"}, "inner");
  auto* inner_then = AddBranch(inner, "then_branch");
  AddFloatInit(inner_then, "one", {}, {1.0f});
  AddNode(inner_then, "Sub", {"one", "x"}, {"u"}, "one_minus");
  AddOutput(inner_then, "u");
  auto* inner_else = AddBranch(inner, "else_branch");
  AddNode(inner_else, "Mul", {"x", "x"}, {"v"}, "square");
  AddOutput(inner_else, "v");
  AddOutput(else_g, "e");
  AddNode(g, "Add", {"y", "half"}, {"z"}, "shift");
  AddOutput(g, "z");
  return m;
}

}  // namespace kiln::testing
