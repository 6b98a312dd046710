// Integer quantization kernels against hand-computed values; ties exercise round half to even.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TestTensor U8(std::vector<int64_t> dims, std::vector<uint8_t> v) { return Make<uint8_t>(std::move(dims), std::move(v)); }
TestTensor I8(std::vector<int64_t> dims, std::vector<int8_t> v) { return Make<int8_t>(std::move(dims), std::move(v)); }

TEST_CASE("QuantizeLinear per tensor: round half to even, zero point, saturation") {
  // x / 2 = 0, 1, 1.5, 2.5, 500, -127, -500 -> rint 0, 1, 2, 2, 500, -127, -500; + 128, clipped to [0, 255].
  TestTensor x = Floats({7}, {0, 2, 3, 5, 1000, -254, -1000}), s = Floats({}, {2}), zp = U8({}, {128});
  TestTensor y = Output(DType::kUInt8, {7});
  REQUIRE(RunKernel("QuantizeLinear", {}, {&x, &s, &zp}, {&y}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{128, 129, 130, 130, 255, 1, 0});
}

TEST_CASE("QuantizeLinear per axis (int8) and blocked (uint8, no zero point)") {
  // axis 1: column 0 scale 1 zero point 0, column 1 scale 2 zero point -1.
  TestTensor x = Floats({2, 2}, {1, 2, 3, 4}), s = Floats({2}, {1, 2}), zp = I8({2}, {0, -1});
  TestTensor y = Output(DType::kInt8, {2, 2});
  REQUIRE(RunKernel("QuantizeLinear", {}, {&x, &s, &zp}, {&y}).ok());
  CHECK(y.values<int8_t>() == std::vector<int8_t>{1, 0, 3, 1});
  // Blocks of 2 along axis 1 with scales 1 and 4: 1, 2, 8/4 = 2, 9/4 = 2.25 -> 2.
  AttrMap a;
  a.SetInt("block_size", 2);
  TestTensor bx = Floats({1, 4}, {1, 2, 8, 9}), bs = Floats({1, 2}, {1, 4});
  TestTensor by = Output(DType::kUInt8, {1, 4});
  REQUIRE(RunKernel("QuantizeLinear", a, {&bx, &bs}, {&by}).ok());
  CHECK(by.values<uint8_t>() == std::vector<uint8_t>{1, 2, 2, 2});
  // A scale with the wrong block count is an error naming the shapes.
  TestTensor bad = Floats({1, 3}, {1, 1, 1});
  Status st = RunKernel("QuantizeLinear", a, {&bx, &bad}, {&by});
  CHECK(st.message().find("QuantizeLinear: scale [1, 3]") != std::string::npos);
}

TEST_CASE("DequantizeLinear per tensor and per axis") {
  TestTensor x = U8({4}, {0, 3, 128, 255}), s = Floats({}, {2}), zp = U8({}, {128});
  TestTensor y = Output(DType::kFloat32, {4});
  REQUIRE(RunKernel("DequantizeLinear", {}, {&x, &s, &zp}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{-256, -250, 0, 254});
  AttrMap a;
  a.SetInt("axis", 0);
  TestTensor x2 = I8({2, 2}, {-1, 1, 10, 20}), s2 = Floats({2}, {0.5f, 3}), zp2 = I8({2}, {1, 10});
  TestTensor y2 = Output(DType::kFloat32, {2, 2});
  REQUIRE(RunKernel("DequantizeLinear", a, {&x2, &s2, &zp2}, {&y2}).ok());
  CHECK(y2.values<float>() == std::vector<float>{-1, 0, 0, 30});
}

TEST_CASE("DynamicQuantizeLinear: range includes 0, scale (max - min) / 255") {
  // The ONNX spec's example: min -3, max 2 -> scale 5/255, zero point rint(3 / scale) = 153.
  TestTensor x = Floats({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  TestTensor y = Output(DType::kUInt8, {6}), s = Output(DType::kFloat32, {}), zp = Output(DType::kUInt8, {});
  REQUIRE(RunKernel("DynamicQuantizeLinear", {}, {&x}, {&y, &s, &zp}).ok());
  CHECK(y.values<uint8_t>() == std::vector<uint8_t>{153, 255, 0, 26, 221, 179});
  CHECK(s.values<float>()[0] == doctest::Approx(5.0 / 255.0));
  CHECK(zp.values<uint8_t>()[0] == 153);
}

TEST_CASE("DynamicQuantizeLinear: the vector loop and its tail round half to even, and a NaN gives 0") {
  // 39 values (nine blocks of four and a tail of three): exact halves of the step, both signs,
  // the extremes, and a NaN, left out of the range. min -2.55, max 2.55: scale 0.02, zero point 128.
  std::vector<float> v;
  for (int i = -19; i <= 19; ++i) v.push_back(static_cast<float>(i) * 0.13f + (i % 2 ? 0.01f : 0.0f));
  v[0] = -2.55f;
  v[38] = 2.55f;
  v[5] = std::nanf("");
  TestTensor x = Floats({39}, v);
  TestTensor y = Output(DType::kUInt8, {39}), s = Output(DType::kFloat32, {}), zp = Output(DType::kUInt8, {});
  REQUIRE(RunKernel("DynamicQuantizeLinear", {}, {&x}, {&y, &s, &zp}).ok());
  const float scale = s.values<float>()[0];
  CHECK(scale == (2.55f - -2.55f) / 255.0f);
  CHECK(zp.values<uint8_t>()[0] == 128);
  for (size_t i = 0; i < v.size(); ++i) {
    CAPTURE(i);
    // ONNX's reference: saturate(rint(x / scale) + zero point), in float32 then clipped.
    const double want = std::isnan(v[i]) ? 0.0 : std::clamp(std::nearbyint(v[i] / scale) + 128.0, 0.0, 255.0);
    CHECK(y.values<uint8_t>()[i] == static_cast<uint8_t>(want));
  }
}

TEST_CASE("MatMulInteger and QLinearMatMul") {
  // (A - 1) = [[10, 6], [2, 3]] times B = [[2], [3]].
  TestTensor a = U8({2, 2}, {11, 7, 3, 4}), b = U8({2, 1}, {2, 3}), azp = U8({}, {1});
  TestTensor y = Output(DType::kInt32, {2, 1});
  REQUIRE(RunKernel("MatMulInteger", {}, {&a, &b, &azp}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{38, 13});
  // Multiplier 0.5 * 1 / 2 = 0.25. Row 0: [2, 4] . ([3, 5] - 1) = 20 -> 5 + 10 = 15;
  // row 1: [1, 1] . [2, 4] = 6 -> 1.5 + 10 = 11.5 -> 12 (half to even).
  TestTensor qa = I8({2, 2}, {2, 4, 1, 1}), as = Floats({}, {0.5f}), qazp = I8({}, {0});
  TestTensor qb = I8({2, 1}, {3, 5}), bs = Floats({}, {1}), qbzp = I8({}, {1});
  TestTensor ys = Floats({}, {2}), yzp = I8({}, {10});
  TestTensor qy = Output(DType::kInt8, {2, 1});
  REQUIRE(RunKernel("QLinearMatMul", {}, {&qa, &as, &qazp, &qb, &bs, &qbzp, &ys, &yzp}, {&qy}).ok());
  CHECK(qy.values<int8_t>() == std::vector<int8_t>{15, 12});
}

TEST_CASE("kiln.MatMulIntegerTransB: A [..., M, K] by B [N, K] into int32") {
  // A [2, 1, 3] by B [2, 3]: row 0 [1, -2, 3] . [4, 5, 6] = 12, . [-1, 0, 127] = 380;
  // row 1 [-128, 0, 1] . [4, 5, 6] = -506, . [-1, 0, 127] = 255.
  TestTensor a = I8({2, 1, 3}, {1, -2, 3, -128, 0, 1}), b = I8({2, 3}, {4, 5, 6, -1, 0, 127});
  TestTensor y = Output(DType::kInt32, {2, 1, 2});
  REQUIRE(RunKernel("kiln.MatMulIntegerTransB", {}, {&a, &b}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{12, 380, -506, 255});
  // uint8 A: 200 * 4 + 1 * 5 = 805.
  TestTensor ua = U8({1, 2}, {200, 1}), ub = I8({1, 2}, {4, 5}), uy = Output(DType::kInt32, {1, 1});
  REQUIRE(RunKernel("kiln.MatMulIntegerTransB", {}, {&ua, &ub}, {&uy}).ok());
  CHECK(uy.values<int32_t>() == std::vector<int32_t>{805});
  TestTensor wrong = Output(DType::kInt32, {2, 1, 3});
  CHECK(RunKernel("kiln.MatMulIntegerTransB", {}, {&a, &b}, {&wrong}).message() ==
        "kiln.MatMulIntegerTransB: A [2, 1, 3] [..., M, K], B [2, 3] [N, K] and Y [2, 1, 3] [..., M, N] do not match");
}

TEST_CASE("kiln.NhwcConvInt8: int8 NHWC X by an [M, KH, KW, C] filter into float32") {
  // X [1, 3, 3, 2]: channel 0 is 1..9, channel 1 is -1..-9. Filter 0 reads channel 0 with taps
  // 1 2 3 4 (the 2x2 cross-correlation of 1..9: 37 47 67 77); filter 1 reads channel 1 with -128
  // at tap (1, 1) (128 * 5, 6, 8, 9).
  std::vector<int8_t> xv;
  for (int i = 1; i <= 9; ++i) xv.insert(xv.end(), {static_cast<int8_t>(i), static_cast<int8_t>(-i)});
  TestTensor x = I8({1, 3, 3, 2}, xv);
  TestTensor w = I8({2, 2, 2, 2}, {1, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, -128});
  TestTensor y = Output(DType::kFloat32, {1, 2, 2, 2});
  REQUIRE(RunKernel("kiln.NhwcConvInt8", {}, {&x, &w}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{37, 640, 47, 768, 67, 1024, 77, 1152});
  // Pad 1 and stride 2: outputs at (0, 0), (0, 2), (2, 0), (2, 2) of the padded 5x5 input; the
  // corner window sees x[0][0] alone at tap (1, 1): 4 * 1 and -128 * -1.
  AttrMap a;
  a.SetInts("pads", {1, 1, 1, 1});
  a.SetInts("strides", {2, 2});
  TestTensor yp = Output(DType::kFloat32, {1, 2, 2, 2});
  REQUIRE(RunKernel("kiln.NhwcConvInt8", a, {&x, &w}, {&yp}).ok());
  CHECK(yp.values<float>()[0] == 4);
  CHECK(yp.values<float>()[1] == 128);
  TestTensor wrong = Output(DType::kFloat32, {1, 3, 3, 2});
  CHECK(RunKernel("kiln.NhwcConvInt8", {}, {&x, &w}, {&wrong}).message() ==
        "kiln.NhwcConvInt8: Y [1, 3, 3, 2] is not the output size of X [1, 3, 3, 2] and W [2, 2, 2, 2]");
}

TEST_CASE("ConvInteger and QLinearConv (with bias, half to even)") {
  // x - 1 = 0..8 in a 3x3 image; a 2x2 kernel of ones sums each window.
  TestTensor x = U8({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), w = U8({1, 1, 2, 2}, {1, 1, 1, 1});
  TestTensor xzp = U8({}, {1}), wzp = U8({}, {0});
  TestTensor y = Output(DType::kInt32, {1, 1, 2, 2});
  REQUIRE(RunKernel("ConvInteger", {}, {&x, &w, &xzp, &wzp}, {&y}).ok());
  CHECK(y.values<int32_t>() == std::vector<int32_t>{8, 12, 20, 24});
  // (sum + bias 2) / 4: 2.5, 3.5, 5.5, 6.5 -> 2, 4, 6, 6.
  TestTensor one = Floats({}, {1}), ys = Floats({}, {4}), yzp = U8({}, {0}), bias = Int32s({1}, {2});
  TestTensor qy = Output(DType::kUInt8, {1, 1, 2, 2});
  REQUIRE(RunKernel("QLinearConv", {}, {&x, &one, &xzp, &w, &one, &wzp, &ys, &yzp, &bias}, {&qy}).ok());
  CHECK(qy.values<uint8_t>() == std::vector<uint8_t>{2, 4, 6, 6});
  // Padding 1 on every side: the corner window sees only x[0][0] - 1 = 0, the next x[0][0..1] - 1 = 1.
  AttrMap a;
  a.SetInts("pads", {1, 1, 1, 1});
  TestTensor yp = Output(DType::kInt32, {1, 1, 4, 4});
  REQUIRE(RunKernel("ConvInteger", a, {&x, &w, &xzp, &wzp}, {&yp}).ok());
  CHECK(yp.values<int32_t>()[0] == 0);
  CHECK(yp.values<int32_t>()[1] == 1);
  CHECK(yp.values<int32_t>()[5] == 8);
}


// -inf made the scale infinite and the zero point NaN, converted to uint8 (UB; h8 tester).
// MatMulInteger read int32 operands as int8/uint8 inputs would be read (h8 tester).
TEST_CASE("DynamicQuantizeLinear with -inf, integer matmul and conv take only int8/uint8") {
  TestTensor x = Floats({2}, {-std::numeric_limits<float>::infinity(), 1});
  TestTensor y = Output(DType::kUInt8, {2}), s = Output(DType::kFloat32, {}), zp = Output(DType::kUInt8, {});
  REQUIRE(RunKernel("DynamicQuantizeLinear", {}, {&x}, {&y, &s, &zp}).ok());
  CHECK(zp.values<uint8_t>()[0] == 0);
  TestTensor bad_zp = Output(DType::kFloat32, {});
  CHECK(RunKernel("DynamicQuantizeLinear", {}, {&x}, {&y, &s, &bad_zp}).message() ==
        "DynamicQuantizeLinear: y_scale must be one float32 and y_zero_point one uint8, found float32 [] and "
        "float32 []");
  TestTensor a = Int32s({1, 1}, {5}), b = Int32s({1, 1}, {7}), out = Output(DType::kInt32, {1, 1});
  CHECK(RunKernel("MatMulInteger", {}, {&a, &b}, {&out}).message() ==
        "MatMulInteger: A must be int8 or uint8 with a zero point of its dtype, found int32");
  TestTensor ua = U8({1, 1}, {5}), ib = I8({1, 1}, {7}), izp = I8({}, {1});
  CHECK(RunKernel("MatMulInteger", {}, {&ua, &ib, &izp}, {&out}).message() ==
        "MatMulInteger: A must be int8 or uint8 with a zero point of its dtype, found uint8 and zero point int8");
  TestTensor cx = Int32s({1, 1, 1, 1}, {5}), cw = U8({1, 1, 1, 1}, {7}), cy = Output(DType::kInt32, {1, 1, 1, 1});
  CHECK(RunKernel("ConvInteger", {}, {&cx, &cw}, {&cy}).message() ==
        "ConvInteger: X must be int8 or uint8 with a zero point of its dtype, found int32");
}

}  // namespace
}  // namespace kiln::cpu::testing
