// The CPU targets native code is compiled for (docs/architecture.md, "Native CPU code"), by the
// names the x86-64 psABI gives its microarchitecture levels and by the architecture's name:
//   "x86-64"     baseline x86-64: SSE2, every x86-64 CPU;
//   "x86-64-v3"  AVX, AVX2, FMA, F16C, BMI1, BMI2, LZCNT, MOVBE (Haswell, Zen and later);
//   "x86-64-v4"  x86-64-v3 and AVX-512 F, BW, CD, DQ, VL (Skylake-SP, Zen 4 and later);
//   "aarch64"    ARMv8-A with NEON (every 64-bit Arm CPU; Jetson boards).
// The runtime runs the best target of an artifact that the CPU supports
// (runtime/cpu/native/), and interprets the portable programs when none fits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"

namespace kiln::codegen::cpu {

struct CpuTarget {
  const char* name;      // as above, NativeCode.target in the artifact
  const char* triple;    // LLVM's target triple
  const char* cpu;       // LLVM's CPU name
  const char* features;  // LLVM's feature string, beyond the CPU's
  bool f16c;             // half <-> float conversions are instructions (else no native code
                         // for kernels with float16 tensors yet)
  bool sse41;            // floor, ceil and round are instructions (else llvm_math.h's code)
};

// Every target, in the order above.
const std::vector<CpuTarget>& AllCpuTargets();

// The default of `kiln compile --cpu-targets`: every target of this host's architecture
// family (the three x86-64 ones on x86-64, aarch64 on aarch64), which includes the baseline.
std::vector<std::string> DefaultCpuTargets();

// Parses `--cpu-targets`: names separated by commas, "host" for DefaultCpuTargets(), or
// "none" (no native code). Returns the targets in AllCpuTargets() order, each once;
// kInvalidArgument naming the unknown name and the names accepted.
Result<std::vector<const CpuTarget*>> ParseCpuTargets(std::string_view text);

}  // namespace kiln::codegen::cpu
