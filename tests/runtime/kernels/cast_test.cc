#include <doctest/doctest.h>

#include <cmath>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Cast float to int truncates toward zero") {
  auto x = Floats({4}, {1.7f, -1.7f, 2.5f, -0.2f});
  auto y = Output(DType::kInt64, {4});
  AttrMap attrs;
  attrs.SetInt("to", static_cast<int64_t>(DType::kInt64));
  REQUIRE(RunKernel("Cast", attrs, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{1, -1, 2, 0});
  auto y8 = Output(DType::kInt8, {4});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&y8}).ok());
  CHECK(y8.values<int8_t>() == std::vector<int8_t>{1, -1, 2, 0});
  CHECK(RunKernel("Cast", attrs, {&x}, {&y8}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Cast float to a narrower integer saturates at its range, NaN gives 0 (as fused programs do)") {
  auto x = Floats({5}, {300.0f, -300.0f, 1e10f, -5.5f, std::nanf("")});
  auto y8 = Output(DType::kInt8, {5});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&y8}).ok());
  CHECK(y8.values<int8_t>() == std::vector<int8_t>{127, -128, 127, -5, 0});
  auto u8 = Output(DType::kUInt8, {5});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&u8}).ok());
  CHECK(u8.values<uint8_t>() == std::vector<uint8_t>{255, 0, 255, 0, 0});
  auto i32 = Output(DType::kInt32, {5});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&i32}).ok());
  CHECK(i32.values<int32_t>() == std::vector<int32_t>{300, -300, 2147483647, -5, 0});
}

TEST_CASE("Cast to and from bool") {
  auto x = Floats({3}, {0, -2, 0.1f});
  auto b = Output(DType::kBool, {3});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&b}).ok());
  CHECK(b.values<uint8_t>() == std::vector<uint8_t>{0, 1, 1});
  auto f = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("Cast", {}, {&b}, {&f}).ok());
  CHECK(f.values<float>() == std::vector<float>{0, 1, 1});
}

TEST_CASE("Cast float16 round trip and rounding") {
  // 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, 1/3 -> 0x3555 (0.333251953125).
  auto x = Floats({4}, {1.0f, -2.0f, 65504.0f, 1.0f / 3});
  auto h = Output(DType::kFloat16, {4});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&h}).ok());
  CHECK(h.values<uint16_t>() == std::vector<uint16_t>{0x3c00, 0xc000, 0x7bff, 0x3555});
  auto back = Output(DType::kFloat32, {4});
  REQUIRE(RunKernel("Cast", {}, {&h}, {&back}).ok());
  CHECK(back.values<float>() == std::vector<float>{1.0f, -2.0f, 65504.0f, 0.333251953125f});
}

TEST_CASE("CastLike takes the output dtype, int64 to int32 and uint8") {
  auto x = Int64s({3}, {1, -1, 300});
  auto like = Int32s({1}, {0});
  auto y = Output(DType::kInt32, {3});
  REQUIRE(RunKernel("CastLike", {}, {&x, &like}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{1, -1, 300});
  auto u = Output(DType::kUInt8, {3});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&u}).ok());
  CHECK(u.values<uint8_t>() == std::vector<uint8_t>{1, 255, 44});
  auto d = Output(DType::kFloat64, {3});
  REQUIRE(RunKernel("Cast", {}, {&x}, {&d}).ok());
  CHECK(d.values<double>() == std::vector<double>{1, -1, 300});
}

}  // namespace
}  // namespace kiln::cpu::testing
