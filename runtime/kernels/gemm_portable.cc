#include "runtime/kernels/gemm_portable.h"

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

// acc[r][0 : NV] = sum over p < kc of op(A)(row r, p) * strip[p] (NV vectors of the strip's
// two), for the first R rows; op(A)(row r, p) is arow[r][p * a_col]. Templates on R and NV
// so that a tail of 1-3 rows (a matrix-vector product, m == 1) or of at most one vector of
// columns costs what it computes.
template <int R, int NV, typename T, typename V>
void Tile(const T* const* arow, int64_t a_col, const T* strip, int64_t kc, V (*acc)[2]) {
  constexpr int64_t vl = sizeof(V) / sizeof(T);
  V sum[R][NV] = {};
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], strip + p * 2 * vl + v * vl, sizeof(V));
    for (int r = 0; r < R; ++r) {
      const T av = arow[r][p * a_col];
      for (int v = 0; v < NV; ++v) sum[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = sum[r][v];
}

// Tile for `rows` (1 to kMr) and `vectors` (1 or 2).
template <typename T, typename V>
void AnyTile(int64_t rows, int64_t vectors, const T* const* arow, int64_t a_col, const T* strip, int64_t kc,
             V (*acc)[2]) {
  auto tile = [&]<int R>() {
    if (vectors == 1) Tile<R, 1>(arow, a_col, strip, kc, acc);
    else Tile<R, 2>(arow, a_col, strip, kc, acc);
  };
  switch (rows) {
    case 1: tile.template operator()<1>(); break;
    case 2: tile.template operator()<2>(); break;
    case 3: tile.template operator()<3>(); break;
    default: tile.template operator()<4>(); break;
  }
}

// Fewer rows than a tile with B transposed (a matrix-vector product, an LSTM step at batch
// 1): packing B would cost as much as the product, so each output is a dot product of two
// contiguous rows, op(A)'s row i (A not transposed) and B's row j.
template <typename T>
void DotRows(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
             T* c, int64_t ldc) {
  using V = typename Vec16<T>::type;
  constexpr int64_t vl = sizeof(V) / sizeof(T);
  for (int64_t i = 0; i < m; ++i) {
    const T* x = a + i * lda;
    for (int64_t j = 0; j < n; ++j) {
      const T* y = b + j * ldb;
      V s0 = {}, s1 = {};
      int64_t p = 0;
      for (; p + 2 * vl <= k; p += 2 * vl) {
        V x0, x1, y0, y1;
        __builtin_memcpy(&x0, x + p, sizeof(V));
        __builtin_memcpy(&x1, x + p + vl, sizeof(V));
        __builtin_memcpy(&y0, y + p, sizeof(V));
        __builtin_memcpy(&y1, y + p + vl, sizeof(V));
        s0 += x0 * y0;
        s1 += x1 * y1;
      }
      s0 += s1;
      T sum = 0;
      for (int64_t v = 0; v < vl; ++v) sum += s0[v];
      for (; p < k; ++p) sum += x[p] * y[p];
      T& out = c[i * ldc + j];
      out = alpha * sum + (beta == T(0) ? T(0) : beta * out);
    }
  }
}

template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (tb && !ta && m < kMr) return DotRows(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  using V = typename Vec16<T>::type;
  constexpr int64_t vl = sizeof(V) / sizeof(T);
  constexpr int64_t nr = 2 * vl;
  // op(A)(i, p) is a[i * a_row + p * a_col].
  const int64_t a_row = ta ? 1 : lda, a_col = ta ? lda : 1;
  // k == 0 is one empty block, which still scales C by beta.
  for (int64_t p0 = 0; p0 == 0 || p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    const bool first = p0 == 0;
    for (int64_t i0 = 0; i0 < m; i0 += kMc) {
      const int64_t i_end = std::min(m, i0 + kMc);
      for (int64_t j0 = 0; j0 < n; j0 += nr) {
        const int64_t cols = std::min(nr, n - j0);
        // op(B)[p0 : p0 + kc, j0 : j0 + nr], row by row, zero past column n.
        alignas(16) T strip[kKc * nr];
        if (!tb) {  // rows of B are contiguous
          for (int64_t p = 0; p < kc; ++p) {
            const T* src = b + (p0 + p) * ldb + j0;
            if (cols == nr) __builtin_memcpy(strip + p * nr, src, sizeof(T) * nr);
            else for (int64_t j = 0; j < nr; ++j) strip[p * nr + j] = j < cols ? src[j] : T(0);
          }
        } else {  // columns of B are: read each one along K
          for (int64_t j = 0; j < nr; ++j) {
            const T* src = j < cols ? b + (j0 + j) * ldb + p0 : nullptr;
            for (int64_t p = 0; p < kc; ++p) strip[p * nr + j] = src ? src[p] : T(0);
          }
        }
        for (int64_t i = i0; i < i_end; i += kMr) {
          const int64_t rows = std::min(kMr, i_end - i);
          const T* arow[kMr];
          for (int64_t r = 0; r < rows; ++r) arow[r] = a + (i + r) * a_row + p0 * a_col;
          V acc[kMr][2];
          AnyTile(rows, cols <= vl ? 1 : 2, arow, a_col, strip, kc, acc);
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
