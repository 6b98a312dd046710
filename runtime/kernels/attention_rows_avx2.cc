// attention_rows.h's operations built for AVX2 (attention_rows.inc), as kiln::cpu::avx2::kRows.
#include "runtime/kernels/attention_rows.h"

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ATTENTION_ROWS_VARIANT avx2
#define ATTENTION_ROWS_LANES 8
#include "runtime/kernels/attention_rows.inc"
#pragma GCC pop_options
#endif
