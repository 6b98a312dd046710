// row_math.h's operations built for AVX2 (row_math.inc), as kiln::cpu::avx2::kRows.
#include "runtime/kernels/row_math.h"

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ROW_MATH_VARIANT avx2
#define ROW_MATH_LANES 8
#include "runtime/kernels/row_math.inc"
#pragma GCC pop_options
#endif
