// BitCast CPU kernel: the bytes, reinterpreted.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("BitCast keeps the bits: float32 <-> int32") {
  auto x = Floats({3}, {1.0f, -2.0f, 0.0f});
  auto y = Output(DType::kInt32, {3});
  REQUIRE(RunKernel("BitCast", {}, {&x}, {&y}).ok());
  // IEEE 754: 1.0f = 0x3F800000, -2.0f = 0xC0000000.
  CHECK(y.values<int32_t>() == std::vector<int32_t>{0x3F800000, static_cast<int32_t>(0xC0000000u), 0});
  auto back = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("BitCast", {}, {&y}, {&back}).ok());
  CHECK(back.values<float>() == std::vector<float>{1.0f, -2.0f, 0.0f});
}

TEST_CASE("BitCast: an output of another width is an error") {
  auto x = Floats({2}, {1.0f, 2.0f});
  auto y = Output(DType::kInt64, {2});
  Status st = RunKernel("BitCast", {}, {&x}, {&y});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "BitCast: output int64 [2] is not as wide as input float32 [2]");
}

}  // namespace
}  // namespace kiln::cpu::testing
