// The fused-program interpreter (fused_interpreter.inc) compiled for AVX2, as kiln::cpu::avx2;
// RunFused (fused.cc) runs it when ActiveCpuIsa() is kAvx2Fma. Nothing on other architectures.
#include "runtime/cpu/fused_variants.h"

#ifdef KILN_FUSED_HAS_X86_VARIANTS
#define KILN_FUSED_VARIANT avx2
#define KILN_FUSED_AVX2 1
#include "runtime/cpu/fused_interpreter.inc"
#endif
