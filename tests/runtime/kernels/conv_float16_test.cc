// Conv over float16 and bfloat16: widened to float32 (runtime/kernels/widen.h), accumulated there,
// rounded back once.
#include <doctest/doctest.h>

#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

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

    // An epilogue annotation runs in the float32 kernel too (runtime/kernels/widen.h): Relu
    // after the bias turns 0.5 x[i] + 0.25 x[i+1] - 1.5 = [-1.25, -0.5, 0.25, 1] non-negative.
    AttrMap relu;
    relu.SetString("epilogue_activation", "Relu");
    relu.SetString("epilogue_order", "bias,act,residual");
    auto x4 = Halves(dt, {1, 1, 5}, {0, 1, 2, 3, 4});
    auto bm = Halves(dt, {1}, {-1.5f});
    auto y4 = Output(dt, {1, 1, 4});
    Status st = RunKernel("Conv", relu, {&x4, &w, &bm}, {&y4});
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(Widened(dt, y4) == std::vector<float>{0, 0, 0.25f, 1});
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
