// RoiAlign, Col2Im, MaxUnpool, DeformConv and NonMaxSuppression against hand-computed values.
#include <doctest/doctest.h>

#include <limits>

#include <string>
#include <vector>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// X[y][x] = 4y + x: bilinear samples of a linear function are exact.
TestTensor Ramp4x4() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  return Floats({1, 1, 4, 4}, v);
}

AttrMap RoiAttrs(const char* ctm, const char* mode, int64_t ratio) {
  AttrMap a;
  a.SetString("coordinate_transformation_mode", ctm);
  a.SetString("mode", mode);
  a.SetInt("sampling_ratio", ratio);
  a.SetInt("output_height", 1);
  a.SetInt("output_width", 1);
  return a;
}

float RoiAlign1(const TestTensor& x, std::vector<float> roi, const AttrMap& a) {
  TestTensor rois = Floats({1, 4}, std::move(roi)), bi = Int64s({1}, {0}), y = Output(DType::kFloat32, {1, 1, 1, 1});
  REQUIRE(RunKernel("RoiAlign", a, {&x, &rois, &bi}, {&y}).ok());
  return y.values<float>()[0];
}

TEST_CASE("RoiAlign: coordinate modes, avg and max, adaptive sampling") {
  TestTensor x = Ramp4x4();
  // output_half_pixel, one sample at the centre (1, 1) of the region [0, 2]^2: 4 + 1.
  CHECK(RoiAlign1(x, {0, 0, 2, 2}, RoiAttrs("output_half_pixel", "avg", 1)) == doctest::Approx(5));
  // half_pixel shifts the region by -0.5: the centre is (0.5, 0.5), 2 + 0.5.
  CHECK(RoiAlign1(x, {0, 0, 2, 2}, RoiAttrs("half_pixel", "avg", 1)) == doctest::Approx(2.5));
  // Four samples at {0.5, 1.5}^2 average to the centre's value.
  CHECK(RoiAlign1(x, {0, 0, 2, 2}, RoiAttrs("output_half_pixel", "avg", 2)) == doctest::Approx(5));
  // Max takes the largest weighted tap of each sample (weights 0.25 at every sample here):
  // the sample (1.5, 1.5) has taps 5, 6, 9, 10, so 0.25 * 10.
  CHECK(RoiAlign1(x, {0, 0, 2, 2}, RoiAttrs("output_half_pixel", "max", 2)) == doctest::Approx(2.5));
  // Adaptive: ceil(4 / 1) = 4 samples per axis at 0.5, 1.5, 2.5, 3.5 (clamped to 3):
  // mean 1.875 per axis, 4 * 1.875 + 1.875. One sample (ratio 1) would read (2, 2) = 10.
  CHECK(RoiAlign1(x, {0, 0, 4, 4}, RoiAttrs("output_half_pixel", "avg", 0)) == doctest::Approx(9.375));
  CHECK(RoiAlign1(x, {0, 0, 4, 4}, RoiAttrs("output_half_pixel", "avg", 1)) == doctest::Approx(10));
  TestTensor rois = Floats({1, 4}, {0, 0, 2, 2}), bad = Int64s({1}, {1}), y = Output(DType::kFloat32, {1, 1, 1, 1});
  Status st = RunKernel("RoiAlign", RoiAttrs("half_pixel", "avg", 1), {&x, &rois, &bad}, {&y});
  CHECK(st.message() == "RoiAlign: batch_indices[0] = 1, expected in [0, 1)");
}

TEST_CASE("Col2Im: strided blocks and overlapping sums") {
  // 1-D image of 4 from blocks of 2 at stride 2: column (k, l) lands at 2l + k.
  TestTensor x = Floats({1, 2, 2}, {1, 2, 3, 4}), img = Int64s({1}, {4}), blk = Int64s({1}, {2});
  TestTensor y = Output(DType::kFloat32, {1, 1, 4});
  AttrMap a;
  a.SetInts("strides", {2});
  REQUIRE(RunKernel("Col2Im", a, {&x, &img, &blk}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{1, 3, 2, 4}));
  // 2x2 blocks of ones over a 3x3 image: each pixel counts the blocks covering it.
  TestTensor ones = Floats({1, 4, 4}, std::vector<float>(16, 1)), img2 = Int64s({2}, {3, 3}), blk2 = Int64s({2}, {2, 2});
  TestTensor y2 = Output(DType::kFloat32, {1, 1, 3, 3});
  REQUIRE(RunKernel("Col2Im", {}, {&ones, &img2, &blk2}, {&y2}).ok());
  KILN_CHECK_FLOATS(y2.values<float>(), (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
  // With pads 1 on both sides of the width, only the blocks' inner columns land.
  AttrMap p;
  p.SetInts("pads", {0, 1, 0, 1});
  TestTensor ones6 = Floats({1, 4, 8}, std::vector<float>(32, 1)), y3 = Output(DType::kFloat32, {1, 1, 3, 3});
  REQUIRE(RunKernel("Col2Im", p, {&ones6, &img2, &blk2}, {&y3}).ok());
  KILN_CHECK_FLOATS(y3.values<float>(), (std::vector<float>{2, 2, 2, 4, 4, 4, 2, 2, 2}));
}

TEST_CASE("MaxUnpool: to MaxPool's indices, inferred or larger output_shape") {
  TestTensor x = Floats({1, 1, 2, 2}, {5, 6, 7, 8}), i = Int64s({1, 1, 2, 2}, {5, 7, 13, 15});
  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  a.SetInts("strides", {2, 2});
  TestTensor y = Output(DType::kFloat32, {1, 1, 4, 4});
  REQUIRE(RunKernel("MaxUnpool", a, {&x, &i}, {&y}).ok());
  std::vector<float> e(16, 0);
  e[5] = 5, e[7] = 6, e[13] = 7, e[15] = 8;
  KILN_CHECK_FLOATS(y.values<float>(), e);
  // A 5x5 output_shape holds the 4x4 result at its origin: (1,1), (1,3), (3,1), (3,3).
  TestTensor shape = Int64s({4}, {1, 1, 5, 5}), y5 = Output(DType::kFloat32, {1, 1, 5, 5});
  REQUIRE(RunKernel("MaxUnpool", a, {&x, &i, &shape}, {&y5}).ok());
  std::vector<float> e5(25, 0);
  e5[6] = 5, e5[8] = 6, e5[16] = 7, e5[18] = 8;
  KILN_CHECK_FLOATS(y5.values<float>(), e5);
  TestTensor bad = Int64s({1, 1, 2, 2}, {5, 7, 13, 16});
  CHECK(RunKernel("MaxUnpool", a, {&x, &bad}, {&y}).message() == "MaxUnpool: I[3] = 16, expected in [0, 16)");
}

TEST_CASE("DeformConv: zero offsets are a convolution, offsets sample bilinearly with zeros outside") {
  TestTensor x = Floats({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}), w = Floats({1, 1, 2, 2}, {1, 1, 1, 1});
  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  TestTensor zero = Floats({1, 8, 2, 2}, std::vector<float>(32, 0)), y = Output(DType::kFloat32, {1, 1, 2, 2});
  REQUIRE(RunKernel("DeformConv", a, {&x, &w, &zero}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{8, 12, 20, 24}));
  // Every tap moved by (0.5, 0.5). Output (0, 0): taps 2, 3, 5, 6 (X = 3y + x). Output (1, 1):
  // (1.5, 1.5) = 6; (1.5, 2.5) keeps half of (1.5, 2) = 3.25; (2.5, 1.5) half of (2, 1.5) = 3.75;
  // (2.5, 2.5) a quarter of X[2][2] = 2: 15.
  TestTensor half = Floats({1, 8, 2, 2}, std::vector<float>(32, 0.5f));
  REQUIRE(RunKernel("DeformConv", a, {&x, &w, &half}, {&y}).ok());
  CHECK(y.values<float>()[0] == doctest::Approx(16));
  CHECK(y.values<float>()[3] == doctest::Approx(15));
  // Mask 0.5 on every tap and bias 1: 1 + 0.5 * the plain convolution.
  TestTensor b = Floats({1}, {1}), mask = Floats({1, 4, 2, 2}, std::vector<float>(16, 0.5f));
  REQUIRE(RunKernel("DeformConv", a, {&x, &w, &zero, &b, &mask}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{5, 7, 11, 13}));
}

AttrMap Center(int64_t c) {
  AttrMap a;
  a.SetInt("center_point_box", c);
  return a;
}

TEST_CASE("NonMaxSuppression: IOU, score threshold, max per class, box formats, order") {
  // Box 1 overlaps box 0 (IOU 0.9 / 1.1 = 0.82); box 2 is far away.
  TestTensor corners = Floats({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11});
  TestTensor centers = Floats({1, 3, 4}, {0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 10.5f, 0.5f, 1, 1});
  TestTensor scores = Floats({1, 1, 3}, {0.9f, 0.95f, 0.5f}), max3 = Int64s({1}, {3}), iou = Floats({1}, {0.5f});
  TestTensor y2 = Output(DType::kInt64, {2, 3});
  REQUIRE(RunKernel("NonMaxSuppression", Center(0), {&corners, &scores, &max3, &iou}, {&y2}).ok());
  CHECK(y2.values<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 0, 2});
  REQUIRE(RunKernel("NonMaxSuppression", Center(1), {&centers, &scores, &max3, &iou}, {&y2}).ok());
  CHECK(y2.values<int64_t>() == std::vector<int64_t>{0, 0, 1, 0, 0, 2});
  TestTensor y1 = Output(DType::kInt64, {1, 3}), thr = Floats({1}, {0.6f}), max1 = Int64s({1}, {1});
  REQUIRE(RunKernel("NonMaxSuppression", Center(0), {&corners, &scores, &max3, &iou, &thr}, {&y1}).ok());
  CHECK(y1.values<int64_t>() == std::vector<int64_t>{0, 0, 1});
  REQUIRE(RunKernel("NonMaxSuppression", Center(0), {&corners, &scores, &max1, &iou}, {&y1}).ok());
  CHECK(y1.values<int64_t>() == std::vector<int64_t>{0, 0, 1});
  // A threshold of 0.9 keeps both overlapping boxes; equal scores go by the lower index.
  TestTensor iou9 = Floats({1}, {0.9f}), tied = Floats({1, 1, 3}, {0.5f, 0.5f, 0.5f}), y3 = Output(DType::kInt64, {3, 3});
  REQUIRE(RunKernel("NonMaxSuppression", Center(0), {&corners, &tied, &max3, &iou9}, {&y3}).ok());
  CHECK(y3.values<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 0, 1, 0, 0, 2});
  // No max_output_boxes_per_class: nothing is selected.
  TestTensor y0 = Output(DType::kInt64, {0, 3});
  REQUIRE(RunKernel("NonMaxSuppression", Center(0), {&corners, &scores}, {&y0}).ok());
  CHECK(RunKernel("NonMaxSuppression", Center(0), {&corners, &scores, &max3, &iou}, {&y1}).message() ==
        "NonMaxSuppression: selected 2 boxes, output has 1 rows");
}


// Caller data (4 floats) used to hang RoiAlign: adaptive sampling took ceil(1e5 / 1) samples
// per axis, 10^10 per bin; sampling_ratio 2^40 overflowed gh * gw. NaN coordinates were
// converted to int64 (UB). Found by the h8 tester.
TEST_CASE("RoiAlign: samples per bin are bounded, NaN coordinates read zeros") {
  TestTensor x = Ramp4x4();
  TestTensor rois = Floats({1, 4}, {0, 0, 1e5f, 1e5f}), bi = Int64s({1}, {0}), y = Output(DType::kFloat32, {1, 1, 1, 1});
  Status st = RunKernel("RoiAlign", RoiAttrs("output_half_pixel", "avg", 0), {&x, &rois, &bi}, {&y});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(st.message().find("RoiAlign: roi 0 (height 100000.000000, width 100000.000000, sampling_ratio 0) "
                                  "needs 100000.000000 x 100000.000000 samples per bin, more than the limit of 65536") !=
                    std::string::npos,
                st.message());
  TestTensor small = Floats({1, 4}, {0, 0, 2, 2});
  st = RunKernel("RoiAlign", RoiAttrs("output_half_pixel", "avg", int64_t{1} << 40), {&x, &small, &bi}, {&y});
  CHECK_MESSAGE(st.message().find("sampling_ratio 1099511627776) needs") != std::string::npos, st.message());
  // 256 x 256 samples per bin is the limit and runs.
  CHECK(RoiAlign1(x, {0, 0, 2, 2}, RoiAttrs("output_half_pixel", "avg", 256)) == doctest::Approx(5));
  // A NaN region: every sample is outside, the bin averages zeros.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(RoiAlign1(x, {nan, 0, 2, 2}, RoiAttrs("output_half_pixel", "avg", 1)) == 0);
}

TEST_CASE("RoiAlign, MaxUnpool, DeformConv and NonMaxSuppression reject operands of the wrong dtype or shape") {
  TestTensor x = Ramp4x4(), bi = Int64s({1}, {0}), y = Output(DType::kFloat32, {1, 1, 1, 1});
  TestTensor rois64 = Int64s({1}, {0});  // the tester's int64 rois of 1 element
  Status st = RunKernel("RoiAlign", RoiAttrs("half_pixel", "avg", 1), {&x, &rois64, &bi}, {&y});
  CHECK_MESSAGE(st.message().find("RoiAlign: expected X [N,C,H,W], rois [R,4] of X's dtype") == 0, st.message());
  CHECK_MESSAGE(st.message().find("rois [1] int64") != std::string::npos, st.message());
  // MaxUnpool with float indices, and with strides near INT64_MAX (overflowed int64).
  TestTensor v = Floats({1, 1, 1, 1}, {7}), fi = Floats({1, 1, 1, 1}, {0}), ii = Int64s({1, 1, 1, 1}, {0});
  TestTensor u = Output(DType::kFloat32, {1, 1, 2, 2});
  AttrMap a;
  a.SetInts("kernel_shape", {2, 2});
  st = RunKernel("MaxUnpool", a, {&v, &fi}, {&u});
  CHECK_MESSAGE(st.message().find("MaxUnpool: kernel_shape, I [1, 1, 1, 1] float32 and Y") == 0, st.message());
  TestTensor v2 = Floats({1, 1, 2, 1}, {7, 8}), i2 = Int64s({1, 1, 2, 1}, {0, 1});
  a.SetInts("strides", {std::numeric_limits<int64_t>::max(), 1});
  st = RunKernel("MaxUnpool", a, {&v2, &i2}, {&u});
  CHECK(st.message() == "MaxUnpool: axis 0: X [1, 1, 2, 1] with stride 9223372036854775807, pads 0 and kernel 2 "
                        "has no unpooled size in [1, 2^63)");
  // DeformConv with an offset of the wrong shape (read past its end before).
  TestTensor w = Floats({1, 1, 1, 1}, {1}), off = Floats({1, 1, 4, 4}, std::vector<float>(16)), dy = Output(DType::kFloat32, {1, 1, 4, 4});
  st = RunKernel("DeformConv", {}, {&x, &w, &off}, {&dy});
  CHECK_MESSAGE(st.message().find("DeformConv: operands do not match X [1, 1, 4, 4] float32: W [1, 1, 1, 1], "
                                  "offset [1, 1, 4, 4]") == 0,
                st.message());
  // NonMaxSuppression with int64 boxes.
  TestTensor boxes = Int64s({1, 1, 4}, {0, 0, 1, 1}), scores = Floats({1, 1, 1}, {1}), sel = Output(DType::kInt64, {1, 3});
  st = RunKernel("NonMaxSuppression", {}, {&boxes, &scores}, {&sel});
  CHECK_MESSAGE(st.message().find("got boxes [1, 1, 4] int64") != std::string::npos, st.message());
}

}  // namespace
}  // namespace kiln::cpu::testing
