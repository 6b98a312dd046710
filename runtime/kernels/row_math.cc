// row_math.h's operations for baseline x86-64 (and any other CPU), and the choice of build.
#include "runtime/kernels/row_math.h"

#include "runtime/cpu/arch/x86/cpu_isa.h"

#define ROW_MATH_VARIANT baseline
#define ROW_MATH_LANES 4
#include "runtime/kernels/row_math.inc"

namespace kiln::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
namespace avx2 {
extern const RowMath kRows;
}
namespace avx512 {
extern const RowMath kRows;
}
#endif

const RowMath& ActiveRowMath() {
#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
  const CpuIsa isa = ActiveCpuIsa();
  if (isa == CpuIsa::kAvx512) return avx512::kRows;
  if (isa == CpuIsa::kAvx2Fma) return avx2::kRows;
#endif
  return baseline::kRows;
}

}  // namespace kiln::cpu
