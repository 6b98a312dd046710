// Which instruction-set-specific kernels the CPU backend runs.
//
// The runtime is built for baseline x86-64 (SSE2). A few CPU kernels also have an AVX2+FMA
// version, chosen at run time when the CPU has AVX2, FMA and F16C (every CPU with the first
// two has the third): the depthwise convolution in runtime/cpu/conv.cc, the float16
// conversions in runtime/cpu/half_convert.h and the fused-program interpreter
// (runtime/cpu/fused_interpreter.inc, built for AVX2 too); the last two give the same bits as
// their baseline versions. The two versions round differently (a fused multiply-add rounds
// once where a multiply and an add round twice), so results may differ in the last bits
// between CPUs; both are correct.
//
// The environment variable KILN_MAX_CPU_ISA caps the instruction set, as oneDNN's
// ONEDNN_MAX_CPU_ISA and OpenBLAS's OPENBLAS_CORETYPE do for theirs. It lets a test run the
// baseline kernels on a CPU that has AVX2, to prove that a CPU without it passes too
// (scripts/test.sh's "other floating-point paths" tier):
//   unset, empty or "avx2"  the best the CPU has (AVX2+FMA kernels on a CPU with both);
//   "baseline"              baseline x86-64 kernels only, on every CPU.
// It is read once per process, at the first call of either function below; changing it
// later has no effect. On other architectures there are no such kernels and both values
// mean the same.
#pragma once

#include "kiln/status.h"

namespace kiln::cpu {

enum class CpuIsa {
  kBaseline,  // baseline x86-64 (SSE2), or any non-x86 CPU
  kAvx2Fma,   // AVX2, FMA and F16C
};

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

}  // namespace kiln::cpu
