// A Loop or Scan whose iterations are known only when it runs
// (compiler/passes/control_flow/runtime_loop.cc): its body once, between kiln.LoopBegin and
// kiln.LoopEnd, and a run-time Scan's slices read with Gather at the iteration number.
#include <doctest/doctest.h>

#include "compiler/passes/canonicalize.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

TEST_CASE("control flow: a Loop whose trip count is an input runs its body once between LoopBegin and LoopEnd") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "M", {}, onnx::TensorProto::INT64);
  AddInput(g, "x", {"2"});
  auto* loop = AddNode(g, "Loop", {"M", "", "x"}, {"x_last"}, "loop");
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
  CHECK(Ops(t) == std::vector<std::string>{"kiln.LoopBegin", "Add", "kiln.LoopEnd"});
  const kiln::ir::Node& end = t.body.nodes[2];
  CHECK(end.attrs.GetInt("carried", -1) == 1);
  // M is data: how many iterations ran is known only at run time (LoopEnd's "exact" is unset).
  CHECK_FALSE(end.attrs.Has("exact"));
}

TEST_CASE("control flow: a Scan of symbolic length is a run-time loop of that many iterations, exact") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "h0", {"2"});
  AddInput(g, "xs", {"T", "2"});
  auto* scan = AddNode(g, "Scan", {"h0", "xs"}, {"h_last"}, "scan");
  AttrInt(scan, "num_scan_inputs", 1);
  auto* body = AddBranch(scan, "body");
  AddInput(body, "h", {"2"});
  AddInput(body, "x", {"2"});
  AddNode(body, "Add", {"h", "x"}, {"h_next"}, "add");
  AddOutput(body, "h_next");
  AddOutput(g, "h_last");
  auto r = Canonical(m);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"kiln.LoopBegin", "Gather", "Add", "kiln.LoopEnd"});
  CHECK(t.value(t.body.nodes[1].outputs[0]).name == "x");  // the slice is the body's scan input
  CHECK(t.body.nodes[3].attrs.GetInt("exact", 0) == 1);    // T >= 1 iterations, no condition
}
