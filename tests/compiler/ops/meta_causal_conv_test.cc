// CausalConvWithState meta function: both outputs' shapes and the checks.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("CausalConvWithState meta: output as input, state (B, C, k-1) - activation and shapes checked") {
  const In x{DType::kFloat32, {2, 4, 6}}, w{DType::kFloat32, {4, 1, 3}};
  auto ok = InferOne("CausalConvWithState", {x, w, {DType::kFloat32, {4}}, {DType::kFloat32, {2, 4, 2}}});
  REQUIRE(ok.ok());
  CHECK(ShapeToString(ok->shape) == "[2, 4, 6]");
  AttrMap gelu;
  gelu.SetString("activation", "gelu");
  CHECK(InferOne("CausalConvWithState", {x, w}, gelu).status().message() ==
        "node 'n' (CausalConvWithState): attribute 'activation': expected 'none', 'silu' or 'swish', found 'gelu'");
  auto channels = InferOne("CausalConvWithState", {x, {DType::kFloat32, {3, 1, 3}}});
  CHECK(channels.status().code() == StatusCode::kInvalidArgument);
  auto state = InferOne("CausalConvWithState", {x, w, testing::kAbsent, {DType::kFloat32, {2, 4, 3}}});
  CHECK(state.status().code() == StatusCode::kInvalidArgument);
  CHECK(state.status().message().find("past_state dim 2") != std::string::npos);
  CHECK(InferOne("CausalConvWithState", {{DType::kInt32, {2, 4, 6}}, {DType::kInt32, {4, 1, 3}}}).status().code() ==
        StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::ir::testing
