// Test helper: the native code target a context runs on this CPU for an artifact compiled for
// its family (runtime/cpu/native/target.h: the best psABI level the CPU has, capped by
// KILN_MAX_CPU_ISA): the runtime's feature check per target (CpuRuns), with the cap applied
// here. The tests compile for this target alone (tests/compiler/compile_util.h): the one the
// runtime runs, and a third of the compile time of all three x86-64 levels.
#pragma once

#include <cstdlib>
#include <string>

#include "runtime/cpu/native/target.h"

namespace kiln::testing {

inline std::string NativeTargetForThisCpu() {
#if defined(__x86_64__)
  const char* env = std::getenv("KILN_MAX_CPU_ISA");
  const std::string isa = env != nullptr ? env : "";
  if (isa != "baseline" && isa != "avx2" && native::CpuRuns("x86-64-v4")) return "x86-64-v4";
  if (isa != "baseline" && native::CpuRuns("x86-64-v3")) return "x86-64-v3";
  return "x86-64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "";
#endif
}

}  // namespace kiln::testing
