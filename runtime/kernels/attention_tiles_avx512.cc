// attention_tiles.h's products built for AVX-512, and the choice of build. The headers come
// before the instruction-set region, so that no inline function of theirs is compiled with AVX
// code (cmake/check_isa_comdat.sh); everything inside it has internal linkage.
#include "runtime/kernels/attention_tiles.h"

#include "runtime/cpu/arch/x86/cpu_isa.h"

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl")
// GCC 12's shuffle intrinsics pass _mm512_undefined_ps() as the unused merge source, which
// -Wmaybe-uninitialized flags (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu::avx512 {
namespace {

constexpr int kLanes = 16;

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// The lanes of vector v (of 16 floats) below n floats.
__mmask16 LanesBelow(int64_t n, int v) {
  const int64_t left = n - int64_t{v} * kLanes;
  return left >= kLanes ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
}

// Rows of the score tile per register block, and its keys (a panel: 4 vectors of 16): 24
// accumulators.
constexpr int kScoreRows = 6;

// Scores of the keys [0, cols) of one panel of at most NV * 16 keys, every row; kt is the
// panel, [d, 64]. With `lane_max`, lane_max[r][l] becomes the max of itself and row r's stored
// scores in lane l (-inf in the lanes past cols; NaNs aside: max_ps keeps its second operand
// when either is NaN).
template <int NV>
void ScoresPanel(const float* q, int64_t ldq, const float* kt, int64_t rows, int64_t cols, int64_t d, float scale,
                 const float* bias, int64_t ldb, float* s, int64_t lds, __m512* lane_max) {
  __mmask16 store[NV];
  for (int v = 0; v < NV; ++v) store[v] = LanesBelow(cols, v);
  const __m512 k_scale = _mm512_set1_ps(scale);
  for (int64_t r0 = 0; r0 < rows; r0 += kScoreRows) {
    const int64_t n = Min(kScoreRows, rows - r0);
    const float* qr[kScoreRows];  // rows past the last repeat it; their results are not stored
    for (int i = 0; i < kScoreRows; ++i) qr[i] = q + (r0 + Min(i, n - 1)) * ldq;
    __m512 acc[kScoreRows][NV];
#pragma GCC unroll 8
    for (int i = 0; i < kScoreRows; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t e = 0; e < d; ++e) {
      __m512 k[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) k[v] = _mm512_loadu_ps(kt + e * kKeyPanel + v * kLanes);
#pragma GCC unroll 8
      for (int i = 0; i < kScoreRows; ++i) {
        const __m512 b = _mm512_set1_ps(qr[i][e]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(b, k[v], acc[i][v]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kScoreRows; ++i) {
      if (i >= n) break;
      __m512 m = lane_max ? lane_max[r0 + i] : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m512 x = _mm512_mul_ps(acc[i][v], k_scale);
        if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(store[v], bias + (r0 + i) * ldb + v * kLanes));
        _mm512_mask_storeu_ps(s + (r0 + i) * lds + v * kLanes, store[v], x);
        m = _mm512_mask_max_ps(m, store[v], x, m);
      }
      if (lane_max) lane_max[r0 + i] = m;
    }
  }
}

// The largest of v's lanes (none is NaN), in the 512-bit register.
float LaneMax(__m512 v) {
  v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));
  v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));
  v = _mm512_max_ps(v, _mm512_permute_ps(v, 0x4e));
  v = _mm512_max_ps(v, _mm512_permute_ps(v, 0xb1));
  return _mm512_cvtss_f32(v);
}

// Rows per pass over the panels when the row maxima are asked for: their lane maxima (8 KiB)
// stay on the stack, in L1. The Attention kernel's query tiles are 128 rows: one pass.
constexpr int64_t kMaxRowsPerPass = 128;

void Scores(const float* q, int64_t ldq, const float* kt, int64_t rows, int64_t cols, int64_t d, float scale,
            const float* bias, int64_t ldb, float* s, int64_t lds, float* row_max) {
  __m512 lanes[kMaxRowsPerPass];
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRowsPerPass) {
    const int64_t n = Min(kMaxRowsPerPass, rows - r0);
    __m512* lane_max = row_max ? lanes : nullptr;
    if (lane_max)
      for (int64_t i = 0; i < n; ++i) lane_max[i] = _mm512_set1_ps(-__builtin_inff());
    const float* qr = q + r0 * ldq;
    const float* br = bias ? bias + r0 * ldb : nullptr;
    float* sr = s + r0 * lds;
    const float* kp = kt;
    int64_t j = 0;
    for (; j + kKeyPanel <= cols; j += kKeyPanel, kp += d * kKeyPanel)
      ScoresPanel<4>(qr, ldq, kp, n, kKeyPanel, d, scale, br ? br + j : nullptr, ldb, sr + j, lds, lane_max);
    // The last panel: one vector of keys, or the whole zero-padded panel with the stores masked
    // (two builds rather than four keep the runtime's size; 17 to 48 keys pay at most 47 more).
    const int64_t left = cols - j;
    if (left > kLanes) ScoresPanel<4>(qr, ldq, kp, n, left, d, scale, br ? br + j : nullptr, ldb, sr + j, lds, lane_max);
    else if (left > 0) ScoresPanel<1>(qr, ldq, kp, n, left, d, scale, br ? br + j : nullptr, ldb, sr + j, lds, lane_max);
    if (lane_max)
      for (int64_t i = 0; i < n; ++i) row_max[r0 + i] = LaneMax(lane_max[i]);
  }
}

// Output rows per register block for NV vectors of the value head (1, 2 or 4): 12, 24 and 24
// accumulators, with the NV vectors of V's row and the broadcast P beside them in the 32 registers.
constexpr int ValueRows(int nv) { return nv == 4 ? 6 : 12; }

template <int NV>
void ValuesChunk(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t rows, int64_t cols, int64_t dv,
                 bool accumulate, float* o, int64_t ldo) {
  constexpr int R = ValueRows(NV);
  __mmask16 lanes[NV];
  for (int u = 0; u < NV; ++u) lanes[u] = LanesBelow(dv, u);
  for (int64_t r0 = 0; r0 < rows; r0 += R) {
    const int64_t n = Min(R, rows - r0);
    const float* pr[R];  // rows past the last repeat it; their results are not stored
    for (int i = 0; i < R; ++i) pr[i] = p + (r0 + Min(i, n - 1)) * ldp;
    __m512 acc[R][NV];
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u)
        acc[i][u] = accumulate && i < n ? _mm512_maskz_loadu_ps(lanes[u], o + (r0 + i) * ldo + u * kLanes)
                                        : _mm512_setzero_ps();
    for (int64_t j = 0; j < cols; ++j) {
      __m512 x[NV];
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) x[u] = _mm512_maskz_loadu_ps(lanes[u], v + j * ldv + u * kLanes);
#pragma GCC unroll 12
      for (int i = 0; i < R; ++i) {
        const __m512 b = _mm512_set1_ps(pr[i][j]);
#pragma GCC unroll 4
        for (int u = 0; u < NV; ++u) acc[i][u] = _mm512_fmadd_ps(b, x[u], acc[i][u]);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      if (i >= n) break;
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) _mm512_mask_storeu_ps(o + (r0 + i) * ldo + u * kLanes, lanes[u], acc[i][u]);
    }
  }
}

// Keys per pass over the rows: their values (64 x 64 floats, 16 KiB) stay in L1 meanwhile.
constexpr int64_t kValueChunk = 64;

template <int NV>
void ValuesOf(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t rows, int64_t cols, int64_t dv,
              bool accumulate, float* o, int64_t ldo) {
  for (int64_t j0 = 0; j0 < cols; j0 += kValueChunk)
    ValuesChunk<NV>(p + j0, ldp, v + j0 * ldv, ldv, rows, Min(kValueChunk, cols - j0), dv, accumulate || j0 > 0, o, ldo);
}

void Values(const float* p, int64_t ldp, const float* v, int64_t ldv, int64_t rows, int64_t cols, int64_t dv,
            bool accumulate, float* o, int64_t ldo) {
  // Value heads up to 16, 32 and 64 floats (48 runs as 64 with its last vector masked).
  if (dv > 2 * kLanes) ValuesOf<4>(p, ldp, v, ldv, rows, cols, dv, accumulate, o, ldo);
  else if (dv > kLanes) ValuesOf<2>(p, ldp, v, ldv, rows, cols, dv, accumulate, o, ldo);
  else if (dv > 0) ValuesOf<1>(p, ldp, v, ldv, rows, cols, dv, accumulate, o, ldo);
}

}  // namespace

extern const AttentionTiles kTiles;
const AttentionTiles kTiles = {Scores, Values};

}  // namespace kiln::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif

namespace kiln::cpu {

const AttentionTiles* ActiveAttentionTiles() {
#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
  if (ActiveCpuIsa() == CpuIsa::kAvx512) return &avx512::kTiles;
#endif
  return nullptr;
}

}  // namespace kiln::cpu
