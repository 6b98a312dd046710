// The CPU backend's GEMM (runtime/kernels/gemm.h: oneDNN's dnnl_sgemm from 16^3 multiply-adds
// and OpenBLAS below in the normal build, so the shapes below run both) and Kiln's
// portable GEMM (runtime/kernels/gemm_portable.h, the runtime's GEMM when built with
// KILN_WITH_BLAS=OFF; tests/CMakeLists.txt compiles it into this binary when the runtime
// has BLAS) on the same products: each against a float64/long double sum computed here,
// and the two against each other. Odd shapes cross the portable GEMM's tile (4 x 8) and
// block (64 rows, 256 of K) edges; padded leading dimensions, both transposes, alpha/beta.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/gemm_portable.h"
#include "tests/random_floats.h"

namespace kiln::cpu {
namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  double alpha, beta;
};

// Operands of one case, with leading dimensions padded by 3 (pads hold NaN, so a read past
// a row shows), and C's starting value (NaN when beta == 0: BLAS does not read C then).
template <typename T>
struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<T> a, b, c;
};

template <typename T>
Operands<T> MakeOperands(const Case& t, uint32_t seed) {
  const int64_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
  const int64_t b_rows = t.tb ? t.n : t.k, b_cols = t.tb ? t.k : t.n;
  Operands<T> o{a_cols + 3, b_cols + 3, t.n + 3, {}, {}, {}};
  const T nan = std::numeric_limits<T>::quiet_NaN();
  auto fill = [&](std::vector<T>& v, int64_t rows, int64_t cols, int64_t ld, uint32_t s, bool all_nan) {
    const std::vector<float> values = kiln::testing::RandomFloats(static_cast<size_t>(rows * cols), s, -1.0f, 1.0f);
    v.assign(static_cast<size_t>(rows * ld), nan);
    if (all_nan) return;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t q = 0; q < cols; ++q) v[r * ld + q] = static_cast<T>(values[r * cols + q]);
  };
  fill(o.a, a_rows, a_cols, o.lda, seed, false);
  fill(o.b, b_rows, b_cols, o.ldb, seed + 1, false);
  fill(o.c, t.m, t.n, o.ldc, seed + 2, t.beta == 0);
  return o;
}

// alpha * op(A) op(B) + beta * C in long double, and the same with absolute values: the
// scale of the rounding error a float sum of these terms may make.
template <typename T>
void Reference(const Case& t, const Operands<T>& o, std::vector<long double>& ref, std::vector<long double>& mag) {
  ref.assign(static_cast<size_t>(t.m * t.n), 0);
  mag.assign(ref.size(), 0);
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      long double sum = 0, abs_sum = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const long double av = t.ta ? o.a[p * o.lda + i] : o.a[i * o.lda + p];
        const long double bv = t.tb ? o.b[j * o.ldb + p] : o.b[p * o.ldb + j];
        sum += av * bv;
        abs_sum += std::fabs(av * bv);
      }
      const long double cv = t.beta == 0 ? 0 : o.c[i * o.ldc + j];
      ref[i * t.n + j] = t.alpha * sum + t.beta * cv;
      mag[i * t.n + j] = std::fabs(t.alpha) * abs_sum + std::fabs(t.beta * cv);
    }
  }
}

// Runs `gemm` on fresh operands and returns C (padding included).
template <typename T, typename Gemm>
std::vector<T> Run(const Case& t, Gemm gemm, uint32_t seed) {
  Operands<T> o = MakeOperands<T>(t, seed);
  gemm(t.ta, t.tb, t.m, t.n, t.k, static_cast<T>(t.alpha), o.a.data(), o.lda, o.b.data(), o.ldb,
       static_cast<T>(t.beta), o.c.data(), o.ldc);
  return o.c;
}

// Both GEMMs of one dtype on every case: within the classic bound of a sum of k + 2 rounded
// terms, (k + 2) u times the reference's magnitude (Higham, "Accuracy and Stability of
// Numerical Algorithms", 3.1; u = epsilon / 2), which holds for every summation order and with
// or without FMA, so that no GEMM kernel of any CPU can fail it by rounding alone; within twice
// that of each other; and C's padding untouched. A wrong term is off by about
// magnitude / k, far beyond (k + 2) u.
template <typename T, typename Backend, typename Portable>
void CheckAll(Backend backend, Portable portable) {
  const long double u = std::numeric_limits<T>::epsilon() / 2;
  const int64_t shapes[][3] = {{1, 1, 1},    {3, 5, 7},    {4, 8, 256},  {5, 9, 257},
                               {67, 33, 300}, {1, 300, 513}, {130, 1, 70}, {64, 64, 64}};
  const double scalars[][2] = {{1, 0}, {0.5, -2}, {-1.5, 1}};
  uint32_t seed = 1;
  std::vector<long double> ref, mag;
  for (const auto& s : shapes) {
    for (int transposes = 0; transposes < 4; ++transposes) {
      for (const auto& ab : scalars) {
        const Case t{(transposes & 1) != 0, (transposes & 2) != 0, s[0], s[1], s[2], ab[0], ab[1]};
        INFO("ta=" << t.ta << " tb=" << t.tb << " m=" << t.m << " n=" << t.n << " k=" << t.k
                   << " alpha=" << t.alpha << " beta=" << t.beta);
        seed += 3;
        Reference(t, MakeOperands<T>(t, seed), ref, mag);
        const std::vector<T> x = Run<T>(t, backend, seed), y = Run<T>(t, portable, seed);
        int bad = 0;
        for (int64_t i = 0; i < t.m; ++i) {
          for (int64_t j = 0; j < t.n + 3; ++j) {
            const long double xv = x[i * (t.n + 3) + j], yv = y[i * (t.n + 3) + j];
            if (j >= t.n) {  // padding: still NaN
              bad += !std::isnan(xv) || !std::isnan(yv);
              continue;
            }
            const long double r = ref[i * t.n + j], tol = (t.k + 2) * u * mag[i * t.n + j] + 1e-30L;
            bad += !(std::fabs(xv - r) <= tol) + !(std::fabs(yv - r) <= tol) + !(std::fabs(xv - yv) <= 2 * tol);
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("portable GEMM: float32 equals the backend's (oneDNN and OpenBLAS) on odd shapes, transposes, alpha and beta") {
  CheckAll<float>(Sgemm, portable::Sgemm);
}

TEST_CASE("portable GEMM: float32 equals the build's BLAS (OpenBLAS) on odd shapes, transposes, alpha and beta") {
  CheckAll<float>(BlasSgemm, portable::Sgemm);
}

TEST_CASE("portable GEMM: float64 equals the backend's (OpenBLAS) on odd shapes, transposes, alpha and beta") {
  CheckAll<double>(Dgemm, portable::Dgemm);
}

TEST_CASE("portable GEMM: k == 0 scales C by beta, and beta == 0 ignores NaN in C") {
  float c[2] = {std::numeric_limits<float>::quiet_NaN(), 4.0f};
  const float a = 1.0f, b = 1.0f;
  portable::Sgemm(false, false, 1, 1, 0, 1.0f, &a, 1, &b, 1, 0.0f, &c[0], 1);
  portable::Sgemm(false, false, 1, 1, 0, 1.0f, &a, 1, &b, 1, 0.5f, &c[1], 1);
  CHECK(c[0] == 0.0f);
  CHECK(c[1] == 2.0f);
}

}  // namespace
}  // namespace kiln::cpu
