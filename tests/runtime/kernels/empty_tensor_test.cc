// CPU kernels on tensors with a 0 dim: nothing is read, nothing divides by a zero extent,
// and an output that still has elements gets what ONNX's reference gives (a reduction
// over an empty set is the reduction's identity, a product with K = 0 is zero).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// x[2, 0, 2] reduced over axis 1 with keepdims: four outputs, each over no elements.
std::vector<float> ReduceEmpty(std::string_view op) {
  auto x = Floats({2, 0, 2}, {});
  auto axes = Int64s({1}, {1});
  auto y = Output(DType::kFloat32, {2, 1, 2});
  Status s = RunKernel(op, {}, {&x, &axes}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return y.values<float>();
}

TEST_CASE("empty: a reduction over an empty set gives its identity (onnx/reference/ops/op_reduce_*.py)") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(ReduceEmpty("ReduceSum") == std::vector<float>(4, 0.0f));
  CHECK(ReduceEmpty("ReduceSumSquare") == std::vector<float>(4, 0.0f));
  CHECK(ReduceEmpty("ReduceL1") == std::vector<float>(4, 0.0f));
  CHECK(ReduceEmpty("ReduceL2") == std::vector<float>(4, 0.0f));
  CHECK(ReduceEmpty("ReduceProd") == std::vector<float>(4, 1.0f));
  CHECK(ReduceEmpty("ReduceMax") == std::vector<float>(4, -inf));
  CHECK(ReduceEmpty("ReduceMin") == std::vector<float>(4, inf));
  CHECK(ReduceEmpty("ReduceLogSum") == std::vector<float>(4, -inf));     // log(0)
  CHECK(ReduceEmpty("ReduceLogSumExp") == std::vector<float>(4, -inf));  // log(sum of nothing)
  for (float v : ReduceEmpty("ReduceMean")) CHECK(std::isnan(v));       // 0 / 0, as numpy's mean
}

TEST_CASE("empty: an int64 ReduceMax over an empty set gives the lowest int64") {
  auto x = Int64s({3, 0}, {});
  auto axes = Int64s({1}, {1});
  auto y = Output(DType::kInt64, {3, 1});
  REQUIRE(RunKernel("ReduceMax", {}, {&x, &axes}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>(3, std::numeric_limits<int64_t>::lowest()));
}

TEST_CASE("empty: a reduction over a non-reduced empty axis writes nothing") {
  auto x = Floats({2, 0, 3}, {});
  auto axes = Int64s({1}, {2});
  auto y = Output(DType::kFloat32, {2, 0});
  REQUIRE(RunKernel("ReduceMean", {}, {&x, &axes}, {&y}).ok());
  CHECK(y.values<float>().empty());
}

TEST_CASE("empty: MatMul and Gemm with K = 0 give zeros (plus Gemm's C)") {
  auto a = Floats({2, 0}, {});
  auto b = Floats({0, 3}, {});
  auto y = Floats({2, 3}, {9, 9, 9, 9, 9, 9});  // stale values the kernel must overwrite
  REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>(6, 0.0f));
  auto c = Floats({3}, {1, 2, 3});
  auto g = Floats({2, 3}, {9, 9, 9, 9, 9, 9});
  REQUIRE(RunKernel("Gemm", {}, {&a, &b, &c}, {&g}).ok());
  CHECK(g.values<float>() == (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

TEST_CASE("empty: MatMul with M = 0 and a batch of 0 writes nothing") {
  auto a = Floats({0, 2, 4}, {});
  auto b = Floats({4, 3}, std::vector<float>(12, 1.0f));
  auto y = Output(DType::kFloat32, {0, 2, 3});
  REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<float>().empty());
}

TEST_CASE("empty: Conv, MaxPool and GlobalAveragePool on a batch of 0") {
  auto x = Floats({0, 2, 5, 5}, {});
  auto w = Floats({3, 2, 3, 3}, std::vector<float>(54, 1.0f));
  auto y = Output(DType::kFloat32, {0, 3, 3, 3});
  Status s = RunKernel("Conv", {}, {&x, &w}, {&y});
  CHECK_MESSAGE(s.ok(), s.ToString());
  AttrMap pool;
  pool.SetInts("kernel_shape", {2, 2});
  auto p = Output(DType::kFloat32, {0, 2, 4, 4});
  CHECK(RunKernel("MaxPool", pool, {&x}, {&p}).ok());
  auto gap = Output(DType::kFloat32, {0, 2, 1, 1});
  CHECK(RunKernel("GlobalAveragePool", {}, {&x}, {&gap}).ok());
}

TEST_CASE("empty: Softmax, LayerNormalization and BatchNormalization on 0 rows") {
  auto x = Floats({0, 4}, {});
  auto y = Output(DType::kFloat32, {0, 4});
  CHECK(RunKernel("Softmax", {}, {&x}, {&y}).ok());
  auto scale = Floats({4}, {1, 1, 1, 1});
  auto bias = Floats({4}, {0, 0, 0, 0});
  CHECK(RunKernel("LayerNormalization", {}, {&x, &scale, &bias}, {&y}).ok());
  auto xb = Floats({0, 4, 3}, {});
  auto yb = Output(DType::kFloat32, {0, 4, 3});
  auto var = Floats({4}, {1, 1, 1, 1});
  CHECK(RunKernel("BatchNormalization", {}, {&xb, &scale, &bias, &bias, &var}, {&yb}).ok());
}

TEST_CASE("empty: data movement with an empty input or an empty result") {
  auto a = Floats({1, 2}, {1, 2});
  auto e = Floats({0, 2}, {});
  auto b = Floats({1, 2}, {3, 4});
  auto cat = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("Concat", {}, {&a, &e, &b}, {&cat}).ok());
  CHECK(cat.values<float>() == (std::vector<float>{1, 2, 3, 4}));

  // Padding an empty tensor gives a tensor of the constant only.
  auto pads = Int64s({4}, {1, 0, 1, 0});
  auto cv = Floats({}, {7});
  auto padded = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("Pad", {}, {&e, &pads, &cv}, {&padded}).ok());
  CHECK(padded.values<float>() == std::vector<float>(4, 7.0f));

  auto data = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto none = Int64s({0}, {});
  auto gathered = Output(DType::kFloat32, {0, 2});
  CHECK(RunKernel("Gather", {}, {&data, &none}, {&gathered}).ok());

  auto t = Output(DType::kFloat32, {2, 0});
  AttrMap perm;
  perm.SetInts("perm", {1, 0});
  CHECK(RunKernel("Transpose", perm, {&e}, {&t}).ok());

  // Split with a zero-sized part: that output is empty, the others are whole.
  auto x = Floats({3}, {1, 2, 3});
  auto split = Int64s({3}, {0, 3, 0});
  auto s0 = Output(DType::kFloat32, {0});
  auto s1 = Output(DType::kFloat32, {3});
  auto s2 = Output(DType::kFloat32, {0});
  REQUIRE(RunKernel("Split", {}, {&x, &split}, {&s0, &s1, &s2}).ok());
  CHECK(s1.values<float>() == (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace kiln::cpu::testing
