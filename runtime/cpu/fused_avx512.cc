// The fused-program interpreter (fused_interpreter.inc) compiled for AVX-512 (F, BW, DQ, VL),
// as kiln::cpu::avx512; RunFused (fused.cc) runs it when ActiveCpuIsa() is kAvx512. Nothing on
// other architectures.
#include "runtime/cpu/fused_variants.h"

#ifdef KILN_FUSED_HAS_X86_VARIANTS
#define KILN_FUSED_VARIANT avx512
#define KILN_FUSED_AVX512 1
#include "runtime/cpu/fused_interpreter.inc"
#endif
