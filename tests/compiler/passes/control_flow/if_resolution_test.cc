// An If resolved at compile time (compiler/passes/control_flow/if_resolution.cc): a constant
// condition inlines its branch; one on a symbolic dim is undecided until an assumption covers
// it, which then becomes the entry's guard.
#include <doctest/doctest.h>

#include "compiler/passes/canonicalize.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers
using kiln::passes::Assumption;
using kiln::passes::Canonicalize;

TEST_CASE("control flow: an If on a constant condition becomes the branch it takes, with no guard") {
  for (bool taken : {true, false}) {
    INFO("condition " << taken);
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"N", "2"});
    auto* c = g->add_initializer();
    c->set_name("c");
    c->set_data_type(onnx::TensorProto::BOOL);
    c->add_int32_data(taken ? 1 : 0);
    auto* node = AddNode(g, "If", {"c"}, {"y"}, "choose");
    auto* then_g = AddBranch(node, "then_branch");
    AddNode(then_g, "Relu", {"x"}, {"r"}, "relu");
    AddOutput(then_g, "r");
    auto* else_g = AddBranch(node, "else_branch");
    AddNode(else_g, "Neg", {"x"}, {"n"}, "neg");
    AddOutput(else_g, "n");
    AddOutput(g, "y");
    auto r = Canonical(m);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK_FALSE(r->undecided_condition.has_value());
    CHECK(Ops(r->trace) == std::vector<std::string>{taken ? "Relu" : "Neg"});
    CHECK(r->trace.body.nodes[0].when.empty());
    CHECK(r->trace.value(r->trace.outputs[0]).name == "y");
    CHECK(r->trace.guards.empty());
  }
}

TEST_CASE("control flow: an If on a symbolic dim is undecided until an assumption covers it") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "3"});
  AddFirstDimIsOne(g, "x", "is_one");
  auto* node = AddNode(g, "If", {"is_one"}, {"y"});
  auto* then_g = AddBranch(node, "then_branch");
  AddInt64Init(then_g, "axes0", {1}, {0});
  AddNode(then_g, "Squeeze", {"x", "axes0"}, {"sq"});
  AddOutput(then_g, "sq");
  auto* else_g = AddBranch(node, "else_branch");
  AddNode(else_g, "Identity", {"x"}, {"id"});
  AddOutput(else_g, "id");
  AddOutput(g, "y");
  auto imported = Import(m);
  REQUIRE(imported.ok());

  auto undecided = Canonicalize(*imported, {});
  REQUIRE(undecided.ok());
  REQUIRE(undecided->undecided_condition.has_value());
  const kiln::ir::Sym cond = *undecided->undecided_condition;
  CHECK(cond.ToString() == "(N == 1)");

  auto yes = Canonicalize(*imported, {Assumption{cond, true}});
  REQUIRE(yes.ok());
  CHECK(kiln::ir::ShapeToString(yes->trace.value(yes->trace.outputs[0]).shape) == "[3]");
  REQUIRE(yes->trace.guards.size() == 1);
  CHECK(yes->trace.guards[0].condition.ToString() == "(N == 1)");
  CHECK(yes->trace.guards[0].origin == "node 'If_3' (If), whose then branch this entry was compiled for");

  auto no = Canonicalize(*imported, {Assumption{cond, false}});
  REQUIRE(no.ok());
  CHECK(kiln::ir::ShapeToString(no->trace.value(no->trace.outputs[0]).shape) == "[N, 3]");
  REQUIRE(no->trace.guards.size() == 1);
  CHECK(no->trace.guards[0].condition.ToString() == "((N == 1) == 0)");
}
