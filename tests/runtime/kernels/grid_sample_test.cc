// GridSample and AffineGrid against hand-computed values.
#include <doctest/doctest.h>

#include <limits>

#include <string>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

AttrMap GridAttrs(const char* mode, const char* pad, int64_t align) {
  AttrMap a;
  a.SetString("mode", mode);
  a.SetString("padding_mode", pad);
  a.SetInt("align_corners", align);
  return a;
}

TEST_CASE("GridSample linear with align_corners: corners and the centre") {
  TestTensor x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  // Grid points as (x, y): (-1, -1) -> X[0][0]; (1, -1) -> X[0][1]; (0, 0) -> the mean.
  TestTensor g = Floats({1, 1, 3, 2}, {-1, -1, 1, -1, 0, 0});
  TestTensor y = Output(DType::kFloat32, {1, 1, 1, 3});
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "zeros", 1), {&x, &g}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 2, 2.5f}));
}

TEST_CASE("GridSample padding modes at the corner (-1, -1) without align_corners") {
  // Denormalized to (-0.5, -0.5): half of each weight falls outside the image.
  TestTensor x = Floats({1, 1, 2, 2}, {1, 2, 3, 4}), g = Floats({1, 1, 1, 2}, {-1, -1});
  TestTensor y = Output(DType::kFloat32, {1, 1, 1, 1});
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "zeros", 0), {&x, &g}, {&y}).ok());
  CHECK(y.values<float>()[0] == doctest::Approx(0.25));  // 0.5 * 0.5 * X[0][0]
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "border", 0), {&x, &g}, {&y}).ok());
  CHECK(y.values<float>()[0] == doctest::Approx(1));
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "reflection", 0), {&x, &g}, {&y}).ok());
  CHECK(y.values<float>()[0] == doctest::Approx(1));  // the outside taps reflect onto X[0][0]
  // Nearest: the centre (0.5, 0.5) rounds half to even, to (0, 0).
  TestTensor c = Floats({1, 1, 1, 2}, {0, 0});
  REQUIRE(RunKernel("GridSample", GridAttrs("nearest", "zeros", 0), {&x, &c}, {&y}).ok());
  CHECK(y.values<float>()[0] == 1);
  // Cubic weights sum to 1, so a constant image stays constant.
  TestTensor k = Floats({1, 1, 2, 2}, {5, 5, 5, 5}), h = Floats({1, 1, 1, 2}, {0.3f, -0.2f});
  REQUIRE(RunKernel("GridSample", GridAttrs("cubic", "border", 0), {&k, &h}, {&y}).ok());
  CHECK(y.values<float>()[0] == doctest::Approx(5));
  Status st = RunKernel("GridSample", GridAttrs("area", "zeros", 0), {&x, &g}, {&y});
  CHECK(st.message() == "GridSample: mode \"area\"");
}

TEST_CASE("AffineGrid identity: pixel centres without align_corners") {
  TestTensor theta = Floats({1, 2, 3}, {1, 0, 0, 0, 1, 0}), size = Int64s({4}, {1, 1, 2, 2});
  TestTensor y = Output(DType::kFloat32, {1, 2, 2, 2});
  REQUIRE(RunKernel("AffineGrid", {}, {&theta, &size}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-0.5f, -0.5f, 0.5f, -0.5f, -0.5f, 0.5f, 0.5f, 0.5f}));
  // A translation by (0.25, 0) with align_corners: x in {-1, 1} moves to {-0.75, 1.25}.
  AttrMap a;
  a.SetInt("align_corners", 1);
  TestTensor t2 = Floats({1, 2, 3}, {1, 0, 0.25f, 0, 1, 0});
  REQUIRE(RunKernel("AffineGrid", a, {&t2, &size}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-0.75f, -1, 1.25f, -1, -0.75f, 1, 1.25f, 1}));
}


// NaN, infinite and 1e30 grid values were converted to int64 (UB; found by the h8 tester):
// now a point that far outside reads zeros, and reflection of a huge value stays in range.
TEST_CASE("GridSample: NaN, infinite and huge grid values") {
  TestTensor x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  TestTensor g = Floats({1, 1, 4, 2}, {nan, 0, inf, 0, 1e30f, 0, -1e30f, -inf});
  TestTensor y = Output(DType::kFloat32, {1, 1, 1, 4});
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    REQUIRE(RunKernel("GridSample", GridAttrs(mode, "zeros", 0), {&x, &g}, {&y}).ok());
    CHECK(y.values<float>() == std::vector<float>{0, 0, 0, 0});
  }
  // Border: infinities clamp to the edge; NaN still reads zeros.
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "border", 1), {&x, &g}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 3, 3, 1});  // x clamps to column 1; y = 0.5 halves rows 0 and 1
  // Reflection of 1e30 lands somewhere inside: a finite value between the pixels' extremes.
  TestTensor h = Floats({1, 1, 1, 2}, {1e30f, 0.25f});
  TestTensor z = Output(DType::kFloat32, {1, 1, 1, 1});
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "reflection", 1), {&x, &h}, {&z}).ok());
  CHECK((z.values<float>()[0] >= 1 && z.values<float>()[0] <= 4));
  // Reflection on a 1-pixel axis with align_corners (an empty range; divided by 0 before).
  TestTensor one = Floats({1, 1, 1, 1}, {9}), far = Floats({1, 1, 1, 2}, {3, 3});
  REQUIRE(RunKernel("GridSample", GridAttrs("linear", "reflection", 1), {&one, &far}, {&z}).ok());
  CHECK(z.values<float>()[0] == 9);
  // A grid of another dtype was read as X's before its dtype was checked.
  TestTensor g64 = Int64s({1, 1, 1, 2}, {0, 0});
  CHECK(RunKernel("GridSample", GridAttrs("linear", "zeros", 0), {&x, &g64}, {&z}).message() ==
        "GridSample: dtype float32 with grid int64 and Y float32");
}

}  // namespace
}  // namespace kiln::cpu::testing
