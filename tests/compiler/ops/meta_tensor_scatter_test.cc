// TensorScatter meta function: the cache's shape and the attribute/shape checks.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("TensorScatter meta: output is the cache - axis, mode and shapes checked") {
  const In past{DType::kFloat32, {2, 1, 4, 5}}, update{DType::kFloat32, {2, 1, 1, 5}}, w{DType::kInt64, {2}};
  auto ok = InferOne("TensorScatter", {past, update, w});
  REQUIRE(ok.ok());
  CHECK(ShapeToString(ok->shape) == "[2, 1, 4, 5]");
  CHECK(InferOne("TensorScatter", {past, update}).ok());

  AttrMap axis0;
  axis0.SetInt("axis", 0);
  CHECK(InferOne("TensorScatter", {past, update}, axis0).status().message() ==
        "node 'n' (TensorScatter): attribute 'axis': expected a sequence axis, found 0 (the batch axis)");
  AttrMap ring;
  ring.SetString("mode", "ring");
  CHECK(InferOne("TensorScatter", {past, update}, ring).status().message() ==
        "node 'n' (TensorScatter): attribute 'mode': expected 'linear' or 'circular', found 'ring'");
  auto longer = InferOne("TensorScatter", {past, {DType::kFloat32, {2, 1, 5, 5}}});
  CHECK(longer.status().message() ==
        "node 'n' (TensorScatter): input update: sequence dim 2 is 5, more than past_cache's 4");
  auto heads = InferOne("TensorScatter", {past, {DType::kFloat32, {2, 2, 1, 5}}});
  CHECK(heads.status().code() == StatusCode::kInvalidArgument);
  auto w32 = InferOne("TensorScatter", {past, update, {DType::kInt32, {2}}});
  CHECK(w32.status().message() == "node 'n' (TensorScatter): input write_indices: expected dtype int64, found int32");
}

}  // namespace
}  // namespace kiln::ir::testing
