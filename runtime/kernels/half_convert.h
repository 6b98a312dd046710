// Bulk conversions between float32 and the 16-bit float types (float16, bfloat16) for the CPU
// kernels: the widening of half operands (widen.h) and the fused programs' contiguous loads
// and stores. Each gives the same bits as runtime/half.h's scalar functions element by
// element (round to nearest even; infinities kept; a NaN stays a NaN of the same sign, made
// quiet, with its leading payload bits, as IEEE 754-2019 section 6.2.3 asks of conversions).
//
// float16 runs on F16C (VCVTPH2PS, VCVTPS2PH: 8 values per instruction) when the active
// instruction set is kAvx2Fma or above (cpu_isa.h: those CPUs have F16C), else on the scalar
// functions; KILN_MAX_CPU_ISA=baseline selects the
// scalar ones. bfloat16 is a shift and a rounding, which the compiler vectorizes.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"
#include "runtime/cpu/arch/x86/cpu_isa.h"

namespace kiln::cpu {

// dst[i] = src[i] widened to float32, for i < n; `dt` is kFloat16 or kBFloat16 (src holds
// its bits). The ranges must not overlap. Thread-safe; allocates nothing.
void HalvesToFloat(DType dt, const uint16_t* src, float* dst, int64_t n, CpuIsa isa = ActiveCpuIsa());

// dst[i] = src[i] rounded to `dt` (kFloat16 or kBFloat16), for i < n. The ranges must not
// overlap. Thread-safe; allocates nothing.
void FloatToHalves(DType dt, const float* src, uint16_t* dst, int64_t n, CpuIsa isa = ActiveCpuIsa());

}  // namespace kiln::cpu
