// LRN, LpNormalization and MeanVarianceNormalization meta functions: shape, dtype and attribute checks.
#include <doctest/doctest.h>

#include <limits>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("Feature-norm meta: the output is X, bad attributes are named") {
  AttrMap lrn;
  lrn.SetInt("size", 5);
  auto ok = InferOne("LRN", {{DType::kFloat16, {1, 8, 4, 4}}}, lrn);
  REQUIRE(ok.ok());
  CHECK(ok->dtype == DType::kFloat16);
  CHECK(ShapeToString(ok->shape) == "[1, 8, 4, 4]");
  CHECK(InferOne("LRN", {{DType::kFloat32, {1, 8, 4, 4}}}).status().message() ==
        "node 'n' (LRN): attribute 'size': expected an integer >= 1, found none");
  lrn.SetFloat("beta", std::numeric_limits<float>::infinity());
  CHECK(InferOne("LRN", {{DType::kFloat32, {1, 8, 4, 4}}}, lrn).status().message() ==
        "node 'n' (LRN): attribute 'beta': expected a finite float, found inf");
  CHECK(InferOne("LRN", {{DType::kInt32, {1, 8, 4, 4}}}).status().code() == StatusCode::kInvalidArgument);

  AttrMap lp;
  lp.SetInt("p", 3);
  CHECK(InferOne("LpNormalization", {{DType::kFloat32, {2, 3}}}, lp).status().message() ==
        "node 'n' (LpNormalization): attribute 'p': expected 1 or 2, found 3");
  lp.SetInt("p", 1);
  lp.SetInt("axis", 2);
  CHECK(InferOne("LpNormalization", {{DType::kFloat32, {2, 3}}}, lp).status().code() ==
        StatusCode::kInvalidArgument);

  CHECK(InferOne("MeanVarianceNormalization", {{DType::kFloat32, {2, 3, 4, 5}}}).ok());
  // The default axes {0, 2, 3} need rank 4.
  CHECK(InferOne("MeanVarianceNormalization", {{DType::kFloat32, {2, 3, 4}}}).status().code() ==
        StatusCode::kInvalidArgument);
  AttrMap mvn;
  mvn.SetInts("axes", {0, 1});
  CHECK(InferOne("MeanVarianceNormalization", {{DType::kFloat32, {2, 3, 4}}}, mvn).ok());
}

}  // namespace
}  // namespace kiln::ir::testing
