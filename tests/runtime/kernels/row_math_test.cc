// runtime/kernels/row_math.h's vectorized operations against the C library, on every lane
// position (rows of odd lengths cross the vector width) and the edge values, in the build this
// CPU runs (the floating-point tiers of scripts/test.sh run the others: docs/testing.md).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/kernels/row_math.h"

namespace kiln::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// -12 .. 12 in steps that hit many reduction intervals, the small-|x| branch of tanh, and the
// edges; 37 values, so the vector loops leave a tail.
std::vector<float> Arguments() {
  std::vector<float> v;
  for (int i = -16; i <= 16; ++i) v.push_back(0.75f * static_cast<float>(i) + 0.013f * static_cast<float>(i % 3));
  for (float x : {0.0f, 1e-5f, -0.0999f, 0.1001f}) v.push_back(x);
  return v;
}

TEST_CASE("row math: exp_sum, sigmoid and tanh match the C library within 1e-6 relative") {
  const RowMath& m = ActiveRowMath();
  const std::vector<float> args = Arguments();
  std::vector<float> e(args), s(args), t(args);
  for (float& x : e) x = std::min(x, 0.0f) - 20.0f;  // exp_sum's arguments, x - max <= 0
  const std::vector<float> e_in = e;
  const float sum = m.exp_sum(e.data(), static_cast<int64_t>(e.size()), 3.0f);
  m.sigmoid(s.data(), static_cast<int64_t>(s.size()));
  m.tanh(t.data(), static_cast<int64_t>(t.size()));
  double want_sum = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    INFO("x = " << args[i]);
    const double ex = std::exp(static_cast<double>(e_in[i]) - 3.0);
    want_sum += ex;
    CHECK(e[i] == doctest::Approx(ex).epsilon(1e-6));
    CHECK(s[i] == doctest::Approx(1.0 / (1.0 + std::exp(-static_cast<double>(args[i])))).epsilon(1e-6));
    const double th = std::tanh(static_cast<double>(args[i]));  // relative, also near 0
    CHECK(std::fabs(t[i] - th) <= 1e-6 * std::fabs(th));
  }
  CHECK(sum == doctest::Approx(want_sum).epsilon(1e-6));
}

TEST_CASE("row math: edge values: exp of -inf is 0, NaN stays NaN, infinities saturate, and add_max") {
  const RowMath& m = ActiveRowMath();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float e[] = {-kInf, -100.0f, nan, 0.0f};
  m.exp_sum(e, 4, 0.0f);
  CHECK(e[0] == 0.0f);
  CHECK(e[1] == 0.0f);
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 1.0f);
  float s[] = {-kInf, kInf, nan, 0.0f};
  m.sigmoid(s, 4);
  CHECK(s[0] < 1e-30f);
  CHECK(s[1] == 1.0f);
  CHECK(std::isnan(s[2]));
  CHECK(s[3] == 0.5f);
  float t[] = {-kInf, kInf, nan, 0.0f, -0.0f};
  m.tanh(t, 5);
  CHECK(t[0] == -1.0f);
  CHECK(t[1] == 1.0f);
  CHECK(std::isnan(t[2]));
  CHECK(t[3] == 0.0f);
  std::vector<float> x(37), b(37);
  for (int i = 0; i < 37; ++i) x[i] = static_cast<float>(i % 11), b[i] = i == 30 ? 100.0f : 0.5f;
  CHECK(m.add_max(x.data(), b.data(), 37) == 108.0f);  // x[30] = 8 + 100
  CHECK(x[0] == 0.5f);
  std::vector<float> masked(20, -kInf);
  CHECK(m.add_max(masked.data(), nullptr, 20) == -kInf);
}

}  // namespace
}  // namespace kiln::cpu
