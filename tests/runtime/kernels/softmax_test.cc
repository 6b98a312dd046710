#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// Expected values from onnxruntime.
std::vector<float> SoftInput() { return {1, 2, 3, 1, 1, 1, -1, 0, 10}; }

TEST_CASE("Softmax along a middle axis") {
  auto x = Floats({1, 3, 3}, SoftInput());
  auto y = Output(DType::kFloat32, {1, 3, 3});
  AttrMap attrs;
  attrs.SetInt("axis", 1);
  REQUIRE(RunKernel("Softmax", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{0.4683105f, 0.6652409f, 0.0009109388f, 0.4683105f, 0.2447285f,
                                        0.0001232822f, 0.06337894f, 0.09003057f, 0.9989657f}));
}

TEST_CASE("LogSoftmax default axis -1") {
  auto x = Floats({1, 3, 3}, SoftInput());
  auto y = Output(DType::kFloat32, {1, 3, 3});
  REQUIRE(RunKernel("LogSoftmax", {}, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{-2.407606f, -1.407606f, -0.4076059f, -1.098612f, -1.098612f,
                                        -1.098612f, -11.00006f, -10.00006f, -6.210611e-05f}));
}

TEST_CASE("Softmax coerce_2d=1 uses pre-13 flattening") {
  auto x = Floats({3, 3}, SoftInput());
  auto y = Output(DType::kFloat32, {3, 3});
  AttrMap attrs;
  attrs.SetInt("axis", 0);
  attrs.SetInt("coerce_2d", 1);
  REQUIRE(RunKernel("Softmax", attrs, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(),
                    (std::vector<float>{0.0001231877f, 0.0003348589f, 0.0009102407f, 0.0001231877f,
                                        0.0001231877f, 0.0001231877f, 1.667164e-05f, 4.531822e-05f,
                                        0.9982002f}));
}

TEST_CASE("Hardmax picks the first maximum") {
  auto x = Floats({1, 3, 3}, SoftInput());
  auto y = Output(DType::kFloat32, {1, 3, 3});
  AttrMap attrs;
  attrs.SetInt("axis", 1);
  REQUIRE(RunKernel("Hardmax", attrs, {&x}, {&y}).ok());
  CHECK(y.values<float>() == std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0, 1});
}

TEST_CASE("Softmax rejects an out-of-range axis") {
  auto x = Floats({2, 2}, {1, 2, 3, 4});
  auto y = Output(DType::kFloat32, {2, 2});
  AttrMap attrs;
  attrs.SetInt("axis", 2);
  Status s = RunKernel("Softmax", attrs, {&x}, {&y});
  CHECK(s.message() == "Softmax: axis 2 is out of range for input [2, 2]");
}

}  // namespace
}  // namespace kiln::cpu::testing
