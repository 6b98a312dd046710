#include "runtime/kernels/half_convert.h"

#include <cstring>

#include "runtime/half.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KILN_HAVE_F16C 1
#endif

namespace kiln::cpu {
namespace {

#if KILN_HAVE_F16C
// The build targets baseline x86-64, so these carry their own target; they run only when
// cpu_isa.cc found F16C. A tail of fewer than 8 goes through a zeroed block of 8, so every
// element takes the same instruction.
__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    uint16_t in[8] = {};
    float out[8];
    std::memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* src, uint16_t* dst, int64_t n) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kNearest));
  if (i < n) {
    float in[8] = {};
    uint16_t out[8];
    std::memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(in), kNearest));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}
#endif

}  // namespace

void HalvesToFloat(DType dt, const uint16_t* src, float* dst, int64_t n, CpuIsa isa) {
  if (dt == DType::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToFloat(src[i]);
    return;
  }
#if KILN_HAVE_F16C
  if (isa >= CpuIsa::kAvx2Fma) return HalfToFloatF16c(src, dst, n);
#endif
  (void)isa;
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalves(DType dt, const float* src, uint16_t* dst, int64_t n, CpuIsa isa) {
  if (dt == DType::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBF16(src[i]);
    return;
  }
#if KILN_HAVE_F16C
  if (isa >= CpuIsa::kAvx2Fma) return FloatToHalfF16c(src, dst, n);
#endif
  (void)isa;
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

}  // namespace kiln::cpu
