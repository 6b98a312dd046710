// attention_rows.h's operations for baseline x86-64 (and any other CPU), and the choice of build.
#include "runtime/kernels/attention_rows.h"

#include "runtime/cpu/arch/x86/cpu_isa.h"

#define ATTENTION_ROWS_VARIANT baseline
#define ATTENTION_ROWS_LANES 4
#include "runtime/kernels/attention_rows.inc"

namespace kiln::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
namespace avx2 {
extern const AttentionRows kRows;
}
namespace avx512 {
extern const AttentionRows kRows;
}
#endif

const AttentionRows& ActiveAttentionRows() {
#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
  const CpuIsa isa = ActiveCpuIsa();
  if (isa == CpuIsa::kAvx512) return avx512::kRows;
  if (isa == CpuIsa::kAvx2Fma) return avx2::kRows;
#endif
  return baseline::kRows;
}

}  // namespace kiln::cpu
