// Loop and Scan unrolled (compiler/passes/control_flow/unroll.cc): one copy of the body per
// iteration, values named by iteration ("h@1"), carried values flowing from copy to copy, and
// scan outputs stacked by Unsqueeze and Concat.
#include <doctest/doctest.h>

#include "compiler/passes/canonicalize.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// The names of node `n`'s inputs.
std::vector<std::string> InputNames(const kiln::ir::Trace& t, size_t n) {
  std::vector<std::string> names;
  for (kiln::ir::ValueId id : t.body.nodes[n].inputs) names.push_back(t.value(id).name);
  return names;
}

}  // namespace

TEST_CASE("control flow: a Loop of 3 known iterations is 3 copies of its body, the last one its output") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddInt64Init(g, "three", {}, {3});
  auto* loop = AddNode(g, "Loop", {"three", "", "x"}, {"x_last"}, "loop");
  auto* body = AddBranch(loop, "body");
  AddInput(body, "i", {}, onnx::TensorProto::INT64);
  AddInput(body, "cond", {}, onnx::TensorProto::BOOL);
  AddInput(body, "h", {"2"});
  AddNode(body, "Identity", {"cond"}, {"go_on"}, "keep");
  AddNode(body, "Add", {"h", "h"}, {"h_next"}, "double");
  AddOutput(body, "go_on");
  AddOutput(body, "h_next");
  AddOutput(g, "x_last");
  auto r = Canonical(m);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"Add", "Add", "Add"});
  CHECK(InputNames(t, 0) == std::vector<std::string>{"x", "x"});
  CHECK(InputNames(t, 1) == std::vector<std::string>{"h_next@0", "h_next@0"});
  CHECK(InputNames(t, 2) == std::vector<std::string>{"h_next@1", "h_next@1"});
  CHECK(t.value(t.body.nodes[2].outputs[0]).name == "x_last");
}

TEST_CASE("control flow: a Scan of length 3 reads one slice per copy of its body and stacks its scan output") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "h0", {"2"});
  AddInput(g, "xs", {"3", "2"});
  auto* scan = AddNode(g, "Scan", {"h0", "xs"}, {"h_last", "ys"}, "scan");
  AttrInt(scan, "num_scan_inputs", 1);
  auto* body = AddBranch(scan, "body");
  AddInput(body, "h", {"2"});
  AddInput(body, "x", {"2"});
  AddNode(body, "Add", {"h", "x"}, {"h_next"}, "add");
  AddNode(body, "Neg", {"h_next"}, {"y"}, "neg");
  AddOutput(body, "h_next");
  AddOutput(body, "y");
  AddOutput(g, "h_last");
  AddOutput(g, "ys");
  auto r = Canonical(m);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"Gather", "Add", "Neg", "Gather", "Add", "Neg", "Gather", "Add", "Neg",
                                           "Unsqueeze", "Unsqueeze", "Unsqueeze", "Concat"});
  CHECK(InputNames(t, 1) == std::vector<std::string>{"h0", "scan_slice_0_0"});
  CHECK(InputNames(t, 4) == std::vector<std::string>{"h_next@0", "scan_slice_0_1"});
  CHECK(kiln::ir::ShapeToString(t.value(t.outputs[1]).shape) == "[3, 2]");
  CHECK(t.value(t.outputs[0]).name == "h_last");
}
