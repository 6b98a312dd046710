// row_math.h's operations built for AVX512 (row_math.inc), as kiln::cpu::avx512::kRows.
#include "runtime/kernels/row_math.h"

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl")
#endif
#define ROW_MATH_VARIANT avx512
#define ROW_MATH_LANES 16
#include "runtime/kernels/row_math.inc"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
