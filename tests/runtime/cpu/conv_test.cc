#include <doctest/doctest.h>

#include "tests/runtime/cpu/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

std::vector<float> Iota(int64_t n, float scale = 1.0f, float start = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (start + static_cast<float>(i)) * scale;
  return v;
}

// Expected values below come from onnxruntime 1.x on the same inputs.
TEST_CASE("Conv 1x1x3x3 Sobel-like kernel with pads 1") {
  auto x = Floats({1, 1, 3, 3}, Iota(9, 1, 1));
  auto w = Floats({1, 1, 3, 3}, {1, 0, -1, 2, 0, -2, 1, 0, -1});
  auto y = Output(DType::kFloat32, {1, 1, 3, 3});
  AttrMap attrs;
  attrs.SetInts("pads", {1, 1, 1, 1});
  REQUIRE(RunKernel("Conv", attrs, {&x, &w}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{-9, -6, 9, -20, -8, 20, -21, -6, 21}));
}

TEST_CASE("Conv grouped, strided, dilated, asymmetric pads, bias") {
  auto x = Floats({2, 4, 5, 5}, Iota(200, 0.01f));
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
  auto x = Floats({1, 2, 7}, Iota(14));
  auto w = Floats({3, 2, 2}, Iota(12, 1, -5));
  auto y = Output(DType::kFloat32, {1, 3, 4});
  AttrMap attrs;
  attrs.SetInts("strides", {2});
  attrs.SetString("auto_pad", "SAME_UPPER");
  REQUIRE(RunKernel("Conv", attrs, {&x, &w}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-41, -69, -97, -69, 23, 27, 31, 7, 87, 123, 159, 83}));
}

TEST_CASE("Conv 3-D with padding on two axes") {
  auto x = Floats({1, 1, 3, 3, 3}, Iota(27));
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
  auto w = Floats({2, 1, 2, 2}, Iota(8));
  auto y = Output(DType::kFloat32, {0, 2, 2, 2});
  CHECK(RunKernel("Conv", {}, {&x, &w}, {&y}).ok());
}

TEST_CASE("ConvTranspose 2-D strides, asymmetric pads, output_padding") {
  auto x = Floats({1, 1, 3, 3}, Iota(9, 1, 1));
  auto w = Floats({1, 2, 2, 2}, Iota(8, 1, 1));
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
  auto x = Floats({1, 4, 3}, Iota(12, 0.5f));
  auto w = Floats({4, 1, 3}, Iota(12, 1, -4));
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

}  // namespace
}  // namespace kiln::cpu::testing
