// Which instruction-set-specific kernels the CPU backend runs.
//
// The runtime is built for baseline x86-64 (SSE2). A few CPU kernels also have versions for
// newer instruction sets, chosen at run time from what the CPU has:
//   - AVX2+FMA (with F16C, which every CPU with the first two has): the depthwise convolution
//     in runtime/kernels/conv.cc, the float16 conversions in runtime/kernels/half_convert.h and the
//     fused-program interpreter (runtime/fused/interpreter.inc, built for AVX2 too);
//   - AVX-512 (F, BW, DQ and VL): the fused-program interpreter, built for it too.
// The conversions and the interpreter give the same bits in every version. The depthwise
// convolution's versions round differently (a fused multiply-add rounds once where a multiply
// and an add round twice), so results may differ in the last bits between CPUs; both are
// correct.
//
// The environment variable KILN_MAX_CPU_ISA caps the instruction set, as oneDNN's
// ONEDNN_MAX_CPU_ISA and OpenBLAS's OPENBLAS_CORETYPE do for theirs. It lets a test run the
// baseline kernels on a CPU that has AVX2, to prove that a CPU without it passes too
// (scripts/test.sh's "other floating-point paths" tier):
//   unset, empty or "avx512"  the best the CPU has;
//   "avx2"                    at most the AVX2+FMA kernels;
//   "baseline"                baseline x86-64 kernels only, on every CPU.
// It is read once per process, at the first call of either function below; changing it
// later has no effect. On other architectures there are no such kernels and every value
// means the same.
#pragma once

#include "kiln/status.h"

namespace kiln::cpu {

enum class CpuIsa {
  kBaseline,  // baseline x86-64 (SSE2), or any non-x86 CPU
  kAvx2Fma,   // AVX2, FMA and F16C
  kAvx512,    // kAvx2Fma, and AVX-512 F, BW, DQ and VL
};  // in order: each has every instruction of the ones before it

// The instruction set the CPU kernels use: the best the CPU supports, capped by
// KILN_MAX_CPU_ISA. An unrecognised value of the variable caps at kBaseline (the kernels
// every CPU runs); MaxCpuIsaSetting() reports it. Thread-safe.
CpuIsa ActiveCpuIsa();

// OK when KILN_MAX_CPU_ISA is unset or one of the values above; otherwise kInvalidArgument
// naming the variable, the value found and the values accepted. ExecutionContext::Create
// fails with it, so a mistyped value cannot silently test the wrong path. Thread-safe.
Status MaxCpuIsaSetting();

// True when KILN_MAX_CPU_ISA is set (to a valid value) and lowers the instruction set below
// what the CPU has, so that a context's device_note() can say so. Thread-safe.
bool CpuIsaCapped();

// "baseline x86-64", "AVX2+FMA" or "AVX-512": the instruction set's name, for notes.
const char* CpuIsaName(CpuIsa isa);

}  // namespace kiln::cpu
