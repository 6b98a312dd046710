// Conv over float16 and bfloat16: widened to float32, accumulated there, rounded back once.
#include <doctest/doctest.h>

#include "runtime/half.h"
#include "tests/runtime/cpu/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TestTensor Halves(DType dt, std::vector<int64_t> dims, std::vector<float> v) {
  TestTensor t(dt, std::move(dims), 2);
  for (size_t i = 0; i < v.size(); ++i)
    t.data<uint16_t>()[i] = dt == DType::kFloat16 ? FloatToHalf(v[i]) : FloatToBF16(v[i]);
  return t;
}

std::vector<float> Widened(DType dt, const TestTensor& t) {
  std::vector<float> out;
  for (uint16_t h : t.values<uint16_t>()) out.push_back(dt == DType::kFloat16 ? HalfToFloat(h) : BF16ToFloat(h));
  return out;
}

TEST_CASE("Conv: float16 and bfloat16") {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    INFO(DTypeName(dt));
    // y[i] = 0.5 x[i] + 0.25 x[i+1] + 0.125, all exact in both types.
    auto x = Halves(dt, {1, 1, 4}, {1, 2, 3, 4});
    auto w = Halves(dt, {1, 1, 2}, {0.5f, 0.25f});
    auto b = Halves(dt, {1}, {0.125f});
    auto y = Output(dt, {1, 1, 3});
    REQUIRE(RunKernel("Conv", {}, {&x, &w, &b}, {&y}).ok());
    CHECK(Widened(dt, y) == std::vector<float>{1.125f, 1.875f, 2.625f});

    // Where the type's spacing is 2, big + 1 + 1 accumulated in float32 is big + 2; rounding
    // each partial sum to the storage type would stay at big (1 is a tie, to even).
    const float big = dt == DType::kFloat16 ? 2048 : 256;
    auto xs = Halves(dt, {1, 1, 3}, {big, 1, 1});
    auto ones = Halves(dt, {1, 1, 3}, {1, 1, 1});
    auto ys = Output(dt, {1, 1, 1});
    REQUIRE(RunKernel("Conv", {}, {&xs, &ones}, {&ys}).ok());
    CHECK(Widened(dt, ys) == std::vector<float>{big + 2});

    auto wf = Floats({1, 1, 2}, {0.5f, 0.25f});
    Status st = RunKernel("Conv", {}, {&x, &wf, &b}, {&y});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    const std::string name(DTypeName(dt));
    CHECK(st.message() == "Conv: expected X, W, B and Y of one dtype, got " + name + ", float32, " + name + ", " + name);
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
