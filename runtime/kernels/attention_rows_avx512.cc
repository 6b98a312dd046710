// attention_rows.h's operations built for AVX512 (attention_rows.inc), as kiln::cpu::avx512::kRows.
#include "runtime/kernels/attention_rows.h"

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl")
#define ATTENTION_ROWS_VARIANT avx512
#define ATTENTION_ROWS_LANES 16
#include "runtime/kernels/attention_rows.inc"
#pragma GCC pop_options
#endif
