// CumSum / CumProd CPU kernels against hand-computed scans.
#include <doctest/doctest.h>

#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

AttrMap Flags(int exclusive, int reverse) {
  AttrMap a;
  a.SetInt("exclusive", exclusive);
  a.SetInt("reverse", reverse);
  return a;
}

std::vector<float> Run1d(const char* op, int exclusive, int reverse) {
  auto x = Floats({4}, {1, 2, 3, 4});
  auto axis = Int64s({}, {0});
  auto y = Output(DType::kFloat32, {4});
  REQUIRE(RunKernel(op, Flags(exclusive, reverse), {&x, &axis}, {&y}).ok());
  return y.values<float>();
}

TEST_CASE("CumSum and CumProd: inclusive, exclusive, reverse") {
  CHECK(Run1d("CumSum", 0, 0) == std::vector<float>{1, 3, 6, 10});
  CHECK(Run1d("CumSum", 1, 0) == std::vector<float>{0, 1, 3, 6});
  CHECK(Run1d("CumSum", 0, 1) == std::vector<float>{10, 9, 7, 4});
  CHECK(Run1d("CumSum", 1, 1) == std::vector<float>{9, 7, 4, 0});
  CHECK(Run1d("CumProd", 0, 0) == std::vector<float>{1, 2, 6, 24});
  CHECK(Run1d("CumProd", 1, 0) == std::vector<float>{1, 1, 2, 6});
  CHECK(Run1d("CumProd", 0, 1) == std::vector<float>{24, 24, 12, 4});
  CHECK(Run1d("CumProd", 1, 1) == std::vector<float>{24, 12, 4, 1});
}

TEST_CASE("CumSum and CumProd: 2-D along either axis, int32 axis, integer data") {
  auto x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto a0 = Int64s({}, {0});
  auto y = Output(DType::kFloat32, {2, 3});
  REQUIRE(RunKernel("CumSum", {}, {&x, &a0}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 2, 3, 5, 7, 9});
  auto last = Int32s({1}, {-1});  // one-element 1-D, as some exporters write it
  REQUIRE(RunKernel("CumSum", {}, {&x, &last}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 3, 6, 4, 9, 15});

  auto xi = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
  auto yi = Output(DType::kInt64, {2, 3});
  REQUIRE(RunKernel("CumProd", {}, {&xi, &last}, {&yi}).ok());
  CHECK(yi.values<int64_t>() == std::vector<int64_t>{1, 2, 6, 4, 20, 120});
}

TEST_CASE("CumSum float16 rounds after every step, as numpy does") {
  // 2048 + 1 is not a float16 (the spacing there is 2): it rounds to even, 2048, every time.
  // Accumulating in float and rounding once would give 2048, 2049 -> 2048, 2050.
  TestTensor x(DType::kFloat16, {3}, 2);
  const uint16_t in[] = {FloatToHalf(2048), FloatToHalf(1), FloatToHalf(1)};
  std::memcpy(x.data<uint16_t>(), in, sizeof(in));
  auto axis = Int64s({}, {0});
  auto y = Output(DType::kFloat16, {3});
  REQUIRE(RunKernel("CumSum", {}, {&x, &axis}, {&y}).ok());
  const auto out = y.values<uint16_t>();
  CHECK(HalfToFloat(out[0]) == 2048.0f);
  CHECK(HalfToFloat(out[1]) == 2048.0f);
  CHECK(HalfToFloat(out[2]) == 2048.0f);
}

TEST_CASE("CumSum: an axis outside the rank is an error naming it") {
  auto x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto axis = Int64s({}, {2});
  auto y = Output(DType::kFloat32, {2, 3});
  Status st = RunKernel("CumSum", {}, {&x, &axis}, {&y});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "CumSum: axis 2 is outside [-2, 2) for x [2, 3]");
}

}  // namespace
}  // namespace kiln::cpu::testing
