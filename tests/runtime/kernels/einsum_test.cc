// Einsum CPU kernel against hand-computed contractions.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

AttrMap Eq(const char* equation) {
  AttrMap a;
  a.SetString("equation", equation);
  return a;
}

TEST_CASE("Einsum: matmul, explicit and implicit output, transpose") {
  auto a = Floats({2, 2}, {1, 2, 3, 4});
  auto b = Floats({2, 2}, {5, 6, 7, 8});
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("Einsum", Eq("ij, jk -> ik"), {&a, &b}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{19, 22, 43, 50});
  REQUIRE(RunKernel("Einsum", Eq("ij,jk"), {&a, &b}, {&y}).ok());  // implicit: "ik"
  CHECK(y.values<float>() == std::vector<float>{19, 22, 43, 50});
  REQUIRE(RunKernel("Einsum", Eq("kj,ji"), {&a, &b}, {&y}).ok());  // implicit "ik": sorted, so b^T a^T
  CHECK(y.values<float>() == std::vector<float>{19, 43, 22, 50});
  REQUIRE(RunKernel("Einsum", Eq("ij->ji"), {&a}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 3, 2, 4});
}

TEST_CASE("Einsum: a repeated label is a diagonal, a label left out is summed") {
  auto a = Floats({2, 2}, {1, 2, 3, 4});
  auto d = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("Einsum", Eq("ii->i"), {&a}, {&d}).ok());
  CHECK(d.values<float>() == std::vector<float>{1, 4});
  auto trace = Output(DType::kFloat32, {});
  REQUIRE(RunKernel("Einsum", Eq("ii"), {&a}, {&trace}).ok());
  CHECK(trace.values<float>() == std::vector<float>{5});
  REQUIRE(RunKernel("Einsum", Eq("ij->j"), {&a}, {&d}).ok());
  CHECK(d.values<float>() == std::vector<float>{4, 6});
}

TEST_CASE("Einsum: ellipsis dims broadcast, integers") {
  // "...i,...i->..." with [2, 3] and [3]: the second operand has no ellipsis dims.
  auto a = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = Int64s({3}, {1, 0, -1});
  auto y = Output(DType::kInt64, {2});
  REQUIRE(RunKernel("Einsum", Eq("...i,...i->..."), {&a, &b}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{-2, -2});
  // A size-1 ellipsis dim broadcasts: [2, 1] and [1, 2] give an outer product.
  auto c = Int64s({2, 1}, {1, 2});
  auto e = Int64s({1, 2}, {3, 4});
  auto o = Output(DType::kInt64, {2, 2});
  REQUIRE(RunKernel("Einsum", Eq("...,...->..."), {&c, &e}, {&o}).ok());
  CHECK(o.values<int64_t>() == std::vector<int64_t>{3, 4, 6, 8});
}

TEST_CASE("Einsum: a bad equation is an error naming it") {
  auto a = Floats({2, 2}, {1, 2, 3, 4});
  auto y = Output(DType::kFloat32, {2, 2});
  CHECK(RunKernel("Einsum", Eq("i1->i"), {&a}, {&y}).message() ==
        "Einsum: equation 'i1->i': term 1: unexpected character '1' (labels are letters)");
  CHECK(RunKernel("Einsum", Eq("ij->ii"), {&a}, {&y}).message() ==
        "Einsum: equation 'ij->ii': the output repeats label 'i'");
}

}  // namespace
}  // namespace kiln::cpu::testing
