// gemv.h's product built for AVX-512, and the choice of build. The headers come before the
// instruction-set region, so that no inline function of theirs is compiled with AVX code
// (cmake/check_isa_comdat.sh); everything inside it has internal linkage.
#include "runtime/kernels/gemv.h"

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
// Rows per block: four accumulators beside x's vector; more rows measured slower (8: 1.90 ms,
// 16: 2.00 ms on the case above), fewer loads in flight per row.
constexpr int kRows = 4;

// The sum of v's lanes: halves, quarters, then within 128 bits, all in the 512-bit register.
float LaneSum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));  // 256-bit halves swapped
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));  // 128-bit quarters swapped in pairs
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e));        // 64-bit pairs
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xb1));        // neighbours
  return _mm512_cvtss_f32(v);
}

template <int R>
void Rows(const float* a, int64_t lda, const float* x, int64_t cols, float* y) {
  __m512 acc[R];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t e = 0; e < cols; e += kLanes) {
    const int64_t left = cols - e;
    const __mmask16 m = left >= kLanes ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + e);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) acc[i] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, a + i * lda + e), acc[i]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) y[i] += LaneSum(acc[i]);
}

void Gemv(const float* a, int64_t lda, const float* x, int64_t rows, int64_t cols, float* y) {
  int64_t j = 0;
  for (; j + kRows <= rows; j += kRows) Rows<kRows>(a + j * lda, lda, x, cols, y + j);
  for (; j < rows; ++j) Rows<1>(a + j * lda, lda, x, cols, y + j);
}

}  // namespace

extern const GemvFn kGemv;
const GemvFn kGemv = Gemv;

}  // namespace kiln::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif

namespace kiln::cpu {

GemvFn ActiveGemv() {
#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
  if (ActiveCpuIsa() == CpuIsa::kAvx512) return avx512::kGemv;
#endif
  return nullptr;
}

}  // namespace kiln::cpu
