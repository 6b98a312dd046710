// CumSum / CumProd meta function: shape, dtype and the axis checks.
#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

TEST_CASE("CumSum/CumProd meta: output as x, axis checked when constant") {
  for (const char* op : {"CumSum", "CumProd"}) {
    auto ok = InferOne(op, {{DType::kFloat32, {2, 3}}, {DType::kInt64, {}, std::vector<int64_t>{-1}}});
    REQUIRE(ok.ok());
    CHECK(ok->dtype == DType::kFloat32);
    CHECK(ShapeToString(ok->shape) == "[2, 3]");
    // A runtime axis is the kernel's to check.
    CHECK(InferOne(op, {{DType::kInt32, {4}}, {DType::kInt32, {}}}).ok());
  }
  auto bad_axis = InferOne("CumSum", {{DType::kFloat32, {2, 3}}, {DType::kInt64, {}, std::vector<int64_t>{2}}});
  CHECK(bad_axis.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad_axis.status().message().find("node 'n' (CumSum): axis") == 0);
  auto int8 = InferOne("CumProd", {{DType::kInt8, {4}}, {DType::kInt64, {}}});
  CHECK(int8.status().message() == "node 'n' (CumProd): input x: expected dtype float32/64, float16, bfloat16, "
                                   "[u]int32 or [u]int64, found int8");
  auto axis2d = InferOne("CumSum", {{DType::kFloat32, {4}}, {DType::kInt64, {1, 1}}});
  CHECK(axis2d.status().code() == StatusCode::kInvalidArgument);
  auto scalar = InferOne("CumSum", {{DType::kFloat32, {}}, {DType::kInt64, {}}});
  CHECK(scalar.status().message() == "node 'n' (CumSum): input x: expected rank >= 1, found a scalar");
}

}  // namespace
}  // namespace kiln::ir::testing
