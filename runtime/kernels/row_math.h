// Row operations of the CPU kernels, vectorized: the Attention kernel's online softmax
// (transformer.cc) and the recurrent kernels' gate activations (lstm.cc, rnn.cc). Built for
// baseline x86-64 (row_math.cc), AVX2 (row_math_avx2.cc) and AVX-512 (row_math_avx512.cc) from
// one source (row_math.inc), as the fused-program interpreter is; ActiveRowMath() picks the
// build ActiveCpuIsa() names.
//
// exp is a polynomial (Cody-Waite reduction by ln 2, then a degree-6 polynomial on
// [-ln2/2, ln2/2]; relative error below 2^-22 against std::exp), exactly 0 below -87.3 and for
// -inf, NaN for NaN. sigmoid(x) = 1 / (1 + exp(-x)); tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)),
// and its Taylor polynomial of degree 7 below |x| = 0.1 (relative error below 1e-6 against
// std::tanh). The builds may differ in the last bits (FMA contraction).
#pragma once

#include <cstdint>

namespace kiln::cpu {

struct RowMath {
  // x[j] += bias[j] (bias may be null) for j < n; returns the largest x[j] (NaNs aside),
  // -inf for n == 0 or when every x[j] is -inf or NaN.
  float (*add_max)(float* x, const float* bias, int64_t n);
  // x[j] = exp(x[j] - max) for j < n; returns their sum. `max` is finite.
  float (*exp_sum)(float* x, int64_t n, float max);
  // x[j] = sigmoid(x[j]), in place, for j < n.
  void (*sigmoid)(float* x, int64_t n);
  // x[j] = tanh(x[j]), in place, for j < n.
  void (*tanh)(float* x, int64_t n);
};

const RowMath& ActiveRowMath();

// Whether the recurrent kernels run their default gates on RowMath. Not in a selective runtime
// (runtime/kernels/selective.h), built for size: there the element-by-element path serves, and
// RowMath's code, which would cost its 300,000-byte budget about 1.5 KB, is left out.
#if KILN_SELECTIVE
inline constexpr bool kRowMathGates = false;
#else
inline constexpr bool kRowMathGates = true;
#endif

}  // namespace kiln::cpu
