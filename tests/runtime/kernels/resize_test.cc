#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// All expected values were produced by onnxruntime (Resize-19, CPU provider) on the same
// inputs; 4-D linear results must match it exactly.
std::vector<float> Grid3x3() { return {1, 5, 2, 8, 3, 0, 4, 7, 6}; }

AttrMap LinearAttrs(const char* coord = "half_pixel") {
  AttrMap a;
  a.SetString("mode", "linear");
  a.SetString("coordinate_transformation_mode", coord);
  return a;
}

TEST_CASE("Resize linear half_pixel 2x2 -> 4x4 from scales matches onnxruntime exactly") {
  auto x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto roi = Floats({0}, {});
  auto scales = Floats({4}, {1, 1, 2, 2});
  auto y = Output(DType::kFloat32, {1, 1, 4, 4});
  REQUIRE(RunKernel("Resize", LinearAttrs(), {&x, &roi, &scales}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f,
                                                2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4});
}

TEST_CASE("Resize linear half_pixel 3x3 -> 5x7 from sizes") {
  auto x = Floats({1, 1, 3, 3}, Grid3x3());
  auto roi = Absent();
  auto scales = Absent();
  auto sizes = Int64s({4}, {1, 1, 5, 7});
  auto y = Output(DType::kFloat32, {1, 1, 5, 7});
  REQUIRE(RunKernel("Resize", LinearAttrs(), {&x, &roi, &scales, &sizes}, {&y}).ok());
  const std::vector<float> ort{1, 1.571429f, 3.285715f, 5, 3.714286f, 2.428571f, 2,
                               3.8f, 3.857143f, 4.028571f, 4.2f, 2.914285f, 1.628571f, 1.2f,
                               8, 7.285714f, 5.142857f, 3, 1.714286f, 0.4285712f, 0,
                               5.599999f, 5.571428f, 5.485714f, 5.400001f, 4.628572f, 3.857144f, 3.600001f,
                               4, 4.428572f, 5.714286f, 7, 6.571428f, 6.142857f, 6};
  auto got = y.values<float>();
  REQUIRE(got.size() == ort.size());
  // ORT values were printed with 7 significant digits; compare to that precision.
  for (size_t i = 0; i < ort.size(); ++i) CHECK(got[i] == doctest::Approx(ort[i]).epsilon(1e-6));
}

TEST_CASE("Resize align_corners with scales divides by the resized length, in * scale (ONNX Resize-19)") {
  // ONNX's test_resize_downsample_scales_linear_align_corners: [2, 4] by 0.6 is [1, 2], and output
  // column 1 reads input column 1 * (4 - 1) / (4 * 0.6 - 1) = 2.142857, between 3 and 4 (not column 3,
  // which the output's floor(2.4) = 2 would give).
  auto x = Floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto roi = Floats({0}, {});
  auto scales = Floats({4}, {1, 1, 0.6f, 0.6f});
  auto y = Output(DType::kFloat32, {1, 1, 1, 2});
  REQUIRE(RunKernel("Resize", LinearAttrs("align_corners"), {&x, &roi, &scales}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 3.142857f}));
}

TEST_CASE("Resize linear align_corners, asymmetric downsample, pytorch_half_pixel") {
  auto x = Floats({1, 1, 3, 3}, Grid3x3());
  auto roi = Floats({0}, {});
  auto none = Absent();
  auto sizes = Int64s({4}, {1, 1, 5, 4});
  auto y = Output(DType::kFloat32, {1, 1, 5, 4});
  REQUIRE(RunKernel("Resize", LinearAttrs("align_corners"), {&x, &roi, &none, &sizes}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{1, 3.666667f, 4, 2, 4.5f, 4.166667f, 3, 1, 8, 4.666667f,
                                        2, 0, 6, 5.333333f, 4.333333f, 3, 4, 6, 6.666667f, 6}));
  auto scales = Floats({4}, {1, 1, 0.6f, 0.8f});
  auto yd = Output(DType::kFloat32, {1, 1, 1, 2});
  REQUIRE(RunKernel("Resize", LinearAttrs("asymmetric"), {&x, &roi, &scales}, {&yd}).ok());
  KILN_CHECK_FLOATS(yd.values<float>(), (std::vector<float>{1, 4.25f}));
  auto sizes2 = Int64s({4}, {1, 1, 2, 1});
  auto yp = Output(DType::kFloat32, {1, 1, 2, 1});
  REQUIRE(RunKernel("Resize", LinearAttrs("pytorch_half_pixel"), {&x, &roi, &none, &sizes2}, {&yp}).ok());
  KILN_CHECK_FLOATS(yp.values<float>(), (std::vector<float>{2.75f, 5}));
}

TEST_CASE("Resize nearest modes with asymmetric coordinates") {
  auto x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto roi = Floats({0}, {});
  auto scales = Floats({4}, {1, 1, 1.5f, 2.5f});
  auto run = [&](const char* mode) {
    AttrMap a;
    a.SetString("coordinate_transformation_mode", "asymmetric");
    a.SetString("nearest_mode", mode);
    auto y = Output(DType::kFloat32, {1, 1, 3, 5});
    Status s = RunKernel("Resize", a, {&x, &roi, &scales}, {&y});
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    return y.values<float>();
  };
  CHECK(run("round_prefer_floor") == std::vector<float>{1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 3, 3, 4, 4, 4});
  CHECK(run("round_prefer_ceil") == std::vector<float>{1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 3, 3, 4, 4, 4});
  CHECK(run("floor") == std::vector<float>{1, 1, 1, 2, 2, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4});
  CHECK(run("ceil") == std::vector<float>{1, 2, 2, 2, 2, 3, 4, 4, 4, 4, 3, 4, 4, 4, 4});
}

TEST_CASE("Resize nearest half_pixel round_prefer_ceil on 2-D, and on int64 data") {
  auto x = Floats({1, 4}, {0, 1, 2, 3});
  auto roi = Absent();
  auto none = Absent();
  auto sizes = Int64s({2}, {1, 7});
  auto y = Output(DType::kFloat32, {1, 7});
  AttrMap a;
  a.SetString("nearest_mode", "round_prefer_ceil");
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &none, &sizes}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{0, 0, 1, 2, 2, 3, 3});
  auto xi = Int64s({2, 2}, {1, 2, 3, 4});
  auto scales = Floats({2}, {2, 2});
  auto yi = Output(DType::kInt64, {4, 4});
  REQUIRE(RunKernel("Resize", {}, {&xi, &roi, &scales}, {&yi}).ok());
  CHECK(yi.values<int64_t>() == std::vector<int64_t>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST_CASE("Resize cubic, with and without exclude_outside") {
  auto x = Floats({1, 1, 3, 3}, Grid3x3());
  auto roi = Absent();
  auto none = Absent();
  auto sizes = Int64s({4}, {1, 1, 4, 5});
  auto y = Output(DType::kFloat32, {1, 1, 4, 5});
  AttrMap a;
  a.SetString("mode", "cubic");
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &none, &sizes}, {&y}).ok());
  auto check = [](const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  };
  check(y.values<float>(), {0.05154335f, 2.516205f, 5.143555f, 3.642066f, 1.855556f, 6.170025f, 5.126143f,
                            3.28125f, 1.121006f, -0.2475701f, 7.625811f, 6.286633f, 4.22168f, 2.603124f,
                            1.723571f, 3.369767f, 5.161351f, 7.287109f, 7.020309f, 6.348447f});
  a.SetInt("exclude_outside", 1);
  a.SetFloat("cubic_coeff_a", -0.5f);
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &none, &sizes}, {&y}).ok());
  check(y.values<float>(), {0.2969579f, 2.336545f, 5.104478f, 3.356872f, 1.878062f, 5.834107f, 5.03616f,
                            3.465856f, 1.328392f, 0.08853221f, 7.197787f, 6.171145f, 4.352666f, 2.771113f,
                            1.929082f, 3.533089f, 5.029963f, 7.208955f, 6.780575f, 6.245846f});
}

TEST_CASE("Resize tf_crop_and_resize with extrapolation") {
  auto x = Floats({1, 1, 3, 3}, Grid3x3());
  auto roi = Floats({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1});
  auto none = Absent();
  auto sizes = Int64s({4}, {1, 1, 2, 4});
  auto y = Output(DType::kFloat32, {1, 1, 2, 4});
  AttrMap a = LinearAttrs("tf_crop_and_resize");
  a.SetFloat("extrapolation_value", -1.0f);
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &none, &sizes}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{2.8f, 2, 1.2f, 0.4f, -1, -1, -1, -1}));
}

TEST_CASE("Resize with the axes attribute, and 1-D linear") {
  auto x = Floats({1, 1, 3, 3}, Grid3x3());
  auto roi = Absent();
  auto scales = Floats({1}, {2});
  auto y = Output(DType::kFloat32, {1, 1, 3, 6});
  AttrMap a = LinearAttrs();
  a.SetInts("axes", {3});
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &scales}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 2, 4, 4.25f, 2.75f, 2, 8, 6.75f, 4.25f,
                                                           2.25f, 0.75f, 0, 4, 4.75f, 6.25f, 6.75f, 6.25f, 6}));
  // Hand-computed: x_orig = (o + 0.5) * 0.6 - 0.5 -> 0 (clamped), 0.4, 1.0, 1.6, 2 (clamped).
  auto v = Floats({3}, {0, 10, 20});
  auto none = Absent();
  auto sizes = Int64s({1}, {5});
  auto yv = Output(DType::kFloat32, {5});
  REQUIRE(RunKernel("Resize", LinearAttrs(), {&v, &roi, &none, &sizes}, {&yv}).ok());
  KILN_CHECK_FLOATS(yv.values<float>(), (std::vector<float>{0, 4, 10, 16, 20}));
}

TEST_CASE("Resize: antialias leaves upsampling as plain linear, a bad mode is rejected") {
  auto x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto roi = Absent();
  auto scales = Floats({4}, {1, 1, 2, 2});
  auto y = Output(DType::kFloat32, {1, 1, 4, 4});
  auto plain = Output(DType::kFloat32, {1, 1, 4, 4});
  AttrMap a = LinearAttrs();
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &scales}, {&plain}).ok());
  a.SetInt("antialias", 1);
  REQUIRE(RunKernel("Resize", a, {&x, &roi, &scales}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), plain.values<float>());
  AttrMap b;
  b.SetString("mode", "bicubic");
  CHECK(RunKernel("Resize", b, {&x, &roi, &scales}, {&y}).message() == "Resize: unknown mode 'bicubic'");
}

}  // namespace
}  // namespace kiln::cpu::testing
