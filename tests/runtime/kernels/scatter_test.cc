#include <doctest/doctest.h>

#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("ScatterElements along axis 1, negative indices, reductions") {
  auto data = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto idx = Int64s({2, 2}, {2, -3, 1, 1});
  auto upd = Floats({2, 2}, {10, 20, 30, 40});
  auto y = Output(DType::kFloat32, {2, 3});
  AttrMap a;
  a.SetInt("axis", 1);
  REQUIRE(RunKernel("ScatterElements", a, {&data, &idx, &upd}, {&y}).ok());
  // Row 1 writes index 1 twice; without a reduction the later update wins.
  CHECK(y.values<float>() == std::vector<float>{20, 2, 10, 4, 40, 6});
  a.SetString("reduction", "add");
  REQUIRE(RunKernel("ScatterElements", a, {&data, &idx, &upd}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{21, 2, 13, 4, 75, 6});
  a.SetString("reduction", "max");
  REQUIRE(RunKernel("Scatter", a, {&data, &idx, &upd}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{20, 2, 10, 4, 40, 6});
  a.SetString("reduction", "mul");
  REQUIRE(RunKernel("ScatterElements", a, {&data, &idx, &upd}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{20, 2, 30, 4, 6000, 6});
  a.SetString("reduction", "avg");
  CHECK(RunKernel("ScatterElements", a, {&data, &idx, &upd}, {&y}).message().find("reduction") != std::string_view::npos);
  a.SetString("reduction", "none");
  auto bad = Int64s({2, 2}, {3, 0, 0, 0});
  CHECK(RunKernel("ScatterElements", a, {&data, &bad, &upd}, {&y}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("ScatterND writes slices, min reduction") {
  auto data = Floats({3, 2}, {1, 2, 3, 4, 5, 6});
  auto idx = Int64s({2, 1}, {2, 0});
  auto upd = Floats({2, 2}, {9, 0, 7, 8});
  auto y = Output(DType::kFloat32, {3, 2});
  REQUIRE(RunKernel("ScatterND", {}, {&data, &idx, &upd}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{7, 8, 3, 4, 9, 0});
  AttrMap mn;
  mn.SetString("reduction", "min");
  REQUIRE(RunKernel("ScatterND", mn, {&data, &idx, &upd}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 2, 3, 4, 5, 0});
}

TEST_CASE("GatherND with and without batch_dims") {
  auto data = Int32s({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto idx = Int64s({2, 2}, {0, 1, 1, 0});
  auto y = Output(DType::kInt32, {2, 2});  // data[0,1,:], data[1,0,:]
  REQUIRE(RunKernel("GatherND", {}, {&data, &idx}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{2, 3, 4, 5});
  AttrMap b;
  b.SetInt("batch_dims", 1);
  auto idx1 = Int64s({2, 1}, {1, 0});
  auto y1 = Output(DType::kInt32, {2, 2});  // data[0][1,:], data[1][0,:]
  REQUIRE(RunKernel("GatherND", b, {&data, &idx1}, {&y1}).ok());
  CHECK(y1.values<int32_t>() == std::vector<int32_t>{2, 3, 4, 5});
}

TEST_CASE("OneHot with an axis and negative indices") {
  auto idx = Int64s({3}, {0, -1, 5});
  auto depth = Floats({}, {3});
  auto values = Floats({2}, {-1, 1});
  auto y = Output(DType::kFloat32, {3, 3});
  AttrMap a;
  a.SetInt("axis", 0);
  REQUIRE(RunKernel("OneHot", a, {&idx, &depth, &values}, {&y}).ok());
  // Column j is index j: 0 -> row 0, -1 -> row 2, 5 (out of range) -> nothing.
  CHECK(y.values<float>() == std::vector<float>{1, -1, -1, -1, -1, -1, -1, 1, -1});
}

TEST_CASE("TopK: largest and smallest, ties to the lower index") {
  auto x = Floats({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0});
  auto k = Int64s({1}, {2});
  auto v = Output(DType::kFloat32, {2, 2});
  auto i = Output(DType::kInt64, {2, 2});
  REQUIRE(RunKernel("TopK", {}, {&x, &k}, {&v, &i}).ok());
  CHECK(v.values<float>() == std::vector<float>{3, 3, 5, 5});
  CHECK(i.values<int64_t>() == std::vector<int64_t>{1, 2, 0, 1});
  AttrMap s;
  s.SetInt("largest", 0);
  s.SetInt("axis", 0);
  auto k1 = Int64s({1}, {1});
  auto v1 = Output(DType::kFloat32, {1, 4});
  auto i1 = Output(DType::kInt64, {1, 4});
  REQUIRE(RunKernel("TopK", s, {&x, &k1}, {&v1, &i1}).ok());
  CHECK(v1.values<float>() == std::vector<float>{1, 3, 3, 0});
  CHECK(i1.values<int64_t>() == std::vector<int64_t>{0, 0, 0, 1});
  auto k9 = Int64s({1}, {9});
  CHECK(RunKernel("TopK", {}, {&x, &k9}, {&v, &i}).code() == StatusCode::kInvalidArgument);
}


// An int64 index of INT64_MAX went through double (2^63) back to int64: UB (h8 tester).
TEST_CASE("OneHot: an index of INT64_MAX is out of range, not undefined") {
  auto idx = Int64s({2}, {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  auto depth = Floats({}, {2});
  auto values = Floats({2}, {0, 1});
  auto y = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("OneHot", {}, {&idx, &depth, &values}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 0, 0, 0});
}

}  // namespace
}  // namespace kiln::cpu::testing
