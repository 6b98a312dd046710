// Scalar activation formulas shared by the unary kernels (unary.cc) and the MatMul/Gemm/Conv
// epilogues (epilogue.cc), so that a folded activation gives the same bits as the separate
// op it replaces. Each function is a template over float and double.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {

template <typename T>
inline T ReluOf(T x) {
  return MaxNaN(x, T(0));
}

template <typename T>
inline T SigmoidOf(T x) {
  // Split by sign so exp never overflows.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// SiLU (Swish): x * Sigmoid(x), as an exporter writes it with Sigmoid and Mul.
template <typename T>
inline T SiluOf(T x) {
  return x * SigmoidOf(x);
}

// Gelu with approximate = "none".
template <typename T>
inline T GeluOf(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.7071067811865476)));
}

// Gelu with approximate = "tanh".
template <typename T>
inline T GeluTanhOf(T x) {
  const T k = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
  return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}

template <typename T>
inline T HardSwishOf(T x) {
  return x * ClampNaN(x / T(6) + T(0.5), T(0), T(1));
}

// max(x, 0) per lane with NaN passed on: MAXPS returns its second operand unless the first
// is greater, so max(0, x) keeps a NaN x (and -0). GCC will not if-convert the plain loop,
// and the branch on the sign of activations mispredicts half the time. x may equal y.
inline void ReluFloat(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__SSE__)
  const __m128 zero = _mm_setzero_ps();
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_max_ps(zero, _mm_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = ReluOf(x[i]);
}

// HardSwishOf per lane, the same bits: x / 6 + 0.5 (DIVPS, ADDPS round as the scalar ops
// do), then MaxNaN(t, 0) as MAXPS(0, t) and MinNaN(t, 1) as MINPS(1, t), which return t when
// it is NaN, as the scalar selects do. x may equal y.
inline void HardSwishFloat(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__SSE__)
  const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f), six = _mm_set1_ps(6.0f), half = _mm_set1_ps(0.5f);
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    const __m128 t = _mm_min_ps(one, _mm_max_ps(zero, _mm_add_ps(_mm_div_ps(v, six), half)));
    _mm_storeu_ps(y + i, _mm_mul_ps(v, t));
  }
#endif
  for (; i < n; ++i) y[i] = HardSwishOf(x[i]);
}

}  // namespace kiln::cpu
