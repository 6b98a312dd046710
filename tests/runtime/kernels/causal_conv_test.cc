// CausalConvWithState CPU kernel against hand-computed convolutions.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// B=1, C=2, L=3, k=2: x c0 = [1, 2, 3], c1 = [4, 5, 6]; w c0 = [1, 10], c1 = [2, -1].
struct CausalConvCase {
  TestTensor x = Floats({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  TestTensor w = Floats({2, 1, 2}, {1, 10, 2, -1});
  TestTensor bias = Floats({2}, {0.5f, 0});
  TestTensor past = Floats({1, 2, 1}, {7, 8});
  TestTensor y = Output(DType::kFloat32, {1, 2, 3});
  TestTensor state = Output(DType::kFloat32, {1, 2, 1});
};

TEST_CASE("CausalConvWithState: past state, bias, present state") {
  CausalConvCase c;
  // padded c0 = [7, 1, 2, 3]: 7*1 + 1*10 + 0.5, 1 + 20 + 0.5, 2 + 30 + 0.5;
  // padded c1 = [8, 4, 5, 6]: 16 - 4, 8 - 5, 10 - 6.
  REQUIRE(RunKernel("CausalConvWithState", {}, {&c.x, &c.w, &c.bias, &c.past}, {&c.y, &c.state}).ok());
  CHECK(c.y.values<float>() == std::vector<float>{17.5f, 21.5f, 32.5f, 12, 3, 4});
  CHECK(c.state.values<float>() == std::vector<float>{3, 6});
}

TEST_CASE("CausalConvWithState: zero state when absent, fused SiLU") {
  CausalConvCase c;
  auto none = Absent();
  REQUIRE(RunKernel("CausalConvWithState", {}, {&c.x, &c.w, &none, &none}, {&c.y, &c.state}).ok());
  CHECK(c.y.values<float>() == std::vector<float>{10, 21, 32, -4, 3, 4});
  AttrMap silu;
  silu.SetString("activation", "silu");
  REQUIRE(RunKernel("CausalConvWithState", silu, {&c.x, &c.w, &none, &none}, {&c.y, &c.state}).ok());
  // silu(v) = v / (1 + e^-v): silu(-4) = -4 / 55.59815, silu(3) = 3 / 1.0497871, silu(4) = 4 / 1.0183156.
  KILN_CHECK_FLOATS(c.y.values<float>(),
                    (std::vector<float>{9.999546f, 20.999999f, 32.0f, -0.0719448f, 2.857722f, 3.928055f}));
}

TEST_CASE("CausalConvWithState: a state of the wrong size is an error") {
  CausalConvCase c;
  auto wrong = Floats({1, 2, 2}, {0, 0, 0, 0});
  Status st = RunKernel("CausalConvWithState", {}, {&c.x, &c.w, &c.bias, &wrong}, {&c.y, &c.state});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "CausalConvWithState: past_state/present_state must be [1, 2, 1] and bias [2]");
}

}  // namespace
}  // namespace kiln::cpu::testing
