// Compress, NonZero and Unique CPU kernels against hand-computed selections.
#include <doctest/doctest.h>

#include "tests/runtime/cpu/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Compress: along an axis, flattened, and a short condition") {
  auto x = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto cond = Bools({3}, {false, true, true});
  auto y = Output(DType::kFloat32, {2, 2});
  AttrMap axis0;
  axis0.SetInt("axis", 0);
  REQUIRE(RunKernel("Compress", axis0, {&x, &cond}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{3, 4, 5, 6});
  // No axis: the flattened input; elements past the condition are dropped.
  auto flat = Output(DType::kFloat32, {2});
  REQUIRE(RunKernel("Compress", {}, {&x, &cond}, {&flat}).ok());
  CHECK(flat.values<float>() == std::vector<float>{2, 3});
  // An output sized for another condition is an error, not an overrun.
  auto wrong = Output(DType::kFloat32, {1, 2});
  CHECK(RunKernel("Compress", axis0, {&x, &cond}, {&wrong}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("NonZero: indices per dim, row-major order") {
  auto x = Floats({2, 2}, {1, 0, -0.0f, 2});
  auto y = Output(DType::kInt64, {2, 2});
  REQUIRE(RunKernel("NonZero", {}, {&x}, {&y}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 1, 0, 1});  // (0,0) and (1,1); -0 is zero
  auto bad = Output(DType::kInt64, {2, 3});
  CHECK(RunKernel("NonZero", {}, {&x}, {&bad}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Unique: sorted and in order of first occurrence, with all four outputs") {
  auto x = Floats({6}, {2, 1, 1, 3, 4, 3});
  auto y = Output(DType::kFloat32, {4});
  auto idx = Output(DType::kInt64, {4}), inv = Output(DType::kInt64, {6}), cnt = Output(DType::kInt64, {4});
  REQUIRE(RunKernel("Unique", {}, {&x}, {&y, &idx, &inv, &cnt}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 0, 3, 4});
  CHECK(inv.values<int64_t>() == std::vector<int64_t>{1, 0, 0, 2, 3, 2});
  CHECK(cnt.values<int64_t>() == std::vector<int64_t>{2, 1, 2, 1});
  AttrMap unsorted;
  unsorted.SetInt("sorted", 0);
  REQUIRE(RunKernel("Unique", unsorted, {&x}, {&y, &idx, &inv, &cnt}).ok());
  CHECK(y.values<float>() == std::vector<float>{2, 1, 3, 4});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{0, 1, 3, 4});
  CHECK(inv.values<int64_t>() == std::vector<int64_t>{0, 1, 1, 2, 3, 2});
  CHECK(cnt.values<int64_t>() == std::vector<int64_t>{1, 2, 2, 1});
}

TEST_CASE("Unique: rows along axis 0") {
  auto x = Int64s({3, 2}, {1, 0, 0, 1, 1, 0});
  auto y = Output(DType::kInt64, {2, 2});
  auto idx = Output(DType::kInt64, {2}), inv = Output(DType::kInt64, {3}), cnt = Output(DType::kInt64, {2});
  AttrMap a;
  a.SetInt("axis", 0);
  REQUIRE(RunKernel("Unique", a, {&x}, {&y, &idx, &inv, &cnt}).ok());
  CHECK(y.values<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(inv.values<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(cnt.values<int64_t>() == std::vector<int64_t>{1, 2});
}

}  // namespace
}  // namespace kiln::cpu::testing
