// The memory plan: no two buffers whose lifetimes overlap share bytes, static plans reach
// the live-bytes lower bound on a chain, and symbolic offsets evaluate per shape.
#include "compiler/passes/memory_plan.h"

#include <doctest/doctest.h>

#include "compiler/passes/canonicalize.h"
#include "compiler/passes/executors.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers
using kiln::passes::MemoryPlan;
using kiln::passes::StorageKind;

namespace {

// Runs the stages up to the plan.
MemoryPlan Plan(const onnx::ModelProto& m) {
  auto canonical = Canonical(m);
  REQUIRE(canonical.ok());
  auto executors = kiln::passes::AssignExecutors(canonical->trace);
  REQUIRE(executors.ok());
  auto plan = kiln::passes::PlanMemory(*executors);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  return std::move(*plan);
}

// x -> Relu -> Sigmoid -> Relu -> Sigmoid -> y, plus a branch that keeps t1 alive longer.
MemoryPlan PlanFor(const std::vector<std::string>& dims) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", dims);
  AddNode(g, "Relu", {"x"}, {"t1"});
  AddNode(g, "Sigmoid", {"t1"}, {"t2"});
  AddNode(g, "Relu", {"t2"}, {"t3"});
  AddNode(g, "Add", {"t3", "t1"}, {"t4"});
  AddNode(g, "Sigmoid", {"t4"}, {"y"});
  AddOutput(g, "y");
  return Plan(m);
}

void CheckNoOverlap(const MemoryPlan& plan, const std::vector<std::pair<std::string, int64_t>>& bindings) {
  const auto& ts = plan.tensors;
  for (size_t a = 0; a < ts.size(); ++a) {
    for (size_t b = a + 1; b < ts.size(); ++b) {
      if (ts[a].storage != StorageKind::kArena || ts[b].storage != StorageKind::kArena) continue;
      if (ts[a].last < ts[b].first || ts[b].last < ts[a].first) continue;
      int64_t oa = *ts[a].offset.Eval(bindings), sa = *ts[a].bytes.Eval(bindings);
      int64_t ob = *ts[b].offset.Eval(bindings), sb = *ts[b].bytes.Eval(bindings);
      CHECK_MESSAGE((oa + sa <= ob || ob + sb <= oa), "buffers ", a, " and ", b, " overlap");
      CHECK(oa + sa <= *plan.arena_bytes.Eval(bindings));
      CHECK(ob + sb <= *plan.arena_bytes.Eval(bindings));
    }
  }
}

}  // namespace

TEST_CASE("plan: static shapes give exact offsets at the live-bytes lower bound") {
  MemoryPlan plan = PlanFor({"1", "1000"});  // 4000 bytes -> 4032 with 64-byte rounding
  REQUIRE(plan.arena_bytes.is_const());
  REQUIRE(plan.lower_bound_bytes.has_value());
  // At the Add, t1, t3 and t4 are live: three buffers of 4032 bytes.
  CHECK(*plan.lower_bound_bytes == 3 * 4032);
  CHECK(*plan.arena_bytes.value() == 3 * 4032);
  CheckNoOverlap(plan, {});
}

TEST_CASE("plan: symbolic shapes give offsets that evaluate without overlap for any N") {
  MemoryPlan plan = PlanFor({"N", "1000"});
  CHECK_FALSE(plan.arena_bytes.is_const());
  CHECK_FALSE(plan.lower_bound_bytes.has_value());
  for (int64_t n : {1, 3, 17}) {
    CheckNoOverlap(plan, {{"N", n}});
    // Three slots of N*4000 bytes rounded to 64.
    CHECK(*plan.arena_bytes.Eval({{"N", n}}) == 3 * ((n * 4000 + 63) / 64 * 64));
  }
}

TEST_CASE("plan: a model output that is an input gets its own copy in the arena") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddNode(g, "Identity", {"x"}, {"y"});
  AddOutput(g, "y");
  MemoryPlan plan = Plan(m);
  REQUIRE(plan.trace.body.nodes.size() == 1);
  CHECK(plan.trace.body.nodes[0].op == "Identity");
  CHECK(plan.tensors[plan.trace.outputs[0]].storage == StorageKind::kArena);
  CHECK(plan.trace.value(plan.trace.outputs[0]).name == "y");
  CHECK(plan.trace.value(plan.trace.inputs[0]).name == "x");
}

TEST_CASE("plan: a value the model lists twice as an output is named as declared in both") {
  // Before: the second output's copy took the name and renamed the value itself, which is
  // output 0, "y#source" (kiln inspect and kiln run showed it).
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddNode(g, "Relu", {"x"}, {"y"});
  AddOutput(g, "y");
  AddOutput(g, "y");
  MemoryPlan plan = Plan(m);
  REQUIRE(plan.trace.outputs.size() == 2);
  CHECK(plan.trace.outputs[0] != plan.trace.outputs[1]);
  CHECK(plan.trace.value(plan.trace.outputs[0]).name == "y");
  CHECK(plan.trace.value(plan.trace.outputs[1]).name == "y");
  REQUIRE(plan.trace.body.nodes.size() == 2);
  CHECK(plan.trace.body.nodes[1].name == "copy_to_output_1");
}
