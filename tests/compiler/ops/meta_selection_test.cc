// Compress, NonZero, Unique and CenterCropPad meta functions: sizes from constant data; else a
// run-time dim (Compress, NonZero, Unique) or the "data-dependent output shape" message
// (CenterCropPad, which names the value to bind).
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("Data-dependent ops: non-constant data gives a run-time dim, or names the value to bind") {
  auto nz = InferOne("NonZero", {{DType::kInt64, {2, 2}}});
  REQUIRE(nz.ok());
  CHECK(ShapeToString(nz->shape) == "[2, out.count]");
  CHECK(nz->shape[1].is_runtime_var());
  auto uq = InferOne("Unique", {{DType::kInt64, {4}}});
  REQUIRE(uq.ok());
  CHECK(ShapeToString(uq->shape) == "[out.count]");
  AttrMap axis1;
  axis1.SetInt("axis", 1);
  auto cp = InferOne("Compress", {{DType::kFloat32, {2, 5}}, {DType::kBool, {3}}}, axis1);
  REQUIRE(cp.ok());
  CHECK(ShapeToString(cp->shape) == "[2, out.count]");
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
