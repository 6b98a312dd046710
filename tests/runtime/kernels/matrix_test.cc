#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Trilu: upper and lower with k, batched") {
  // Two 3x3 matrices 1..9 and 10..18.
  std::vector<int64_t> v(18);
  for (int i = 0; i < 18; ++i) v[i] = i + 1;
  auto x = Int64s({2, 3, 3}, v);
  auto k = Int64s({}, {1});
  auto y = Output(DType::kInt64, {2, 3, 3});
  REQUIRE(RunKernel("Trilu", {}, {&x, &k}, {&y}).ok());  // upper, k = 1: j - i >= 1
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 2, 3, 0, 0, 6, 0, 0, 0, 0, 11, 12, 0, 0, 15, 0, 0, 0});
  AttrMap lower;
  lower.SetInt("upper", 0);
  auto km = Int64s({}, {-1});
  REQUIRE(RunKernel("Trilu", lower, {&x, &km}, {&y}).ok());  // lower, k = -1: j - i <= -1
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 0, 0, 4, 0, 0, 7, 8, 0, 0, 0, 0, 13, 0, 0, 16, 17, 0});
  auto f = Floats({2, 2}, {1, 2, 3, 4});
  auto fy = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("Trilu", {}, {&f}, {&fy}).ok());  // no k: main diagonal and above
  CHECK(fy.values<float>() == std::vector<float>{1, 2, 0, 4});
}

TEST_CASE("EyeLike: dtype from the output, diagonal shifted by k") {
  auto x = Int32s({3, 4}, std::vector<int32_t>(12, 7));
  auto y = Output(DType::kFloat32, {3, 4});
  AttrMap a;
  a.SetInt("k", 1);
  REQUIRE(RunKernel("EyeLike", a, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  auto yi = Output(DType::kInt32, {3, 4});
  a.SetInt("k", -2);
  REQUIRE(RunKernel("EyeLike", a, {&x}, {&yi}).ok());
  CHECK(yi.values<int32_t>() == std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
}

TEST_CASE("Det of a batch, with a row swap and a singular matrix") {
  // det [[1,2],[3,4]] = -2; [[0,1],[1,0]] = -1 (needs pivoting); [[1,2],[2,4]] = 0.
  auto x = Floats({3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, 1, 2, 2, 4});
  auto y = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("Det", {}, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-2, -1, 0}));
  // det [[2,0,1],[1,3,2],[1,1,1]] = 2(3-2) - 0 + 1(1-3) = 0; [[2,0,1],[1,3,2],[1,1,2]] = 2*4 + 1*(1-3) = 6.
  auto x3 = Floats({2, 3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 1, 2, 0, 1, 1, 3, 2, 1, 1, 2});
  auto y3 = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("Det", {}, {&x3}, {&y3}).ok());
  CHECK(y3.values<float>()[0] == doctest::Approx(0.0f));
  CHECK(y3.values<float>()[1] == doctest::Approx(6.0f));
  auto bad = Floats({2, 3}, std::vector<float>(6, 1));
  auto by = Output(DType::kFloat32, {});
  CHECK(RunKernel("Det", {}, {&bad}, {&by}).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu::testing
