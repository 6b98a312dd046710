// The fused-program interpreter (interpreter.inc) compiled for AVX-512 (F, BW, DQ, VL),
// as kiln::cpu::avx512; RunFused (interpreter.cc) runs it when ActiveCpuIsa() is kAvx512. Nothing on
// other architectures.
#include "runtime/fused/interpreter_variants.h"

#ifdef KILN_FUSED_HAS_X86_VARIANTS
#define KILN_FUSED_VARIANT avx512
#define KILN_FUSED_AVX512 1
#include "runtime/fused/interpreter.inc"
#endif
