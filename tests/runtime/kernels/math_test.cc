#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

template <typename T>
TestTensor Typed(DType dt, std::vector<int64_t> dims, std::vector<T> v) {
  TestTensor t(dt, std::move(dims), sizeof(T));
  std::memcpy(t.data<T>(), v.data(), v.size() * sizeof(T));
  return t;
}

std::vector<float> Unary(std::string_view op, std::vector<float> x, AttrMap attrs = {}) {
  auto in = Floats({static_cast<int64_t>(x.size())}, x);
  auto out = Output(DType::kFloat32, {static_cast<int64_t>(x.size())});
  Status s = RunKernel(op, attrs, {&in}, {&out});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return out.values<float>();
}

TEST_CASE("Acosh, Asinh, Atanh") {
  // acosh(1) = 0, acosh(cosh(2)) = 2; asinh(sinh(-1.5)) = -1.5; atanh(tanh(0.5)) = 0.5.
  KILN_CHECK_FLOATS(Unary("Acosh", {1.0f, 3.7621956911f}), (std::vector<float>{0.0f, 2.0f}));
  KILN_CHECK_FLOATS(Unary("Asinh", {0.0f, -2.1292794551f}), (std::vector<float>{0.0f, -1.5f}));
  KILN_CHECK_FLOATS(Unary("Atanh", {0.0f, 0.4621171573f}), (std::vector<float>{0.0f, 0.5f}));
}

TEST_CASE("Swish and Shrink") {
  AttrMap a;
  a.SetFloat("alpha", 2.0f);
  // x * sigmoid(2x): 1 * 1/(1+e^-2) = 0.8807971, -1 * 1/(1+e^2) = -0.1192029.
  KILN_CHECK_FLOATS(Unary("Swish", {0.0f, 1.0f, -1.0f}, a), (std::vector<float>{0.0f, 0.8807971f, -0.1192029f}));
  AttrMap s;
  s.SetFloat("lambd", 1.5f);
  s.SetFloat("bias", 1.0f);
  KILN_CHECK_FLOATS(Unary("Shrink", {-2.0f, -1.5f, 0.0f, 1.5f, 3.0f}, s), (std::vector<float>{-1.0f, 0.0f, 0.0f, 0.0f, 2.0f}));
  auto xi = Int32s({3}, {-5, 0, 5});
  auto yi = Output(DType::kInt32, {3});
  REQUIRE(RunKernel("Shrink", s, {&xi}, {&yi}).ok());
  CHECK(yi.values<int32_t>() == std::vector<int32_t>{-4, 0, 4});
}

TEST_CASE("IsInf with detect flags, IsNaN, and float16") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto x = Floats({4}, {-inf, 1.0f, inf, nan});
  auto y = Output(DType::kBool, {4});
  REQUIRE(RunKernel("IsInf", {}, {&x}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 0});
  AttrMap neg_only;
  neg_only.SetInt("detect_positive", 0);
  REQUIRE(RunKernel("IsInf", neg_only, {&x}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 0});
  REQUIRE(RunKernel("IsNaN", {}, {&x}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 0, 0, 1});
  // float16: -inf 0xfc00, 1.0 0x3c00, +inf 0x7c00, NaN 0x7e00.
  auto h = Typed<uint16_t>(DType::kFloat16, {4}, {0xfc00, 0x3c00, 0x7c00, 0x7e00});
  REQUIRE(RunKernel("IsInf", {}, {&h}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 0});
  REQUIRE(RunKernel("IsNaN", {}, {&h}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 0, 0, 1});
}

TEST_CASE("Bitwise ops broadcast, BitwiseNot") {
  auto a = Int32s({2, 2}, {12, 10, -1, 0});
  auto b = Int32s({2}, {10, 6});
  auto y = Output(DType::kInt32, {2, 2});
  REQUIRE(RunKernel("BitwiseAnd", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{8, 2, 10, 0});
  REQUIRE(RunKernel("BitwiseOr", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{14, 14, -1, 6});
  REQUIRE(RunKernel("BitwiseXor", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{6, 12, -11, 6});
  REQUIRE(RunKernel("BitwiseNot", {}, {&a}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{-13, -11, 0, -1});
  auto f = Floats({2}, {1, 2});
  Status s = RunKernel("BitwiseAnd", {}, {&f, &f}, {&y});
  CHECK(s.code() == StatusCode::kInvalidArgument);
}

TEST_CASE("BitShift left and right, shifts past the width give 0") {
  auto x = Typed<uint8_t>(DType::kUInt8, {4}, {1, 3, 255, 128});
  auto s = Typed<uint8_t>(DType::kUInt8, {4}, {1, 2, 4, 8});
  auto y = Output(DType::kUInt8, {4});
  AttrMap left, right, bad;
  left.SetString("direction", "LEFT");
  right.SetString("direction", "RIGHT");
  bad.SetString("direction", "UP");
  REQUIRE(RunKernel("BitShift", left, {&x, &s}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{2, 12, 240, 0});
  REQUIRE(RunKernel("BitShift", right, {&x, &s}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 0, 15, 0});
  auto x64 = Typed<uint64_t>(DType::kUInt64, {2}, {1, 1ull << 63});
  auto s64 = Typed<uint64_t>(DType::kUInt64, {2}, {63, 63});
  auto y64 = Output(DType::kUInt64, {2});
  REQUIRE(RunKernel("BitShift", right, {&x64, &s64}, {&y64}).ok());
  CHECK(y64.values<uint64_t>() == std::vector<uint64_t>{0, 1});
  Status st = RunKernel("BitShift", bad, {&x, &s}, {&y});
  CHECK(st.message().find("direction") != std::string::npos);
  auto xi = Int32s({1}, {1});
  auto yi = Output(DType::kInt32, {1});
  CHECK(RunKernel("BitShift", left, {&xi, &xi}, {&yi}).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu::testing

namespace kiln::cpu::testing {
namespace {

// The opset-20 bool forms of ReduceMax/ReduceMin (any / all) and Pow's unsigned exponents,
// added with the ops above.
TEST_CASE("ReduceMax/ReduceMin of bool are any/all, Pow with a uint64 exponent") {
  auto x = Bools({2, 3}, {true, false, false, false, false, false});
  auto axes = Int64s({1}, {1});
  auto y = Output(DType::kBool, {2, 1});
  REQUIRE(RunKernel("ReduceMax", {}, {&x, &axes}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0});
  auto all = Bools({2, 3}, {true, true, true, true, false, true});
  REQUIRE(RunKernel("ReduceMin", {}, {&all, &axes}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0});

  auto base = Floats({3}, {2, 3, 0.5f});
  auto e = Typed<uint64_t>(DType::kUInt64, {3}, {3, 0, 2});
  auto p = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("Pow", {}, {&base, &e}, {&p}).ok());
  CHECK(p.values<float>() == std::vector<float>{8, 1, 0.25f});
}

}  // namespace
}  // namespace kiln::cpu::testing
