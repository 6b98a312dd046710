#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Add broadcasts [2,1] + [3] to [2,3]") {
  auto a = Floats({2, 1}, {1, 2});
  auto b = Floats({3}, {10, 20, 30});
  auto y = Output(DType::kFloat32, {2, 3});
  REQUIRE(RunKernel("Add", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{11, 21, 31, 12, 22, 32});
}

TEST_CASE("Sub broadcasts on a middle axis and with a scalar") {
  auto a = Floats({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto b = Floats({2, 1, 2}, {1, 1, 10, 10});
  auto y = Output(DType::kFloat32, {2, 2, 2});
  REQUIRE(RunKernel("Sub", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 1, 2, 3, -5, -4, -3, -2});
  auto s = Floats({}, {2});
  auto y2 = Output(DType::kFloat32, {2, 2, 2});
  REQUIRE(RunKernel("Sub", {}, {&s, &a}, {&y2}).ok());
  CHECK(y2.values<float>() == std::vector<float>{1, 0, -1, -2, -3, -4, -5, -6});
}

TEST_CASE("Mul and Div on int64 shape arithmetic, Div truncates") {
  auto a = Int64s({4}, {7, -7, 9, 1});
  auto b = Int64s({4}, {2, 2, -4, 3});
  auto y = Output(DType::kInt64, {4});
  REQUIRE(RunKernel("Div", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{3, -3, -2, 0});
  REQUIRE(RunKernel("Mul", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{14, -14, -36, 3});
}

TEST_CASE("int32 Add with row broadcast") {
  auto a = Int32s({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = Int32s({1, 3}, {100, 200, 300});
  auto y = Output(DType::kInt32, {2, 3});
  REQUIRE(RunKernel("Add", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{101, 202, 303, 104, 205, 306});
}

TEST_CASE("integer Div and Mod by zero give 0, INT_MIN / -1 wraps (docs/semantics.md)") {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto a = Int64s({4}, {7, -7, kMin, kMin});
  auto b = Int64s({4}, {0, 0, -1, 0});
  auto y = Output(DType::kInt64, {4});
  REQUIRE(RunKernel("Div", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 0, kMin, 0});
  REQUIRE(RunKernel("Mod", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 0, 0, 0});
  AttrMap fmod;
  fmod.SetInt("fmod", 1);
  REQUIRE(RunKernel("Mod", fmod, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 0, 0, 0});
  auto c = Int32s({3}, {std::numeric_limits<int32_t>::min(), 5, -5});
  auto d = Int32s({3}, {-1, 0, 0});
  auto z = Output(DType::kInt32, {3});
  REQUIRE(RunKernel("Div", {}, {&c, &d}, {&z}).ok());
  CHECK(z.values<int32_t>() == std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 0, 0});
}

TEST_CASE("Comparisons produce bool") {
  auto a = Floats({3}, {1, 2, 3});
  auto b = Floats({1}, {2});
  auto y = Output(DType::kBool, {3});
  REQUIRE(RunKernel("Less", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 0});
  REQUIRE(RunKernel("GreaterOrEqual", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 1, 1});
  REQUIRE(RunKernel("Equal", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 1, 0});
  auto i = Int64s({3}, {5, -1, 5});
  auto j = Int64s({}, {5});
  REQUIRE(RunKernel("Equal", {}, {&i, &j}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 1});
}

TEST_CASE("And/Or/Xor and Equal on bool") {
  auto a = Bools({4}, {true, true, false, false});
  auto b = Bools({4}, {true, false, true, false});
  auto y = Output(DType::kBool, {4});
  REQUIRE(RunKernel("And", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 0});
  REQUIRE(RunKernel("Or", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 1, 1, 0});
  REQUIRE(RunKernel("Xor", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 0});
  REQUIRE(RunKernel("Equal", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 1});
}

TEST_CASE("Mod: Python sign rule by default, C rule with fmod=1") {
  auto a = Int64s({4}, {5, -5, 5, -5});
  auto b = Int64s({4}, {3, 3, -3, -3});
  auto y = Output(DType::kInt64, {4});
  REQUIRE(RunKernel("Mod", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{2, 1, -1, -2});
  AttrMap attrs;
  attrs.SetInt("fmod", 1);
  REQUIRE(RunKernel("Mod", attrs, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{2, -2, 2, -2});
  auto fa = Floats({2}, {5.5f, -5.5f});
  auto fb = Floats({1}, {2});
  auto fy = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("Mod", attrs, {&fa, &fb}, {&fy}).ok());
  CHECK(fy.values<float>() == std::vector<float>{1.5f, -1.5f});
}

TEST_CASE("Pow with float base and int64 exponent") {
  auto a = Floats({3}, {2, 3, 4});
  auto e = Int64s({}, {3});
  auto y = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("Pow", {}, {&a, &e}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{8, 27, 64});
  auto e2 = Floats({3}, {2, 0.5f, -1});
  REQUIRE(RunKernel("Pow", {}, {&a, &e2}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{4, 1.7320508f, 0.25f}));
  // Broadcast both ways with an exponent of another dtype: [2, 1] ^ int32 [3].
  auto col = Floats({2, 1}, {2, 3});
  auto row = Int32s({3}, {0, 1, 2});
  auto grid = Output(DType::kFloat32, {2, 3});
  REQUIRE(RunKernel("Pow", {}, {&col, &row}, {&grid}).ok());
  CHECK(grid.values<float>() == std::vector<float>{1, 2, 4, 1, 3, 9});
}

TEST_CASE("Pow on integers saturates where the power leaves the type (2^1000 is INT32_MAX, 2^-inf is 0)") {
  // The power is computed in double; an int32 cannot hold inf or 2^40, and converting them is
  // undefined behavior in C++ (UBSan found it), so the result saturates as Cast does.
  auto a = Int32s({4}, {2, -2, 2, 0});
  auto e = Floats({4}, {1000, 1001, 40, -1});
  auto y = Output(DType::kInt32, {4});
  REQUIRE(RunKernel("Pow", {}, {&a, &e}, {&y}).ok());
  // 0^-1 = inf saturates too.
  CHECK(y.values<int32_t>() == std::vector<int32_t>{INT32_MAX, INT32_MIN, INT32_MAX, INT32_MAX});
  auto nan = Floats({}, {NAN});
  auto y2 = Output(DType::kInt32, {4});
  REQUIRE(RunKernel("Pow", {}, {&a, &nan}, {&y2}).ok());
  CHECK(y2.values<int32_t>() == std::vector<int32_t>{0, 0, 0, 0});  // NaN gives 0
}

TEST_CASE("integer Add, Sub and Mul wrap modulo 2^bits, also for types narrower than int") {
  // uint16 * uint16 is computed in int after promotion; 65535 * 65535 overflows int, which is
  // undefined behavior (as is any signed overflow): the kernels compute in unsigned.
  TestTensor a(DType::kUInt16, {2}, 2), b(DType::kUInt16, {2}, 2);
  a.data<uint16_t>()[0] = 65535, a.data<uint16_t>()[1] = 300;
  b.data<uint16_t>()[0] = 65535, b.data<uint16_t>()[1] = 300;
  auto y = Output(DType::kUInt16, {2});
  REQUIRE(RunKernel("Mul", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<uint16_t>() == std::vector<uint16_t>{1, static_cast<uint16_t>(90000 % 65536)});
  auto i = Int32s({2}, {INT32_MAX, INT32_MIN});
  auto one = Int32s({}, {1});
  auto yi = Output(DType::kInt32, {2});
  REQUIRE(RunKernel("Add", {}, {&i, &one}, {&yi}).ok());
  CHECK(yi.values<int32_t>() == std::vector<int32_t>{INT32_MIN, INT32_MIN + 1});
  REQUIRE(RunKernel("Sub", {}, {&i, &one}, {&yi}).ok());
  CHECK(yi.values<int32_t>() == std::vector<int32_t>{INT32_MAX - 1, INT32_MAX});
}

TEST_CASE("Variadic Max, Min, Sum, Mean") {
  auto a = Floats({2}, {1, 5});
  auto b = Floats({2}, {3, 2});
  auto c = Floats({1}, {4});
  auto y = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("Max", {}, {&a, &b, &c}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{4, 5});
  REQUIRE(RunKernel("Min", {}, {&a, &b, &c}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 2});
  REQUIRE(RunKernel("Sum", {}, {&a, &b, &c}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{8, 11});
  REQUIRE(RunKernel("Mean", {}, {&a, &b, &c}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{8.0f / 3, 11.0f / 3}));
  REQUIRE(RunKernel("Max", {}, {&a}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 5});
}

TEST_CASE("PRelu broadcasts the slope per channel") {
  auto x = Floats({1, 2, 2}, {-1, 2, -3, 4});
  auto s = Floats({2, 1}, {0.1f, 0.5f});
  auto y = Output(DType::kFloat32, {1, 2, 2});
  REQUIRE(RunKernel("PRelu", {}, {&x, &s}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-0.1f, 2, -1.5f, 4}));
}

TEST_CASE("Where broadcasts condition, X and Y") {
  auto c = Bools({2, 1}, {true, false});
  auto x = Int64s({3}, {1, 2, 3});
  auto yv = Int64s({}, {-1});
  auto out = Output(DType::kInt64, {2, 3});
  REQUIRE(RunKernel("Where", {}, {&c, &x, &yv}, {&out}).ok());
  CHECK(out.values<int64_t>() == std::vector<int64_t>{1, 2, 3, -1, -1, -1});
}

TEST_CASE("Zero-size broadcast and shape mismatch") {
  auto a = Floats({0, 3}, {});
  auto b = Floats({3}, {1, 2, 3});
  auto y = Output(DType::kFloat32, {0, 3});
  CHECK(RunKernel("Add", {}, {&a, &b}, {&y}).ok());
  auto c = Floats({2}, {1, 2});
  auto y2 = Output(DType::kFloat32, {3});
  Status s = RunKernel("Add", {}, {&b, &c}, {&y2});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "Add: inputs [3] and [2] do not broadcast to output [3]");
}

TEST_CASE("Registry is sorted and finds every family's ops") {
  auto all = AllKernels();
  REQUIRE(all.size() > 0);
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].op < all[i].op);
  for (const KernelDef& k : all) CHECK(FindKernel(k.op) == &k);
  CHECK(FindKernel("NoSuchOp") == nullptr);
  CHECK(FindKernel("Add") != nullptr);
}

}  // namespace
}  // namespace kiln::cpu::testing
