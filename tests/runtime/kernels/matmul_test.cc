#include <doctest/doctest.h>

#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("MatMul broadcasts batch dims [2,1,3,4] x [3,4,2]") {
  auto a = Floats({2, 1, 3, 4}, Iota(24));
  auto b = Floats({3, 4, 2}, Iota(24, -10));
  auto y = Output(DType::kFloat32, {2, 3, 3, 2});
  REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-32, -26, -144, -122, -256, -218, 16, 22, 32, 54, 48, 86,
                                        64, 70, 208, 230, 352, 390, -368, -314, -480, -410, -592, -506,
                                        64, 118, 80, 150, 96, 182, 496, 550, 640, 710, 784, 870}));
}

TEST_CASE("MatMul with a 1-D left operand drops M") {
  auto a = Floats({3}, {1, 2, 3});
  auto b = Floats({2, 3, 2}, Iota(12));
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{16, 22, 52, 58});
}

TEST_CASE("MatMul with a 1-D right operand and a shared 2-D weight") {
  auto a = Floats({2, 3}, Iota(6));
  auto v = Floats({3}, {1, 0, -1});
  auto y = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("MatMul", {}, {&a, &v}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{-2, -2});
  auto a3 = Floats({2, 2, 2}, Iota(8));
  auto w = Floats({2, 1}, {1, 10});
  auto y3 = Output(DType::kFloat32, {2, 2, 1});
  REQUIRE(RunKernel("MatMul", {}, {&a3, &w}, {&y3}).ok());
  CHECK(y3.values<float>() == std::vector<float>{10, 32, 54, 76});
}

TEST_CASE("MatMul on int64 and with K = 0") {
  auto a = Int64s({1, 2}, {2, 3});
  auto b = Int64s({2, 2}, {1, 2, 3, 4});
  auto y = Output(DType::kInt64, {1, 2});
  REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{11, 16});
  auto e1 = Floats({2, 0}, {});
  auto e2 = Floats({0, 3}, {});
  auto ye = Output(DType::kFloat32, {2, 3});
  REQUIRE(RunKernel("MatMul", {}, {&e1, &e2}, {&ye}).ok());
  CHECK(ye.values<float>() == std::vector<float>(6, 0.0f));
}

// Half operands are multiplied in float32 and each output rounded once: 2048 + 3 is not a
// float16 (its spacing there is 2) and rounds to the even neighbour 2052.
TEST_CASE("MatMul on float16 and bfloat16 accumulates in float32 and rounds once") {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    auto to = [dt](float f) { return dt == DType::kFloat16 ? FloatToHalf(f) : FloatToBF16(f); };
    auto from = [dt](uint16_t h) { return dt == DType::kFloat16 ? HalfToFloat(h) : BF16ToFloat(h); };
    auto tensor = [&](std::vector<int64_t> dims, std::vector<float> v) {
      TestTensor t(dt, std::move(dims), 2);
      for (size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = to(v[i]);
      return t;
    };
    auto a = tensor({2, 2}, {1, 2, 3, 4});
    auto b = tensor({2, 2}, {0.5f, 1, -1, 2});
    auto y = Output(dt, {2, 2});
    REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
    std::vector<float> got;
    for (uint16_t h : y.values<uint16_t>()) got.push_back(from(h));
    CHECK(got == std::vector<float>{-1.5f, 5, -2.5f, 11});
  }
  TestTensor a(DType::kFloat16, {1, 2}, 2), b(DType::kFloat16, {2, 1}, 2);
  a.data<uint16_t>()[0] = FloatToHalf(2048), a.data<uint16_t>()[1] = FloatToHalf(3);
  b.data<uint16_t>()[0] = b.data<uint16_t>()[1] = FloatToHalf(1);
  auto y = Output(DType::kFloat16, {1, 1});
  REQUIRE(RunKernel("MatMul", {}, {&a, &b}, {&y}).ok());
  CHECK(HalfToFloat(y.values<uint16_t>()[0]) == 2052.0f);
}

TEST_CASE("MatMul rejects mismatched inner dims") {
  auto a = Floats({2, 3}, {});
  auto b = Floats({4, 2}, {});
  auto y = Output(DType::kFloat32, {2, 2});
  Status s = RunKernel("MatMul", {}, {&a, &b}, {&y});
  CHECK(s.message() == "MatMul: inner dimensions differ: [2, 3] x [4, 2]");
}

TEST_CASE("Gemm with transB, alpha, beta and a broadcast row C") {
  auto a = Floats({3, 2}, Iota(6));
  auto b = Floats({4, 2}, Iota(8, -3));
  auto c = Floats({4}, {1, 2, 3, 4});
  auto y = Output(DType::kFloat32, {3, 4});
  AttrMap attrs;
  attrs.SetInt("transB", 1);
  attrs.SetFloat("alpha", 0.5f);
  attrs.SetFloat("beta", 2.0f);
  REQUIRE(RunKernel("Gemm", attrs, {&a, &b, &c}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{1, 4, 7, 10, -4, 3, 10, 17, -9, 2, 13, 24}));
}

TEST_CASE("Gemm with transA, no C, and a column C") {
  auto a = Floats({2, 3}, Iota(6));  // A^T is [3,2]
  auto b = Floats({2, 1}, {1, 1});
  auto y = Output(DType::kFloat32, {3, 1});
  AttrMap attrs;
  attrs.SetInt("transA", 1);
  REQUIRE(RunKernel("Gemm", attrs, {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{3, 5, 7});
  auto c = Floats({3, 1}, {10, 20, 30});
  REQUIRE(RunKernel("Gemm", attrs, {&a, &b, &c}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{13, 25, 37});
}

}  // namespace
}  // namespace kiln::cpu::testing
