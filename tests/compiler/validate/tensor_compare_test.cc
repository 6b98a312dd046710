// The accuracy report's figures (compiler/validate/tensor_compare.h) against hand-computed
// values.
#include "compiler/validate/tensor_compare.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/half.h"

namespace kiln::validate {
namespace {

TensorView F32(const std::vector<float>& v) {
  return TensorView::Host(v.data(), DType::kFloat32, {static_cast<int64_t>(v.size())});
}

TEST_CASE("CompareTensors: float16 1/3 against float32 1/3, element by element") {
  const float third = 1.0f / 3.0f;
  const std::vector<uint16_t> half(3, FloatToHalf(third));
  const std::vector<float> ref(3, third);
  auto m = CompareTensors(TensorView::Host(half.data(), DType::kFloat16, {3}), F32(ref));
  REQUIRE(m.ok());
  // fp16(1/3) = 0x3555 = 1365/4096 = 0.333251953125; float32(1/3) = 11184811 / 2^25.
  CHECK(half[0] == 0x3555);
  const double err = 11184811.0 / 33554432.0 - 1365.0 / 4096.0;  // 8.13901424407959e-05
  CHECK(m->elements == 3);
  CHECK(m->compared == 3);
  CHECK(m->max_abs == err);
  CHECK(m->max_rel == doctest::Approx(err / (11184811.0 / 33554432.0)).epsilon(1e-15));
  CHECK(m->cosine == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(m->max_abs_index == 0);
  CHECK(m->nonfinite == 0);
}

TEST_CASE("CompareTensors: cosine similarity, abs error position") {
  auto m = CompareTensors(F32({1, 2, 3}), F32({4, 5, 6}));
  REQUIRE(m.ok());
  CHECK(m->cosine == doctest::Approx(32.0 / std::sqrt(14.0 * 77.0)).epsilon(1e-15));
  CHECK(m->max_abs == 3.0);
  CHECK(m->max_abs_index == 0);  // the first of the equal largest errors
  auto orthogonal = CompareTensors(F32({1, 0}), F32({0, 1}));
  REQUIRE(orthogonal.ok());
  CHECK(orthogonal->cosine == 0.0);
  auto zeros = CompareTensors(F32({0, 0}), F32({0, 0}));
  REQUIRE(zeros.ok());
  CHECK(zeros->cosine == 1.0);
  CHECK(zeros->max_rel == 0.0);
  auto one_zero = CompareTensors(F32({0, 0}), F32({1, 0}));
  REQUIRE(one_zero.ok());
  CHECK(one_zero->cosine == 0.0);
}

TEST_CASE("CompareTensors: relative error floors |reference| at 1e-3 of its largest magnitude") {
  // Errors 0.5 at 1000 (5e-4 relative) and 0.002 at 0.001: relative to the floor 1000 * 1e-3 = 1,
  // 0.002 (not 2.0, its error relative to 0.001).
  auto m = CompareTensors(F32({1000.5f, 0.003f}), F32({1000.0f, 0.001f}));
  REQUIRE(m.ok());
  CHECK(m->max_rel == doctest::Approx(static_cast<double>(0.003f) - static_cast<double>(0.001f)).epsilon(1e-12));
  CHECK(m->max_abs == 0.5);
  CHECK(m->max_abs_index == 0);
}

TEST_CASE("CompareTensors: inf and NaN are counted, not compared") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto m = CompareTensors(F32({inf, 2, nan, 4}), F32({1, nan, 3, 5}));
  REQUIRE(m.ok());
  CHECK(m->nonfinite == 2);      // inf and NaN where the reference is finite
  CHECK(m->ref_nonfinite == 1);  // the reference's NaN
  CHECK(m->compared == 1);
  CHECK(m->max_abs == 1.0);
  CHECK(m->max_abs_index == 3);
}

TEST_CASE("CompareTensors: shapes must match") {
  auto m = CompareTensors(F32({1, 2, 3}), F32({1, 2}));
  REQUIRE(!m.ok());
  CHECK(m.status().code() == StatusCode::kInvalidArgument);
  CHECK(m.status().message() == "cannot compare float32[3] with reference float32[2]");
}

TEST_CASE("CountNonFinite: float32, float16, bfloat16, float64 - integers never") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> f{1, inf, -inf, std::nanf(""), 65504.0f};
  CHECK(CountNonFinite(f.data(), DType::kFloat32, 5) == 3);
  const std::vector<uint16_t> h{0x7c00, 0xfc00, 0x7e00, 0x7bff, FloatToHalf(1e5f)};  // 1e5 rounds to inf
  CHECK(CountNonFinite(h.data(), DType::kFloat16, 5) == 4);
  const std::vector<uint16_t> b{0x7f80, 0x7fc0, FloatToBF16(1e5f), FloatToBF16(3e38f)};
  CHECK(CountNonFinite(b.data(), DType::kBFloat16, 4) == 2);
  const std::vector<double> d{1.0, std::numeric_limits<double>::infinity()};
  CHECK(CountNonFinite(d.data(), DType::kFloat64, 2) == 1);
  const std::vector<int32_t> i{-1, 0x7f800000};
  CHECK(CountNonFinite(i.data(), DType::kInt32, 2) == 0);
}

}  // namespace
}  // namespace kiln::validate
