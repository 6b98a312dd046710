// Test helper: the device_note() of a CPU context, as include/kiln/runtime.h words it, written
// out here rather than taken from the runtime.
//
//   CHECK(ctx->device_note() == CpuNote(2));  // "CPU backend, 2 threads"
//
// scripts/test.sh's "other floating-point paths" tier sets KILN_MAX_CPU_ISA=baseline; on a CPU
// with AVX2 and FMA the note then says that the baseline kernels run. A runtime built with
// oneDNN adds ", Conv on oneDNN X.Y.Z" unless `onednn` is false (ContextOptions::onednn).
#pragma once

#include <cstdlib>
#include <string>

#include "runtime/cpu/onednn.h"

namespace kiln::testing {

inline std::string CpuNote(int threads, bool onednn = true) {
  std::string note = "CPU backend, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  const char* isa = std::getenv("KILN_MAX_CPU_ISA");
#if defined(__x86_64__) && defined(__GNUC__)
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx2_fma = false;
#endif
  if (isa != nullptr && std::string(isa) == "baseline" && avx2_fma)
    note += ", baseline x86-64 kernels (KILN_MAX_CPU_ISA=baseline)";
  if (onednn && cpu::OneDnnBuilt()) note += ", Conv on " + cpu::OneDnnVersion();
  return note;
}

}  // namespace kiln::testing
