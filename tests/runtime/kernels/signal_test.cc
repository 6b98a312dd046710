// DFT, STFT, windows and MelWeightMatrix against hand-computed values.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

TEST_CASE("DFT: forward, one-sided, inverse and inverse one-sided (irfft)") {
  // DFT of [1, 2, 3, 4]: 10, -2 + 2i, -2, -2 - 2i.
  AttrMap fwd;
  fwd.SetInt("axis", 1);
  TestTensor x = Floats({1, 4, 1}, {1, 2, 3, 4});
  TestTensor y = Output(DType::kFloat32, {1, 4, 2});
  REQUIRE(RunKernel("DFT", fwd, {&x}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{10, 0, -2, 2, -2, 0, -2, -2}));
  AttrMap one = fwd;
  one.SetInt("onesided", 1);
  TestTensor y1 = Output(DType::kFloat32, {1, 3, 2});
  REQUIRE(RunKernel("DFT", one, {&x}, {&y1}).ok());
  KILN_CHECK_FLOATS(y1.values<float>(), (std::vector<float>{10, 0, -2, 2, -2, 0}));
  AttrMap inv = fwd;
  inv.SetInt("inverse", 1);
  TestTensor back = Output(DType::kFloat32, {1, 4, 2});
  REQUIRE(RunKernel("DFT", inv, {&y}, {&back}).ok());
  KILN_CHECK_FLOATS(back.values<float>(), (std::vector<float>{1, 0, 2, 0, 3, 0, 4, 0}));
  AttrMap irfft = inv;
  irfft.SetInt("onesided", 1);
  TestTensor real = Output(DType::kFloat32, {1, 4, 1});
  REQUIRE(RunKernel("DFT", irfft, {&y1}, {&real}).ok());
  KILN_CHECK_FLOATS(real.values<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST_CASE("STFT: two frames of two samples, one-sided") {
  // Frames [1, 2] and [3, 4]: bins (3, -1) and (7, -1).
  TestTensor x = Floats({1, 4, 1}, {1, 2, 3, 4}), step = Int64s({}, {2}), len = Int64s({}, {2});
  TestTensor y = Output(DType::kFloat32, {1, 2, 2, 2}), none = Absent();
  REQUIRE(RunKernel("STFT", {}, {&x, &step, &none, &len}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{3, 0, -1, 0, 7, 0, -1, 0}));
}

TEST_CASE("Windows: periodic and symmetric") {
  TestTensor size = Int64s({}, {4});
  TestTensor y = Output(DType::kFloat32, {4});
  REQUIRE(RunKernel("HannWindow", {}, {&size}, {&y}).ok());
  KILN_CHECK_FLOATS(y.values<float>(), (std::vector<float>{0, 0.5f, 1, 0.5f}));
  AttrMap sym;
  sym.SetInt("periodic", 0);
  TestTensor s3 = Int64s({}, {3});
  TestTensor y3 = Output(DType::kFloat32, {3});
  REQUIRE(RunKernel("HammingWindow", sym, {&s3}, {&y3}).ok());
  KILN_CHECK_FLOATS(y3.values<float>(), (std::vector<float>{4.0f / 46, 1, 4.0f / 46}));  // 25/46 -+ 21/46
  REQUIRE(RunKernel("BlackmanWindow", sym, {&s3}, {&y3}).ok());
  CHECK(y3.values<float>()[1] == doctest::Approx(1.0));  // 0.42 + 0.5 + 0.08
  CHECK(std::abs(y3.values<float>()[0]) < 1e-7f);        // 0.42 - 0.5 + 0.08
}

}  // namespace
}  // namespace kiln::cpu::testing
