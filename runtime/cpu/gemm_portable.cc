#include "runtime/cpu/gemm_portable.h"

#include <algorithm>

namespace kiln::cpu::portable {
namespace {

// 16-byte vectors (GCC's and Clang's vector extension, which lowers to SSE2 on x86-64 and
// NEON on aarch64, and to scalar code elsewhere): 4 floats or 2 doubles.
template <typename T>
struct Vec16;
template <>
struct Vec16<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct Vec16<double> {
  typedef double type __attribute__((vector_size(16)));
};

// Tile of C held in registers: kMr rows by two vectors (8 floats, 4 doubles): 8 accumulators
// plus a row of B and a broadcast, within SSE2's 16 and NEON's 32 registers.
constexpr int64_t kMr = 4;
// K per block (the packed strip of B, kKc x 2 vectors, stays in L1) and rows of A per block
// (kMc x kKc, 64 KiB of float32, stays in L2 while the strips of B pass over it).
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 64;

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  using V = typename Vec16<T>::type;
  constexpr int64_t vl = sizeof(V) / sizeof(T);
  constexpr int64_t nr = 2 * vl;
  // op(A)(i, p) is a[i * a_row + p * a_col]; op(B)(p, j) is b[p * b_row + j * b_col].
  const int64_t a_row = ta ? 1 : lda, a_col = ta ? lda : 1;
  const int64_t b_row = tb ? 1 : ldb, b_col = tb ? ldb : 1;
  // k == 0 is one empty block, which still scales C by beta.
  for (int64_t p0 = 0; p0 == 0 || p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    const bool first = p0 == 0;
    for (int64_t i0 = 0; i0 < m; i0 += kMc) {
      const int64_t i_end = std::min(m, i0 + kMc);
      for (int64_t j0 = 0; j0 < n; j0 += nr) {
        const int64_t cols = std::min(nr, n - j0);
        // op(B)[p0 : p0 + kc, j0 : j0 + nr], row by row, zero past column n.
        V strip[kKc][2];
        for (int64_t p = 0; p < kc; ++p) {
          const T* src = b + (p0 + p) * b_row + j0 * b_col;
          for (int64_t j = 0; j < nr; ++j) strip[p][j / vl][j % vl] = j < cols ? src[j * b_col] : T(0);
        }
        for (int64_t i = i0; i < i_end; i += kMr) {
          const int64_t rows = std::min(kMr, i_end - i);
          // Rows past m repeat the last one (in bounds); their sums are not stored.
          const T* arow[kMr];
          for (int64_t r = 0; r < kMr; ++r) arow[r] = a + (i + std::min(r, rows - 1)) * a_row + p0 * a_col;
          V acc[kMr][2] = {};
          for (int64_t p = 0; p < kc; ++p) {
            const V b0 = strip[p][0], b1 = strip[p][1];
            for (int64_t r = 0; r < kMr; ++r) {
              const T av = arow[r][p * a_col];
              acc[r][0] += av * b0;
              acc[r][1] += av * b1;
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            T* out = c + (i + r) * ldc + j0;
            for (int64_t j = 0; j < cols; ++j) {
              const T prior = first ? (beta == T(0) ? T(0) : beta * out[j]) : out[j];
              out[j] = alpha * acc[r][j / vl][j % vl] + prior;
            }
          }
        }
      }
    }
  }
}

}  // namespace

void Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace kiln::cpu::portable
