// The fused-program interpreter (interpreter.inc) compiled for AVX2, as kiln::cpu::avx2;
// RunFused (interpreter.cc) runs it when ActiveCpuIsa() is kAvx2Fma. Nothing on other architectures.
#include "runtime/fused/interpreter_variants.h"

#ifdef KILN_FUSED_HAS_X86_VARIANTS
#define KILN_FUSED_VARIANT avx2
#define KILN_FUSED_AVX2 1
#include "runtime/fused/interpreter.inc"
#endif
