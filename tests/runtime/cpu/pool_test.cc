#include <doctest/doctest.h>

#include "tests/runtime/cpu/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// 4x5 ramp 0..19 with a spike of 100 at (1,2). Expected values from onnxruntime.
TestTensor PoolInput() {
  std::vector<float> v(20);
  for (int i = 0; i < 20; ++i) v[i] = static_cast<float>(i);
  v[7] = 100;
  return Floats({1, 1, 4, 5}, v);
}

TEST_CASE("MaxPool with pads, strides, ceil_mode and Indices") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 3, 3});
  auto idx = Output(DType::kInt64, {1, 1, 3, 3});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {1, 1, 0, 0});
  attrs.SetInt("ceil_mode", 1);
  Status s = RunKernel("MaxPool", attrs, {&x}, {&y, &idx});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(y.values<float>() == std::vector<float>{1, 3, 4, 11, 100, 14, 16, 18, 19});
  CHECK(idx.values<int64_t>() == std::vector<int64_t>{1, 3, 4, 11, 7, 14, 16, 18, 19});
}

TEST_CASE("MaxPool with dilations") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 2, 3});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2, 2});
  attrs.SetInts("dilations", {2, 2});
  REQUIRE(RunKernel("MaxPool", attrs, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{12, 13, 14, 100, 18, 100});
}

TEST_CASE("AveragePool count_include_pad on and off") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 2, 3});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {3, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {1, 1, 1, 1});
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3, 20, 6, 10.5f, 22.33333f, 13.5f}));
  attrs.SetInt("count_include_pad", 1);
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{1.333333f, 13.33333f, 2.666667f, 7, 22.33333f, 9}));
}

TEST_CASE("AveragePool ceil_mode clips the last window to the padded extent") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 2, 2});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {3, 3});
  attrs.SetInts("strides", {2, 2});
  attrs.SetInts("pads", {0, 0, 1, 0});
  attrs.SetInt("ceil_mode", 1);
  attrs.SetInt("count_include_pad", 1);
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{16.33333f, 18.33333f, 9, 10.33333f}));
}

TEST_CASE("AveragePool 1-D SAME_LOWER") {
  auto x = Floats({1, 1, 5}, {0, 1, 2, 3, 4});
  auto y = Output(DType::kFloat32, {1, 1, 5});
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2});
  attrs.SetString("auto_pad", "SAME_LOWER");
  REQUIRE(RunKernel("AveragePool", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0, 0.5f, 1.5f, 2.5f, 3.5f}));
}

TEST_CASE("Global pools") {
  auto x = Floats({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -8});
  auto y = Output(DType::kFloat32, {1, 2, 1, 1});
  REQUIRE(RunKernel("GlobalAveragePool", {}, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{2.5f, -3.5f});
  REQUIRE(RunKernel("GlobalMaxPool", {}, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{4, -1});
}

TEST_CASE("MaxPool rejects a missing kernel_shape and a wrong output size") {
  auto x = PoolInput();
  auto y = Output(DType::kFloat32, {1, 1, 3, 4});
  CHECK(RunKernel("MaxPool", {}, {&x}, {&y}).code() == StatusCode::kInvalidArgument);
  AttrMap attrs;
  attrs.SetInts("kernel_shape", {2, 2});
  auto y33 = Output(DType::kFloat32, {1, 1, 3, 3});
  Status s = RunKernel("MaxPool", attrs, {&x}, {&y33});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "MaxPool: output spatial dim 1 is 3, expected 4");
}

}  // namespace
}  // namespace kiln::cpu::testing
