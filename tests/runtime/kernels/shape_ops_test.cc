#include <doctest/doctest.h>

#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

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

TestTensor Half(DType dt, float v) {
  TestTensor t(dt, {}, 2);
  t.data<uint16_t>()[0] = dt == DType::kFloat16 ? FloatToHalf(v) : FloatToBF16(v);
  return t;
}

// Where float16 (bfloat16) spacing is 2, start + i in float32 rounds to even each time, while
// accumulating in the storage type would stick at start.
TEST_CASE("Range: float16 and bfloat16 in stash_type") {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    INFO(DTypeName(dt));
    const float s = dt == DType::kFloat16 ? 2048 : 256;
    auto start = Half(dt, s), limit = Half(dt, s + 4), delta = Half(dt, 1);
    for (int64_t stash : {1, 11}) {
      AttrMap attrs;
      attrs.SetInt("stash_type", stash);
      auto y = Output(dt, {4});
      REQUIRE(RunKernel("Range", attrs, {&start, &limit, &delta}, {&y}).ok());
      std::vector<float> got;
      for (uint16_t h : y.values<uint16_t>()) got.push_back(dt == DType::kFloat16 ? HalfToFloat(h) : BF16ToFloat(h));
      CHECK(got == std::vector<float>{s, s, s + 2, s + 4});
    }
    AttrMap bad;
    bad.SetInt("stash_type", 10);
    auto y = Output(dt, {4});
    Status st = RunKernel("Range", bad, {&start, &limit, &delta}, {&y});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find("stash_type") != std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
