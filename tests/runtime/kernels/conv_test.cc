#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

std::vector<float> ScaledIota(int64_t n, float scale = 1.0f, float start = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (start + static_cast<float>(i)) * scale;
  return v;
}

// (i % mod - off) * scale for i in [0, n), computed in double like numpy does before the
// float32 cast, so the expected values below (from onnxruntime) match bit for bit.
std::vector<float> Pattern(int64_t n, int64_t mod, int64_t off, double scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<double>(i % mod - off) * scale);
  return v;
}

// Direct 2-D conv, the definition written out, for checking the tiled and depthwise paths
// on shapes too large to paste expected values for.
std::vector<float> ReferenceConv2D(const TestTensor& x, const TestTensor& w, const std::vector<float>& bias,
                                   int64_t group, const int64_t stride[2], const int64_t pad[2],
                                   const int64_t dil[2], int64_t out_h, int64_t out_w) {
  const auto xv = x.values<float>(), wv = w.values<float>();
  const int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], wd = x.dims()[3];
  const int64_t m = w.dims()[0], cg = w.dims()[1], kh = w.dims()[2], kw = w.dims()[3], mg = m / group;
  std::vector<float> y(static_cast<size_t>(n * m * out_h * out_w));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t oh = 0; oh < out_h; ++oh)
        for (int64_t ow = 0; ow < out_w; ++ow) {
          double acc = bias.empty() ? 0.0 : bias[oc];
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * stride[0] - pad[0] + i * dil[0];
                const int64_t iw = ow * stride[1] - pad[1] + j * dil[1];
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                const int64_t xc = (oc / mg) * cg + ic;
                acc += static_cast<double>(xv[((b * c + xc) * h + ih) * wd + iw]) *
                       wv[((oc * cg + ic) * kh + i) * kw + j];
              }
          y[((b * m + oc) * out_h + oh) * out_w + ow] = static_cast<float>(acc);
        }
  return y;
}

size_t WorkspaceFor(const AttrMap& attrs, const TestTensor& x, const TestTensor& w, const TestTensor& y) {
  std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
  return FindKernel("Conv")->workspace(attrs, in, out);
}

// Expected values below come from onnxruntime 1.x on the same inputs.
TEST_CASE("Conv 1x1x3x3 Sobel-like kernel with pads 1") {
  auto x = Floats({1, 1, 3, 3}, ScaledIota(9, 1, 1));
  auto w = Floats({1, 1, 3, 3}, {1, 0, -1, 2, 0, -2, 1, 0, -1});
  auto y = Output(DType::kFloat32, {1, 1, 3, 3});
  AttrMap attrs;
  attrs.SetInts("pads", {1, 1, 1, 1});
  REQUIRE(RunKernel("Conv", attrs, {&x, &w}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-9, -6, 9, -20, -8, 20, -21, -6, 21}));
}

TEST_CASE("Conv grouped, strided, dilated, asymmetric pads, bias") {
  auto x = Floats({2, 4, 5, 5}, ScaledIota(200, 0.01f));
  std::vector<float> wv(108);
  for (int i = 0; i < 108; ++i) wv[i] = static_cast<float>(i % 7 - 3) * 0.1f;
  auto w = Floats({6, 2, 3, 3}, wv);
  auto b = Floats({6}, {1, 2, 3, 4, 5, 6});
  auto y = Output(DType::kFloat32, {2, 6, 2, 2});
  AttrMap attrs;
  attrs.SetInt("group", 2);
  attrs.SetInts("strides", {2, 1});
  attrs.SetInts("pads", {1, 0, 0, 1});
  attrs.SetInts("dilations", {1, 2});
  Status s = RunKernel("Conv", attrs, {&x, &w, &b}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{0.938f, 1.038f, 0.904f, 1.003f, 2.075f, 2.134f, 2.037f, 2.15f,
                                        2.918f, 2.936f, 2.981f, 2.919f, 4.255f, 4.089f, 3.911f, 3.976f,
                                        4.719f, 4.79f, 5.179f, 4.961f, 6.086f, 6.058f, 5.74f, 5.827f,
                                        0.938f, 1.338f, 0.304f, 0.7030001f, 1.975f, 2.134f, 2.337f, 2.45f,
                                        2.718f, 2.636f, 2.781f, 2.419f, 4.655f, 4.189f, 3.911f, 4.076f,
                                        4.319f, 4.59f, 5.379f, 4.961f, 6.286f, 6.258f, 5.44f, 5.727f}));
}

TEST_CASE("Conv 1-D with auto_pad SAME_UPPER and stride 2") {
  auto x = Floats({1, 2, 7}, ScaledIota(14));
  auto w = Floats({3, 2, 2}, ScaledIota(12, 1, -5));
  auto y = Output(DType::kFloat32, {1, 3, 4});
  AttrMap attrs;
  attrs.SetInts("strides", {2});
  attrs.SetString("auto_pad", "SAME_UPPER");
  REQUIRE(RunKernel("Conv", attrs, {&x, &w}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-41, -69, -97, -69, 23, 27, 31, 7, 87, 123, 159, 83}));
}

TEST_CASE("Conv 3-D with padding on two axes") {
  auto x = Floats({1, 1, 3, 3, 3}, ScaledIota(27));
  std::vector<float> wv(16, 1.0f);
  for (int i = 8; i < 16; ++i) wv[i] = -1.0f;
  auto w = Floats({2, 1, 2, 2, 2}, wv);
  auto y = Output(DType::kFloat32, {1, 2, 2, 4, 2});
  AttrMap attrs;
  attrs.SetInts("pads", {0, 1, 0, 0, 1, 0});
  REQUIRE(RunKernel("Conv", attrs, {&x, &w}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{20, 24, 52, 60, 76, 84, 44, 48, 56, 60, 124, 132, 148, 156, 80, 84,
                                        -20, -24, -52, -60, -76, -84, -44, -48, -56, -60, -124, -132,
                                        -148, -156, -80, -84}));
}

TEST_CASE("Conv 1x1 skips im2col and needs no workspace") {
  auto x = Floats({1, 2, 2, 1}, {1, 2, 3, 4});
  auto w = Floats({3, 2, 1, 1}, {1, 2, 3, 4, 5, 6});
  auto y = Output(DType::kFloat32, {1, 3, 2, 1});
  const KernelDef* def = FindKernel("Conv");
  REQUIRE(def != nullptr);
  std::vector<TensorRef> in{x.ref(), w.ref()}, out{y.ref()};
  CHECK(def->workspace(AttrMap{}, in, out) == 0);
  REQUIRE(RunKernel("Conv", {}, {&x, &w}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{7, 10, 15, 22, 23, 34}));
}

TEST_CASE("Conv errors: bad group, channel mismatch, wrong output size") {
  auto x = Floats({1, 16, 4, 4}, {});
  auto w = Floats({3, 5, 1, 1}, {});
  auto y = Output(DType::kFloat32, {1, 3, 4, 4});
  AttrMap attrs;
  attrs.SetInt("group", 3);
  Status s = RunKernel("Conv", attrs, {&x, &w}, {&y});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "Conv: group 3 does not divide input channels 16");
  auto w2 = Floats({4, 8, 1, 1}, {});
  auto y2 = Output(DType::kFloat32, {1, 4, 4, 4});
  s = RunKernel("Conv", {}, {&x, &w2}, {&y2});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("expected 16") != std::string::npos);
  auto w3 = Floats({4, 16, 3, 3}, {});
  s = RunKernel("Conv", {}, {&x, &w3}, {&y2});
  CHECK(s.code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Conv with a zero-size batch") {
  auto x = Floats({0, 1, 3, 3}, {});
  auto w = Floats({2, 1, 2, 2}, ScaledIota(8));
  auto y = Output(DType::kFloat32, {0, 2, 2, 2});
  CHECK(RunKernel("Conv", {}, {&x, &w}, {&y}).ok());
}

TEST_CASE("Conv depthwise 3x3, stride 1, pads 1, bias: direct path, no workspace") {
  // Rows of 20 run the vector loop twice and the scalar tail.
  auto x = Floats({1, 2, 3, 20}, Pattern(120, 11, 5, 0.1));
  auto w = Floats({2, 1, 3, 3}, Pattern(18, 7, 3, 0.25));
  auto b = Floats({2}, {0.5f, -1});
  auto y = Output(DType::kFloat32, {1, 2, 3, 20});
  AttrMap attrs;
  attrs.SetInt("group", 2);
  attrs.SetInts("pads", {1, 1, 1, 1});
  CHECK(WorkspaceFor(attrs, x, w, y) == 0);
  Status s = RunKernel("Conv", attrs, {&x, &w, &b}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  KILN_CHECK_FLOATS(
      y.values<float>(),
      (std::vector<float>{
          -0.375f, 0.425f, 1.275f, 0.475f, 0.5f, 0.525f, 0.55f, 0.575f, 0.6f, 0.625f, 0.09999999f, -0.15f,
          0.425f, 1.275f, 0.475f, 0.5f, 0.525f, 0.55f, 0.575f, 0.5f, 0.9f, 0.75f, 0.35f, 0.775f, 1.475f,
          0.525f, 0.4f, 0.275f, 0.15f, 0.02499998f, 0.175f, 0.6f, 0.75f, 0.35f, 0.775f, 1.475f, 0.525f, 0.4f,
          0.275f, 0.15f, 0.375f, 0.35f, 0.825f, 1.025f, 0.675f, 0.6f, 0.525f, 0.45f, 0.375f, 0.3f, 0.225f,
          0.15f, 0.35f, 0.825f, 1.025f, 0.675f, 0.6f, 0.525f, 0.45f, 0.425f, -1.025f, -0.95f, -0.975f, -1,
          -1.025f, -0.225f, -1.075f, -1.65f, -1.4f, -0.875f, -0.9f, -0.925f, -0.95f, -0.975f, -1, -1.025f,
          -0.225f, -1.075f, -1.65f, -1.55f, -0.95f, -0.85f, -0.875f, -0.9f, -0.925f, -1.225f, -1.25f,
          -0.175f, -1.025f, -1.6f, -1.35f, -0.825f, -0.85f, -0.875f, -0.9f, -0.925f, -1.225f, -1.25f,
          -0.175f, -1.275f, -1.1f, -1.225f, -1.175f, -1.125f, -1.075f, -1.025f, -0.975f, -1.2f, -1.15f, 0,
          -0.775f, -1.275f, -1.225f, -1.175f, -1.125f, -1.075f, -1.025f, -0.975f, -1.2f, -0.675f}));
}

TEST_CASE("Conv depthwise 3x5, stride 2, asymmetric pads, no bias") {
  // 11 output columns: one 8-wide stride-2 vector step, then the scalar tail.
  auto x = Floats({1, 2, 5, 23}, Pattern(230, 13, 6, 0.05));
  auto w = Floats({2, 1, 3, 5}, Pattern(30, 5, 2, 0.5));
  auto y = Output(DType::kFloat32, {1, 2, 2, 11});
  AttrMap attrs;
  attrs.SetInt("group", 2);
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {0, 2, 1, 1});
  Status s = RunKernel("Conv", attrs, {&x, &w}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  KILN_CHECK_FLOATS(
      y.values<float>(),
      (std::vector<float>{0.3f, -0.225f, -0.55f, -0.225f, 0.7500001f, 0.7500001f, -0.2250001f, -0.55f, -0.225f,
                          -0.225f, 0.1f, -0.07500001f, 0.75f, 0.1f, -0.2249999f, -0.225f, -0.55f, -0.225f,
                          0.7500001f, 0.7500001f, -0.2250001f, -0.55f, 0.175f, -0.2249999f, -0.225f, -0.55f,
                          -0.225f, 0.7500001f, 0.7500001f, -0.2250001f, -0.55f, -0.225f, -0.225f, -0.525f, 0.1f,
                          0.75f, 0.1f, -0.2249999f, -0.225f, -0.55f, -0.225f, 0.7500001f, 0.7500001f,
                          -0.2250001f}));
}

TEST_CASE("Conv depthwise matches the definition: strides, pads, batch, and dilation (general path)") {
  const int64_t c = 5, h = 13, wd = 41;
  auto x = Floats({2, c, h, wd}, Pattern(2 * c * h * wd, 23, 11, 0.07));
  std::vector<float> bias = Pattern(c, 3, 1, 0.5);
  auto b = Floats({c}, bias);
  for (int64_t s : {1, 2, 3}) {
    for (int64_t d : {1, 2}) {
      CAPTURE(s);
      CAPTURE(d);
      auto w = Floats({c, 1, 3, 3}, Pattern(c * 9, 7, 3, 0.25));
      const int64_t stride[2] = {s, s}, pad[2] = {1, 2}, dil[2] = {d, d};
      const int64_t out_h = (h + 1 + 0 - (2 * d + 1)) / s + 1, out_w = (wd + 2 + 1 - (2 * d + 1)) / s + 1;
      auto y = Output(DType::kFloat32, {2, c, out_h, out_w});
      AttrMap attrs;
      attrs.SetInt("group", c);
      attrs.SetInts("strides", {s, s});
      attrs.SetInts("pads", {1, 2, 0, 1});
      attrs.SetInts("dilations", {d, d});
      Status st = RunKernel("Conv", attrs, {&x, &w, &b}, {&y});
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      KILN_CHECK_FLOATS(y.values<float>(), ReferenceConv2D(x, w, bias, c, stride, pad, dil, out_h, out_w));
    }
  }
}

TEST_CASE("Conv depthwise 5x5 and 7x7, strides 1 and 2, pads: matches the definition") {
  // MobileNet-style kernels on rows long enough for several 8-wide vector chunks and a tail.
  const int64_t c = 4, h = 9, wd = 45;
  auto x = Floats({2, c, h, wd}, Pattern(2 * c * h * wd, 29, 13, 0.04));
  std::vector<float> bias = {0.5f, -0.25f, 0.0f, 1.0f};
  auto b = Floats({c}, bias);
  for (int64_t k : {5, 7}) {
    for (int64_t s : {1, 2}) {
      CAPTURE(k);
      CAPTURE(s);
      auto w = Floats({c, 1, k, k}, Pattern(c * k * k, 11, 5, 0.08));
      const int64_t p = k / 2;
      const int64_t stride[2] = {s, s}, pad[2] = {p, p}, dil[2] = {1, 1};
      const int64_t out_h = (h + 2 * p - k) / s + 1, out_w = (wd + 2 * p - k) / s + 1;
      auto y = Output(DType::kFloat32, {2, c, out_h, out_w});
      AttrMap attrs;
      attrs.SetInt("group", c);
      attrs.SetInts("strides", {s, s});
      attrs.SetInts("pads", {p, p, p, p});
      Status st = RunKernel("Conv", attrs, {&x, &w, &b}, {&y});
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      KILN_CHECK_FLOATS(y.values<float>(), ReferenceConv2D(x, w, bias, c, stride, pad, dil, out_h, out_w));
    }
  }
}

TEST_CASE("Conv depthwise with a kernel wider than 16 columns matches the definition") {
  // The direct kernel keeps the valid output columns of up to 16 kernel columns; the rest
  // are computed per row. 2 x 19 kernel, stride 2 along the width, pads on both sides.
  const int64_t c = 3, h = 6, wd = 40;
  auto x = Floats({1, c, h, wd}, Pattern(c * h * wd, 19, 4, 0.05));
  auto w = Floats({c, 1, 2, 19}, Pattern(c * 38, 13, 6, 0.1));
  std::vector<float> bias = {0.5f, -1.0f, 0.25f};
  auto b = Floats({c}, bias);
  const int64_t stride[2] = {1, 2}, pad[2] = {1, 9}, dil[2] = {1, 1};
  const int64_t out_h = (h + 1 + 0 - 2) / 1 + 1, out_w = (wd + 9 + 8 - 19) / 2 + 1;
  auto y = Output(DType::kFloat32, {1, c, out_h, out_w});
  AttrMap attrs;
  attrs.SetInt("group", c);
  attrs.SetInts("strides", {1, 2});
  attrs.SetInts("pads", {1, 9, 0, 8});
  Status st = RunKernel("Conv", attrs, {&x, &w, &b}, {&y});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  KILN_CHECK_FLOATS(y.values<float>(), ReferenceConv2D(x, w, bias, c, stride, pad, dil, out_h, out_w));
}

TEST_CASE("Conv im2col is tiled: the workspace holds a column buffer per tile, tiles split output rows") {
  // K = 16 * 3 * 3 = 144 rows over 31 * 35 = 1085 pixels: two tiles of 544 pixels, the cut
  // mid-row, and a buffer for each so two threads can take one each.
  auto x = Floats({1, 16, 31, 35}, Pattern(16 * 31 * 35, 17, 8, 0.03));
  auto w = Floats({2, 16, 3, 3}, Pattern(2 * 16 * 9, 5, 2, 0.1));
  std::vector<float> bias{0.25f, -0.5f};
  auto b = Floats({2}, bias);
  auto y = Output(DType::kFloat32, {1, 2, 31, 35});
  AttrMap attrs;
  attrs.SetInts("pads", {1, 1, 1, 1});
  const size_t tile = 144 * 544 * sizeof(float);
  CHECK(WorkspaceFor(attrs, x, w, y) == 2 * tile);
  // One thread needs one buffer only; less than one tile is refused.
  const KernelDef* def = FindKernel("Conv");
  const std::vector<TensorRef> in{x.ref(), w.ref(), b.ref()}, out{y.ref()};
  std::vector<uint8_t> scratch(tile);
  CHECK(def->run(KernelCall{attrs, in, out, scratch.data(), tile - 4, nullptr}).code() == StatusCode::kInternal);
  Status s = def->run(KernelCall{attrs, in, out, scratch.data(), tile, nullptr});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  const auto got = y.values<float>();
  // Spot values and per-channel sums from onnxruntime, around the tile boundary.
  for (auto spot : std::vector<std::pair<size_t, float>>{{0, 0.124f}, {543, 0.214f}, {544, 0.361f},
                                                         {545, 0.406f}, {1084, 0.244f}, {1085, -0.509f},
                                                         {1600, -0.614f}, {2169, -0.542f}}) {
    const size_t i = spot.first;
    const float v = spot.second;
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(v).epsilon(1e-5));
  }
  double sum0 = 0, sum1 = 0;
  for (size_t i = 0; i < 1085; ++i) sum0 += got[i], sum1 += got[1085 + i];
  CHECK(sum0 == doctest::Approx(271.589).epsilon(1e-5));
  CHECK(sum1 == doctest::Approx(-542.941).epsilon(1e-5));
  const int64_t one[2] = {1, 1};
  KILN_CHECK_FLOATS(got, ReferenceConv2D(x, w, bias, 1, one, one, one, 31, 35));
}

TEST_CASE("Conv tiled, grouped, strided: matches the definition - a large image needs a small workspace") {
  auto x = Floats({2, 6, 40, 47}, Pattern(2 * 6 * 40 * 47, 19, 9, 0.04));
  auto w = Floats({4, 3, 3, 3}, Pattern(4 * 3 * 9, 11, 5, 0.1));
  std::vector<float> bias{1, -1, 0.5f, 0};
  auto b = Floats({4}, bias);
  auto y = Output(DType::kFloat32, {2, 4, 20, 24});
  AttrMap attrs;
  attrs.SetInt("group", 2);
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {1, 1, 0, 1});
  Status s = RunKernel("Conv", attrs, {&x, &w, &b}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  const int64_t stride[2] = {2, 2}, pad[2] = {1, 1}, dil[2] = {1, 1};
  KILN_CHECK_FLOATS(y.values<float>(), ReferenceConv2D(x, w, bias, 2, stride, pad, dil, 20, 24));

  // super-resolution's 64 -> 64 3x3 conv on 224x224: whole-image im2col would be 115 MB;
  // the workspace is 4 of its 222 tiles (K = 576 rows, 240 pixels each).
  auto bx = Floats({1, 64, 224, 224}, {});
  auto bw = Floats({64, 64, 3, 3}, {});
  auto by = Output(DType::kFloat32, {1, 64, 224, 224});
  AttrMap big;
  big.SetInts("pads", {1, 1, 1, 1});
  CHECK(WorkspaceFor(big, bx, bw, by) == 4 * 576 * 240 * sizeof(float));
}

TEST_CASE("ConvTranspose 2-D strides, asymmetric pads, output_padding") {
  auto x = Floats({1, 1, 3, 3}, ScaledIota(9, 1, 1));
  auto w = Floats({1, 2, 2, 2}, ScaledIota(8, 1, 1));
  auto y = Output(DType::kFloat32, {1, 2, 6, 5});
  AttrMap attrs;
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {0, 1, 1, 0});
  attrs.SetInts("output_padding", {1, 0});
  Status s = RunKernel("ConvTranspose", attrs, {&x, &w}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{2, 2, 4, 3, 6, 4, 6, 8, 9, 12, 8, 5, 10, 6, 12, 16, 15, 20, 18, 24,
                                        14, 8, 16, 9, 18, 28, 24, 32, 27, 36, 6, 10, 12, 15, 18, 8, 14,
                                        16, 21, 24, 24, 25, 30, 30, 36, 32, 35, 40, 42, 48, 42, 40, 48,
                                        45, 54, 56, 56, 64, 63, 72}));
}

TEST_CASE("ConvTranspose 1-D grouped, dilated, with bias") {
  auto x = Floats({1, 4, 3}, ScaledIota(12, 0.5f));
  auto w = Floats({4, 1, 3}, ScaledIota(12, 1, -4));
  auto b = Floats({2}, {1, -1});
  auto y = Output(DType::kFloat32, {1, 2, 8});
  AttrMap attrs;
  attrs.SetInt("group", 2);
  attrs.SetInts("strides", {2});
  attrs.SetInts("dilations", {2});
  attrs.SetInts("pads", {1, 0});
  Status s = RunKernel("ConvTranspose", attrs, {&x, &w, &b}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{1, -3, 1, -5.5f, 1, -1, 1, 1.5f, -1, 67, -1, 118.5f, -1, 93, -1, 53.5f}));
}

TEST_CASE("ConvTranspose rejects a group that does not divide channels") {
  auto x = Floats({1, 3, 2}, {});
  auto w = Floats({3, 1, 2}, {});
  auto y = Output(DType::kFloat32, {1, 2, 3});
  AttrMap attrs;
  attrs.SetInt("group", 2);
  Status s = RunKernel("ConvTranspose", attrs, {&x, &w}, {&y});
  CHECK(s.message() == "ConvTranspose: group 2 does not divide input channels 3");
}

// output_shape sets the pads: total = stride * (in - 1) + kernel - out. Without auto_pad the
// spec puts floor(total / 2) at the end; a negative total leaves zeros past the full extent.
TEST_CASE("ConvTranspose 1-D with output_shape: pads from the spec's rule") {
  auto x = Floats({1, 1, 3}, {1, 2, 3});
  auto w = Floats({1, 1, 2}, {1, 10});
  // Full extent 2 * 2 + 2 = 6: [1, 10, 2, 20, 3, 30].
  AttrMap attrs;
  attrs.SetInts("strides", {2});
  attrs.SetInts("output_shape", {8});  // total -2: one zero before, one after
  auto y8 = Output(DType::kFloat32, {1, 1, 8});
  REQUIRE(RunKernel("ConvTranspose", attrs, {&x, &w}, {&y8}).ok());
  CHECK(y8.values<float>() == (std::vector<float>{0, 1, 10, 2, 20, 3, 30, 0}));
  attrs.SetInts("output_shape", {7});  // total -1: the zero goes after
  auto y7 = Output(DType::kFloat32, {1, 1, 7});
  REQUIRE(RunKernel("ConvTranspose", attrs, {&x, &w}, {&y7}).ok());
  CHECK(y7.values<float>() == (std::vector<float>{1, 10, 2, 20, 3, 30, 0}));
  attrs.SetInts("output_shape", {5});  // total 1: the cut is at the start
  auto y5 = Output(DType::kFloat32, {1, 1, 5});
  REQUIRE(RunKernel("ConvTranspose", attrs, {&x, &w}, {&y5}).ok());
  CHECK(y5.values<float>() == (std::vector<float>{10, 2, 20, 3, 30}));
  attrs.SetString("auto_pad", "SAME_UPPER");  // SAME_UPPER cuts at the end
  REQUIRE(RunKernel("ConvTranspose", attrs, {&x, &w}, {&y5}).ok());
  CHECK(y5.values<float>() == (std::vector<float>{1, 10, 2, 20, 3}));
}

}  // namespace
}  // namespace kiln::cpu::testing
