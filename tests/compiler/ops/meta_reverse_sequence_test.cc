#include <doctest/doctest.h>

#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir::testing {
namespace {

AttrMap Axes(int64_t batch_axis, int64_t time_axis) {
  AttrMap a;
  a.SetInt("batch_axis", batch_axis);
  a.SetInt("time_axis", time_axis);
  return a;
}

TEST_CASE("ReverseSequence meta: output like the input - axes, lengths and dtypes checked") {
  auto y = InferOne("ReverseSequence", {{DType::kFloat16, {3, 4, 5}}, {DType::kInt64, {4}}});
  REQUIRE(y.ok());
  CHECK(y->dtype == DType::kFloat16);
  CHECK(ShapeToString(y->shape) == "[3, 4, 5]");
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt64, {3}}}, Axes(0, 1)).ok());

  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt64, {3}}}, Axes(2, 0))
            .status()
            .message() == "node 'n' (ReverseSequence): batch_axis: expected 0 or 1, found 2");
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt64, {3}}}, Axes(1, -1))
            .status()
            .message() == "node 'n' (ReverseSequence): time_axis: expected 0 or 1, found -1");
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt64, {3}}}, Axes(0, 0))
            .status()
            .message() == "node 'n' (ReverseSequence): batch_axis and time_axis: expected different axes, both are 0");
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt32, {4}}}).status().message() ==
        "node 'n' (ReverseSequence): input sequence_lens: expected int64, found int32");
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {4}}, {DType::kInt64, {4}}}).status().message() ==
        "node 'n' (ReverseSequence): input: expected rank >= 2, found [4]");
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt64, {3}}}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(InferOne("ReverseSequence", {{DType::kFloat32, {3, 4}}, {DType::kInt64, {4}, std::vector<int64_t>{1, 2, 3, 4}}})
            .status()
            .message() ==
        "node 'n' (ReverseSequence): input sequence_lens: expected values in [0, 3] (the time dim of input), found 4");
}

TEST_CASE("Range meta: float16 stash_type must be float or double") {
  AttrMap a;
  a.SetInt("stash_type", 10);
  std::vector<In> in(3, In{DType::kFloat16, {}});
  CHECK(InferOne("Range", in, a).status().message() ==
        "node 'n' (Range): stash_type: expected 1 (float) or 11 (double), found 10");
}

}  // namespace
}  // namespace kiln::ir::testing
