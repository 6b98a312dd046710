// The row operations of the CPU Attention kernel's online softmax (transformer.cc), built for
// baseline x86-64 (attention_rows.cc), AVX2 (attention_rows_avx2.cc) and AVX-512
// (attention_rows_avx512.cc) from one source (attention_rows.inc), as the fused-program
// interpreter is; ActiveAttentionRows() picks the build ActiveCpuIsa() names.
//
// exp is a polynomial (Cody-Waite reduction by ln 2, then a degree-6 polynomial on
// [-ln2/2, ln2/2]; relative error below 2^-22 against std::exp), exactly 0 below -87.3 and
// for -inf, NaN for NaN. The builds may differ in the last bit (FMA contraction).
#pragma once

#include <cstdint>

namespace kiln::cpu {

struct AttentionRows {
  // x[j] += bias[j] (bias may be null) for j < n; returns the largest x[j] (NaNs aside),
  // -inf for n == 0 or when every x[j] is -inf or NaN.
  float (*add_max)(float* x, const float* bias, int64_t n);
  // x[j] = exp(x[j] - max) for j < n; returns their sum. `max` is finite.
  float (*exp_sum)(float* x, int64_t n, float max);
};

const AttentionRows& ActiveAttentionRows();

}  // namespace kiln::cpu
