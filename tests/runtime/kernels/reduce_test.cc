#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// x = (arange(24) - 7) * 0.1 reshaped [2,3,4], reduced over axes {0, -1} with keepdims.
// Expected values from onnxruntime (opset 18, axes as input).
std::vector<float> ReduceCase(std::string_view op) {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i - 7) * 0.1f;
  auto x = Floats({2, 3, 4}, v);
  auto axes = Int64s({2}, {0, -1});
  auto y = Output(DType::kFloat32, {1, 3, 1});
  Status s = RunKernel(op, {}, {&x, &axes}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return y.values<float>();
}

TEST_CASE("Float reductions over two axes") {
  KILN_CHECK_FLOATS(ReduceCase("ReduceSum"), (std::vector<float>{0.4000001f, 3.6f, 6.8f}));
  KILN_CHECK_FLOATS(ReduceCase("ReduceMean"), (std::vector<float>{0.05000001f, 0.45f, 0.85f}));
  KILN_CHECK_FLOATS(ReduceCase("ReduceMax"), (std::vector<float>{0.8f, 1.2f, 1.6f}));
  KILN_CHECK_FLOATS(ReduceCase("ReduceMin"), (std::vector<float>{-0.7f, -0.3f, 0.1f}));
  auto prod = ReduceCase("ReduceProd");
  CHECK(prod[0] == doctest::Approx(0.014112f).epsilon(1e-4));
  CHECK(prod[1] == 0.0f);
  CHECK(prod[2] == doctest::Approx(0.0104832f).epsilon(1e-4));
  KILN_CHECK_FLOATS(ReduceCase("ReduceL2"), (std::vector<float>{1.732051f, 2.144761f, 2.95973f}));
  KILN_CHECK_FLOATS(ReduceCase("ReduceSumSquare"), (std::vector<float>{3, 4.6f, 8.76f}));
  KILN_CHECK_FLOATS(ReduceCase("ReduceL1"), (std::vector<float>{4.8f, 4.8f, 6.8f}));
  KILN_CHECK_FLOATS(ReduceCase("ReduceLogSumExp"), (std::vector<float>{2.305818f, 2.705818f, 3.105818f}));
}

TEST_CASE("ReduceSum on int64 with no axes reduces everything") {
  auto x = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = Output(DType::kInt64, {});
  AttrMap attrs;
  attrs.SetInt("keepdims", 0);
  REQUIRE(RunKernel("ReduceSum", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{21});
  REQUIRE(RunKernel("ReduceProd", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{720});
}

TEST_CASE("integer reductions: sums and products wrap, ReduceLogSum of 0 (log 0 = -inf) saturates at INT64_MIN") {
  // Signed overflow and converting -inf to an integer are undefined behavior in C++ (UBSan
  // found them); sums wrap modulo 2^64 as Add does, and results computed in double saturate
  // as Cast does.
  AttrMap attrs;
  attrs.SetInt("keepdims", 0);
  auto axes = Int64s({1}, {1});
  auto big = Int64s({2, 2}, {INT64_MAX, 1, INT64_MIN, -1});
  auto y = Output(DType::kInt64, {2});
  REQUIRE(RunKernel("ReduceSum", attrs, {&big, &axes}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{INT64_MIN, INT64_MAX});
  auto sq = Int64s({1, 2}, {int64_t{1} << 32, 3});
  auto y1 = Output(DType::kInt64, {1});
  REQUIRE(RunKernel("ReduceProd", attrs, {&sq, &axes}, {&y1}).ok());
  CHECK(y1.values<int64_t>() == std::vector<int64_t>{int64_t{3} << 32});
  REQUIRE(RunKernel("ReduceSumSquare", attrs, {&sq, &axes}, {&y1}).ok());
  CHECK(y1.values<int64_t>() == std::vector<int64_t>{9});  // 2^64 wraps to 0, + 9
  auto x = Int64s({2, 2}, {0, 0, 1, 2});
  REQUIRE(RunKernel("ReduceLogSum", attrs, {&x, &axes}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{INT64_MIN, 1});  // log 0, trunc(log 3)
}

TEST_CASE("noop_with_empty_axes copies the input") {
  auto x = Floats({2}, {3, 4});
  auto axes = Int64s({0}, {});
  auto y = Output(DType::kFloat32, {2});
  AttrMap attrs;
  attrs.SetInt("noop_with_empty_axes", 1);
  REQUIRE(RunKernel("ReduceMean", attrs, {&x, &axes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{3, 4});
}

TEST_CASE("Reduce over a middle axis and axis errors") {
  auto x = Floats({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto axes = Int64s({1}, {1});
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("ReduceMax", {}, {&x, &axes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{3, 4, 7, 8});
  auto bad = Int64s({1}, {3});
  Status s = RunKernel("ReduceMax", {}, {&x, &bad}, {&y});
  CHECK(s.message() == "ReduceMax: axis 3 is out of range for input [2, 2, 2]");
}

TEST_CASE("ArgMax and ArgMin") {
  auto x = Floats({2, 3}, {1, 3, 3, 2, 0, 2});
  auto y = Output(DType::kInt64, {2});
  AttrMap attrs;
  attrs.SetInt("axis", 1);
  attrs.SetInt("keepdims", 0);
  REQUIRE(RunKernel("ArgMax", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{1, 0});
  attrs.SetInt("select_last_index", 1);
  REQUIRE(RunKernel("ArgMax", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{2, 2});
  auto y0 = Output(DType::kInt64, {1, 3});
  REQUIRE(RunKernel("ArgMin", {}, {&x}, {&y0}).ok());
  CHECK(y0.values<int64_t>() == std::vector<int64_t>{0, 1, 1});
}

}  // namespace
}  // namespace kiln::cpu::testing

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Reductions, softmax and pooling on zero-size tensors") {
  auto x = Floats({2, 0}, {});
  auto axes = Int64s({1}, {1});
  auto y = Output(DType::kFloat32, {2, 1});
  REQUIRE(RunKernel("ReduceSum", {}, {&x, &axes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 0});
  auto s = Output(DType::kFloat32, {2, 0});
  CHECK(RunKernel("Softmax", {}, {&x}, {&s}).ok());
  auto am = Output(DType::kInt64, {2});
  AttrMap attrs;
  attrs.SetInt("axis", 1);
  CHECK(RunKernel("ArgMax", attrs, {&x}, {&am}).code() == StatusCode::kInvalidArgument);
  auto img = Floats({0, 3, 4, 4}, {});
  auto pooled = Output(DType::kFloat32, {0, 3, 2, 2});
  AttrMap pool;
  pool.SetInts("kernel_shape", {2, 2});
  pool.SetInts("strides", {2, 2});
  CHECK(RunKernel("MaxPool", pool, {&img}, {&pooled}).ok());
  auto g = Output(DType::kFloat32, {0, 3, 1, 1});
  CHECK(RunKernel("GlobalAveragePool", {}, {&img}, {&g}).ok());
}

}  // namespace
}  // namespace kiln::cpu::testing
