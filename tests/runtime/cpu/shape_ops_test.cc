#include <doctest/doctest.h>

#include "tests/runtime/cpu/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("Shape, Size, ConstantOfShape, Range") {
  auto x = Floats({2, 3, 4}, {});
  auto s = Output(DType::kInt64, {3});
  REQUIRE(RunKernel("Shape", {}, {&x}, {&s}).ok());
  CHECK(s.values<int64_t>() == std::vector<int64_t>{2, 3, 4});
  AttrMap attrs;
  attrs.SetInt("start", -2);
  auto s2 = Output(DType::kInt64, {2});
  REQUIRE(RunKernel("Shape", attrs, {&x}, {&s2}).ok());
  CHECK(s2.values<int64_t>() == std::vector<int64_t>{3, 4});
  auto n = Output(DType::kInt64, {});
  REQUIRE(RunKernel("Size", {}, {&x}, {&n}).ok());
  CHECK(n.values<int64_t>() == std::vector<int64_t>{24});

  auto shape = Int64s({2}, {2, 2});
  auto c = Output(DType::kInt64, {2, 2});
  AttrMap cv;
  cv.SetInt("value_int", 7);
  REQUIRE(RunKernel("ConstantOfShape", cv, {&shape}, {&c}).ok());
  CHECK(c.values<int64_t>() == std::vector<int64_t>{7, 7, 7, 7});
  auto cf = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("ConstantOfShape", {}, {&shape}, {&cf}).ok());
  CHECK(cf.values<float>() == std::vector<float>{0, 0, 0, 0});

  auto r0 = Int64s({}, {10});
  auto r1 = Int64s({}, {1});
  auto rd = Int64s({}, {-3});
  auto r = Output(DType::kInt64, {3});
  REQUIRE(RunKernel("Range", {}, {&r0, &r1, &rd}, {&r}).ok());
  CHECK(r.values<int64_t>() == std::vector<int64_t>{10, 7, 4});
  auto f0 = Floats({}, {0});
  auto f1 = Floats({}, {1});
  auto fd = Floats({}, {0.25f});
  auto rf = Output(DType::kFloat32, {4});
  REQUIRE(RunKernel("Range", {}, {&f0, &f1, &fd}, {&rf}).ok());
  CHECK(rf.values<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  auto rbad = Output(DType::kInt64, {4});
  CHECK(RunKernel("Range", {}, {&r0, &r1, &rd}, {&rbad}).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu::testing
