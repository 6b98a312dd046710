// LRN, LpNormalization and MeanVarianceNormalization CPU kernels against hand-computed values.
#include <doctest/doctest.h>

#include <cstring>

#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

AttrMap LrnAttrs(int64_t size, float alpha) {
  AttrMap a;
  a.SetInt("size", size);
  a.SetFloat("alpha", alpha);  // alpha / size = 1 in these tests
  a.SetFloat("beta", 1.0f);
  a.SetFloat("bias", 1.0f);
  return a;
}

TEST_CASE("LRN: the channel window is clipped at the edges and leans forward for an even size") {
  auto x = Floats({1, 3, 1, 1}, {1, 2, 3});
  auto y = Output(DType::kFloat32, {1, 3, 1, 1});
  // size 3: windows {0,1}, {0,1,2}, {1,2}: sums of squares 5, 14, 13.
  REQUIRE(RunKernel("LRN", LrnAttrs(3, 3), {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1.0f / 6, 2.0f / 15, 3.0f / 14}));
  // size 2: floor(1/2) = 0 channels before, ceil(1/2) = 1 after: windows {0,1}, {1,2}, {2}.
  REQUIRE(RunKernel("LRN", LrnAttrs(2, 2), {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1.0f / 6, 2.0f / 14, 3.0f / 10}));
}

TEST_CASE("LRN: float16 storage computes in float and rounds once") {
  TestTensor x(DType::kFloat16, {1, 3, 1, 1}, 2);
  for (int i = 0; i < 3; ++i) x.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(i + 1));
  auto y = Output(DType::kFloat16, {1, 3, 1, 1});
  REQUIRE(RunKernel("LRN", LrnAttrs(3, 3), {&x}, {&y}).ok());
  const auto out = y.values<uint16_t>();
  CHECK(out[0] == FloatToHalf(1.0f / 6));
  CHECK(out[1] == FloatToHalf(2.0f / 15));
  CHECK(out[2] == FloatToHalf(3.0f / 14));
}

TEST_CASE("LRN: a size below 1 is an error naming it") {
  auto x = Floats({1, 1, 1}, {1});
  auto y = Output(DType::kFloat32, {1, 1, 1});
  Status s = RunKernel("LRN", LrnAttrs(0, 1), {&x}, {&y});
  CHECK(s.message() == "LRN: size must be >= 1, got 0");
}

TEST_CASE("LpNormalization: p = 2 along the last axis, p = 1 along the first") {
  auto x = Floats({2, 2}, {3, -4, 6, 8});
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("LpNormalization", {}, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0.6f, -0.8f, 0.6f, 0.8f}));
  AttrMap a;
  a.SetInt("axis", 0);
  a.SetInt("p", 1);
  REQUIRE(RunKernel("LpNormalization", a, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3.0f / 9, -4.0f / 12, 6.0f / 9, 8.0f / 12}));
  auto zeros = Floats({2, 2}, {0, 0, 1, 0});
  REQUIRE(RunKernel("LpNormalization", {}, {&zeros}, {&y}).ok());  // a zero norm gives 0, not NaN
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0, 0, 1, 0}));
  a.SetInt("p", 3);
  CHECK(RunKernel("LpNormalization", a, {&x}, {&y}).message() == "LpNormalization: p must be 1 or 2, got 3");
}

TEST_CASE("MeanVarianceNormalization: default axes {0, 2, 3} give per-channel statistics") {
  // Channel 0 holds {1, 3}: mean 2, std 1. Channel 1 holds {2, 2}: std 0, so 0 / 1e-9 = 0.
  auto x = Floats({1, 2, 1, 2}, {1, 3, 2, 2});
  auto y = Output(DType::kFloat32, {1, 2, 1, 2});
  REQUIRE(RunKernel("MeanVarianceNormalization", {}, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-1, 1, 0, 0}));
  // Over axis 1 only: pairs (1, 2) and (3, 2), each mean +- 0.5 with std 0.5.
  AttrMap a;
  a.SetInts("axes", {1});
  REQUIRE(RunKernel("MeanVarianceNormalization", a, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-1, 1, 1, -1}));
}

}  // namespace
}  // namespace kiln::cpu::testing
