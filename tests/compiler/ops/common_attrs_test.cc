// Attributes every op shares are validated in one place, before any meta function.
#include <doctest/doctest.h>

#include "compiler/passes/canonicalize.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

std::string CanonicalError(const onnx::ModelProto& m) {
  auto r = Canonical(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == kiln::StatusCode::kInvalidArgument);
  return r.status().message();
}

}  // namespace

TEST_CASE("common attributes: flags must be 0 or 1") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AttrInt(AddNode(g, "ReduceMean", {"x"}, {"y"}, "mean"), "keepdims", 1000);
  AddOutput(g, "y");
  CHECK(CanonicalError(m) == "node 'mean' (ReduceMean): attribute 'keepdims': expected 0 or 1, found 1000");
}

TEST_CASE("common attributes: epsilon must be finite and non-negative") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddFloatInit(g, "scale", {3}, {1, 1, 1});
  AttrFloat(AddNode(g, "LayerNormalization", {"x", "scale"}, {"y"}, "ln"), "epsilon", -1.0f);
  AddOutput(g, "y");
  CHECK(CanonicalError(m) == "node 'ln' (LayerNormalization): attribute 'epsilon': expected a finite number >= 0, "
                             "found -1");
}

TEST_CASE("import: an opset newer than Kiln knows is refused, not guessed at") {
  auto m = MakeModel(99);
  AddInput(m.mutable_graph(), "x", {"2"});
  AddNode(m.mutable_graph(), "Relu", {"x"}, {"y"});
  AddOutput(m.mutable_graph(), "y");
  auto r = Import(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == kiln::StatusCode::kUnimplemented);
  CHECK(r.status().message().find("opset 99 is not supported; Kiln supports opsets 1 to 27") != std::string::npos);
}
