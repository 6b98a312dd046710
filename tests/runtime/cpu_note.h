// Test helper: the device_note() of a CPU context, as include/kiln/runtime.h words it, written
// out here rather than taken from the runtime.
//
//   CHECK(ctx->device_note() == CpuNote(2));  // "CPU backend, 2 threads"
//
// scripts/test.sh's "other floating-point paths" tiers set KILN_MAX_CPU_ISA=baseline or avx2;
// where that is below what the CPU has, the note says which kernels run. A runtime built with
// oneDNN adds ", Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN on oneDNN X.Y.Z" unless `onednn`
// is false (CpuOptions::onednn); an artifact with native code for this CPU, ", generated kernels
// as native code (x86-64-v3)" before it.
#pragma once

#include <cstdlib>
#include <string>

#include "runtime/cpu/onednn/onednn.h"
#include "tests/native_target.h"

namespace kiln::testing {

// `native`: the artifact has native code for this CPU's family (as `kiln compile` writes by
// default), which the note names.
inline std::string CpuNote(int threads, bool onednn = true, bool native = true) {
  std::string note = "CPU backend, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  const char* env = std::getenv("KILN_MAX_CPU_ISA");
  const std::string isa = env != nullptr ? env : "";
#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  const bool avx2_fma = false, avx512 = false;
#endif
  if (isa == "baseline" && avx2_fma) note += ", baseline x86-64 kernels (KILN_MAX_CPU_ISA=baseline)";
  if (isa == "avx2" && avx512) note += ", AVX2+FMA kernels (KILN_MAX_CPU_ISA=avx2)";
  if (native && !NativeTargetForThisCpu().empty()) note += ", generated kernels as native code (" + NativeTargetForThisCpu() + ")";
  if (onednn && cpu::OneDnnBuilt()) note += ", Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN on " + cpu::OneDnnVersion();
  return note;
}

}  // namespace kiln::testing
