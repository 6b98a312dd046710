#include <doctest/doctest.h>

#include <cmath>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// Expected values computed with onnxruntime on the same inputs.
std::vector<float> LayerNormInput() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  return v;
}

TEST_CASE("LayerNormalization over the last axis with scale and bias") {
  auto x = Floats({2, 3, 4}, LayerNormInput());
  auto s = Floats({4}, {1, 2, 0.5f, -1});
  auto b = Floats({4}, {0, 0.1f, 0.2f, 0.3f});
  auto y = Output(DType::kFloat32, {2, 3, 4});
  REQUIRE(RunKernel("LayerNormalization", {}, {&x, &s, &b}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-1.341619f, -0.7944129f, 0.4236032f, -1.041619f, 1.521264f,
                                        -2.26641f, -0.05354394f, 0.1309707f, 0.6324505f, 2.629802f,
                                        -0.4324505f, 0.9324505f, -0.1690293f, 1.114176f, 0.7916026f,
                                        1.821264f, -1.341619f, -0.7944129f, 0.4236032f, -1.041619f,
                                        -1.341619f, -0.7944129f, 0.4236032f, -1.041619f}));
}

TEST_CASE("LayerNormalization axis=1, no bias, Mean and InvStdDev outputs") {
  auto x = Floats({2, 3, 4}, LayerNormInput());
  auto s = Floats({3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  auto absent = Absent();
  auto y = Output(DType::kFloat32, {2, 3, 4});
  auto mean = Output(DType::kFloat32, {2, 1, 1});
  auto inv = Output(DType::kFloat32, {2, 1, 1});
  AttrMap attrs;
  attrs.SetInt("axis", 1);
  REQUIRE(RunKernel("LayerNormalization", attrs, {&x, &s, &absent}, {&y, &mean, &inv}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-1.23103f, -0.5275841f, 0.1758614f, 0.8793069f, 3.165505f,
                                        -2.462059f, -1.055168f, 0.3517227f, 2.637921f, 4.748257f,
                                        -3.693089f, -1.582752f, -0.06311873f, 0.694306f, 1.451731f,
                                        -1.577968f, -1.641087f, -0.1262375f, 1.388612f, 2.903461f,
                                        -4.733904f, -2.46163f, -0.1893562f, 2.082918f}));
  KILN_CHECK_FLOATS(mean.values<float>(), (std::vector<float>{-0.125f, 0.04166667f}));
  KILN_CHECK_FLOATS(inv.values<float>(), (std::vector<float>{1.406891f, 1.514849f}));
  // A scale broadcast along the normalized shape ([3,1] against [3,4]) gives the same result.
  auto s2 = Floats({3, 1}, {1, 2, 3});
  auto y2 = Output(DType::kFloat32, {2, 3, 4});
  REQUIRE(RunKernel("LayerNormalization", attrs, {&x, &s2}, {&y2}).ok());
  KILN_CHECK_FLOATS(y2.values<float>(), y.values<float>());
}

std::vector<float> Pow15() {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = std::pow(static_cast<float>(i), 1.5f);
  return v;
}

TEST_CASE("InstanceNormalization") {
  auto x = Floats({2, 2, 3}, Pow15());
  auto s = Floats({2}, {1, 2});
  auto b = Floats({2}, {0.5f, -0.5f});
  auto y = Output(DType::kFloat32, {2, 2, 3});
  REQUIRE(RunKernel("InstanceNormalization", {}, {&x, &s, &b}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-0.5896972f, 0.2642022f, 1.825495f, -2.896537f, -0.6026707f,
                                        1.99921f, -0.7098742f, 0.4707832f, 1.739091f, -2.928802f,
                                        -0.540863f, 1.969666f}));
}

TEST_CASE("BatchNormalization inference") {
  auto x = Floats({2, 2, 3}, Pow15());
  auto s = Floats({2}, {1, 2});
  auto b = Floats({2}, {0.5f, -0.5f});
  auto m = Floats({2}, {1, 2});
  auto v = Floats({2}, {4, 0.25f});
  auto y = Output(DType::kFloat32, {2, 2, 3});
  AttrMap attrs;
  attrs.SetFloat("epsilon", 1e-3f);
  REQUIRE(RunKernel("BatchNormalization", attrs, {&x, &s, &b, &m, &v}, {&y}).ok());
  auto got = y.values<float>();
  std::vector<float> want{6.246567e-05f, 0.5f, 1.414099f, 12.25912f, 23.45214f, 36.14814f,
                          7.347614f, 9.259035f, 11.31236f, 99.30061f, 117.7548f, 137.1564f};
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-4));
  auto bad = Floats({3}, {1, 2, 3});
  Status st = RunKernel("BatchNormalization", attrs, {&x, &bad, &b, &m, &v}, {&y});
  CHECK(st.message() == "BatchNormalization: scale [3] must have 2 elements (one per channel)");
}

TEST_CASE("GroupNormalization with per-channel scale") {
  std::vector<float> xv(12);
  for (int i = 0; i < 12; ++i) xv[i] = static_cast<float>(i % 4);
  auto x = Floats({1, 4, 3}, xv);
  auto s = Floats({4}, {1, 2, 3, 4});
  auto b = Floats({4}, {0, 1, 0, 1});
  auto y = Output(DType::kFloat32, {1, 4, 3});
  AttrMap attrs;
  attrs.SetInt("num_groups", 2);
  REQUIRE(RunKernel("GroupNormalization", attrs, {&x, &s, &b}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-1.093212f, -0.156173f, 0.7808654f, 4.435808f, -1.186423f,
                                        0.6876539f, 0.4685191f, 3.279634f, -5.153711f, -2.123462f,
                                        1.624692f, 5.372846f}));
}

}  // namespace
}  // namespace kiln::cpu::testing
