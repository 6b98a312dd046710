// Compress, NonZero, Unique and CenterCropPad meta functions: sizes from constant data,
// and the "data-dependent output shape" message (which names the value to bind) otherwise.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("Data-dependent ops: non-constant data names the value to bind") {
  CHECK(InferOne("NonZero", {{DType::kInt64, {2, 2}}}).status().message() ==
        "node 'n' (NonZero): data-dependent output shape: X (in0) is not known at compile time");
  CHECK(InferOne("Unique", {{DType::kInt64, {4}}}).status().code() == StatusCode::kUnimplemented);
  CHECK(InferOne("CenterCropPad", {{DType::kFloat32, {4, 4}}, {DType::kInt64, {2}}}).status().message() ==
        "node 'n' (CenterCropPad): data-dependent output shape: shape (in1) is not known at compile time");
}

TEST_CASE("Data-dependent ops: constant data gives the output shape") {
  auto nz = InferOne("NonZero", {{DType::kInt64, {2, 3}, std::vector<int64_t>{0, 1, 0, 2, 0, 3}}});
  REQUIRE(nz.ok());
  CHECK(nz->dtype == DType::kInt64);
  CHECK(ShapeToString(nz->shape) == "[2, 3]");
  auto uq = InferOne("Unique", {{DType::kInt64, {6}, std::vector<int64_t>{2, 1, 1, 3, 4, 3}}});
  REQUIRE(uq.ok());
  CHECK(ShapeToString(uq->shape) == "[4]");
  AttrMap axis0;
  axis0.SetInt("axis", 0);
  auto rows = InferOne("Unique", {{DType::kInt64, {3, 2}, std::vector<int64_t>{1, 0, 0, 1, 1, 0}}}, axis0);
  REQUIRE(rows.ok());
  CHECK(ShapeToString(rows->shape) == "[2, 2]");
  AttrMap axes;
  axes.SetInts("axes", {-1});
  auto crop = InferOne("CenterCropPad", {{DType::kFloat32, {4, 4}}, {DType::kInt64, {1}, std::vector<int64_t>{7}}}, axes);
  REQUIRE(crop.ok());
  CHECK(ShapeToString(crop->shape) == "[4, 7]");
  CHECK(InferOne("CenterCropPad", {{DType::kFloat32, {4, 4}}, {DType::kInt64, {1}, std::vector<int64_t>{7}}})
            .status()
            .message() == "node 'n' (CenterCropPad): input shape: expected 2 values (one per axis), found 1");
}

}  // namespace
}  // namespace kiln::ir::testing
