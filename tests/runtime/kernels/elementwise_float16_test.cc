// Unfused Max, Min and Mod over float16 and bfloat16: computed in float, rounded back.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

std::vector<float> Floats16(DType dt, const TestTensor& t) {
  std::vector<float> out;
  for (uint16_t h : t.values<uint16_t>()) out.push_back(dt == DType::kFloat16 ? HalfToFloat(h) : BF16ToFloat(h));
  return out;
}

TEST_CASE("Max, Min, Mod: float16 and bfloat16") {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    INFO(DTypeName(dt));
    auto a = Halves(dt, {1.5f, -2, 5, -5});
    auto b = Halves(dt, {0.5f, 3, 3, 3});
    auto y = Output(dt, {4});
    REQUIRE(RunKernel("Max", {}, {&a, &b}, {&y}).ok());
    CHECK(Floats16(dt, y) == std::vector<float>{1.5f, 3, 5, 3});
    REQUIRE(RunKernel("Min", {}, {&a, &b}, {&y}).ok());
    CHECK(Floats16(dt, y) == std::vector<float>{0.5f, -2, 3, -5});
    // fmod = 0 takes the divisor's sign (Python's %); fmod = 1 the dividend's (C's fmod).
    REQUIRE(RunKernel("Mod", {}, {&a, &b}, {&y}).ok());
    CHECK(Floats16(dt, y) == std::vector<float>{0, 1, 2, 1});
    AttrMap fmod;
    fmod.SetInt("fmod", 1);
    REQUIRE(RunKernel("Mod", fmod, {&a, &b}, {&y}).ok());
    CHECK(Floats16(dt, y) == std::vector<float>{0, -2, 2, -2});
  }
}

TEST_CASE("Max float16: a NaN operand gives NaN, three inputs fold") {
  auto a = Halves(DType::kFloat16, {1, NAN});
  auto b = Halves(DType::kFloat16, {2, 0});
  auto c = Halves(DType::kFloat16, {-1, 7});
  auto y = Output(DType::kFloat16, {2});
  REQUIRE(RunKernel("Max", {}, {&a, &b, &c}, {&y}).ok());
  const auto out = Floats16(DType::kFloat16, y);
  CHECK(out[0] == 2);
  CHECK(std::isnan(out[1]));
}

}  // namespace
}  // namespace kiln::cpu::testing
