// Which of an artifact's native code targets (Artifact.native_code, schema/kiln.fbs) this CPU
// runs. The targets, each with every instruction of the ones before it on its architecture:
//   "x86-64"     baseline x86-64 (SSE2);
//   "x86-64-v3"  the x86-64 psABI level 3: x86-64-v2 (SSE3, SSSE3, SSE4.1, SSE4.2, POPCNT,
//                CMPXCHG16B, LAHF/SAHF) and AVX, AVX2, FMA, F16C, BMI1, BMI2, LZCNT, MOVBE, with
//                the OS saving the YMM state (XCR0);
//   "x86-64-v4"  x86-64-v3 and AVX-512 F, BW, CD, DQ, VL, with the OS saving the opmask and ZMM
//                state;
//   "aarch64"    AArch64 with Advanced SIMD (NEON; getauxval(AT_HWCAP) says so).
// KILN_MAX_CPU_ISA (runtime/cpu/arch/x86/cpu_isa.h) caps the x86 ones: "baseline" leaves only
// "x86-64", "avx2" up to "x86-64-v3", "avx512" or unset the best the CPU has.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kiln::native {

// The target chosen among an artifact's, or why none is.
struct TargetChoice {
  int index = -1;    // into the targets given; -1: none (the programs are interpreted)
  std::string why;   // index -1: why none ("this CPU runs none of its targets (x86-64-v4)");
                     // otherwise "" or what the cap left out ("x86-64-v4 left out by KILN_MAX_CPU_ISA=avx2")
};

// The best of `targets` (NativeCode.target of each, in artifact order) that this CPU runs
// under the cap; the first listed of equal ones. Unknown names are never chosen. Thread-safe.
TargetChoice ChooseTarget(std::span<const std::string_view> targets);

// Whether this CPU runs `target`, ignoring the cap (false for an unknown name). Thread-safe.
bool CpuRuns(std::string_view target);

}  // namespace kiln::native
