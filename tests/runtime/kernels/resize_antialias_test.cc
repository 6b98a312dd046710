// Resize with antialias = 1: the ONNX reference's stretched, normalised filters, checked
// on x = [1, 2, 3, 4] halved (half_pixel: output 0 samples x = 0.5, output 1 x = 2.5).
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

std::vector<float> Halve(const char* mode, bool exclude_outside) {
  auto x = Floats({4}, {1, 2, 3, 4});
  auto roi = Absent();
  auto scales = Floats({1}, {0.5f});
  auto y = Output(DType::kFloat32, {2});
  AttrMap a;
  a.SetString("mode", mode);
  a.SetInt("antialias", 1);
  a.SetInt("exclude_outside", exclude_outside ? 1 : 0);
  Status s = RunKernel("Resize", a, {&x, &roi, &scales}, {&y});
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return y.values<float>();
}

// Linear at scale 1/2: 4 taps, tent 1 - |d|/2 at d = -1.5, -0.5, 0.5, 1.5 -> 0.25, 0.75,
// 0.75, 0.25, normalised by 2. Output 0 reads positions -1..2 (edge-clamped: 1, 1, 2, 3):
// 0.125 + 0.375 + 0.75 + 0.375 = 1.625; output 1 reads 1..4 (2, 3, 4, 4): 3.375.
// exclude_outside drops the outside tap and renormalises by 1.75: 3 / 1.75 and 5.75 / 1.75.
TEST_CASE("Resize antialias linear downsampling") {
  KILN_CHECK_FLOATS(Halve("linear", false), (std::vector<float>{1.625f, 3.375f}));
  KILN_CHECK_FLOATS(Halve("linear", true), (std::vector<float>{3 / 1.75f, 5.75f / 1.75f}));
}

// Cubic (A = -0.75) at scale 1/2: 8 taps at |d|/2 = 1.75, 1.25, 0.75, 0.25, 0.25, ...:
// -0.03515625, -0.10546875, 0.26171875, 0.87890625 (sum 2 over the 8), so output 0 =
// (1 · 1 + 2 · 0.87890625 + 3 · 0.26171875 - 4 · 0.140625) / 2 = 1.490234375 and
// output 1 = 3.509765625 by symmetry; exclude_outside keeps the in-range taps only.
TEST_CASE("Resize antialias cubic downsampling") {
  KILN_CHECK_FLOATS(Halve("cubic", false), (std::vector<float>{1.490234375f, 3.509765625f}));
  KILN_CHECK_FLOATS(Halve("cubic", true), (std::vector<float>{1.56734694f, 3.43265306f}));
}

TEST_CASE("Resize antialias with nearest mode is an error") {
  auto x = Floats({4}, {1, 2, 3, 4});
  auto roi = Absent();
  auto scales = Floats({1}, {0.5f});
  auto y = Output(DType::kFloat32, {2});
  AttrMap a;
  a.SetInt("antialias", 1);
  CHECK(RunKernel("Resize", a, {&x, &roi, &scales}, {&y}).message() ==
        "Resize: antialias=1 needs mode linear or cubic");
}

}  // namespace
}  // namespace kiln::cpu::testing
