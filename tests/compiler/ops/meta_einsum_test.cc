// Einsum meta function: output shape from the equation, and precise errors.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

AttrMap EinsumAttrs(const char* equation) {
  AttrMap a;
  a.SetString("equation", equation);
  return a;
}

TEST_CASE("Einsum meta: output shape from the labels") {
  auto bmm =
      InferOne("Einsum", {{DType::kFloat32, {5, 2, 3}}, {DType::kFloat32, {5, 3, 4}}}, EinsumAttrs("bij, bjk -> bik"));
  REQUIRE(bmm.ok());
  CHECK(ShapeToString(bmm->shape) == "[5, 2, 4]");
  auto diag = InferOne("Einsum", {{DType::kFloat64, {3, 5, 5}}}, EinsumAttrs("...ii ->...i"));
  REQUIRE(diag.ok());
  CHECK(diag->dtype == DType::kFloat64);
  CHECK(ShapeToString(diag->shape) == "[3, 5]");
  auto implicit = InferOne("Einsum", {{DType::kInt32, {2, 1, 4}}, {DType::kInt32, {3, 4}}}, EinsumAttrs("...j,...j"));
  REQUIRE(implicit.ok());
  CHECK(ShapeToString(implicit->shape) == "[2, 3]");
  auto scalar = InferOne("Einsum", {{DType::kFloat32, {}}}, EinsumAttrs("->"));
  REQUIRE(scalar.ok());
  CHECK(scalar->shape.empty());
}

TEST_CASE("Einsum meta: errors name the equation and the problem") {
  const In m23{DType::kFloat32, {2, 3}};
  CHECK(InferOne("Einsum", {m23}, EinsumAttrs("ij->k")).status().message() ==
        "node 'n' (Einsum): equation 'ij->k': the output label 'k' is in no input term");
  CHECK(InferOne("Einsum", {m23}, EinsumAttrs("ijk")).status().message() ==
        "node 'n' (Einsum): equation 'ijk': term 1 has 3 labels for input 0 of rank 2");
  CHECK(InferOne("Einsum", {m23}, EinsumAttrs("i,i")).status().message() ==
        "node 'n' (Einsum): equation 'i,i': more terms than the 1 inputs");
  CHECK(InferOne("Einsum", {m23}, EinsumAttrs("i..j")).status().message() ==
        "node 'n' (Einsum): equation 'i..j': term 1: a '.' that does not start an ellipsis '...'");
  CHECK(InferOne("Einsum", {m23}).status().message() ==
        "node 'n' (Einsum): attribute 'equation': expected a string, found none");
  auto clash = InferOne("Einsum", {m23, {DType::kFloat32, {4, 5}}}, EinsumAttrs("ij,jk->ik"));
  CHECK(clash.status().code() == StatusCode::kInvalidArgument);
  CHECK(clash.status().message().find("input 1 dim 0") != std::string::npos);
}

}  // namespace
}  // namespace kiln::ir::testing
