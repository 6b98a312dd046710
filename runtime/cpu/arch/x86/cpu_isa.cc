#include "runtime/cpu/arch/x86/cpu_isa.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace kiln::cpu {
namespace {

constexpr const char* kVariable = "KILN_MAX_CPU_ISA";

struct IsaState {
  CpuIsa cpu = CpuIsa::kBaseline;     // what the CPU supports
  CpuIsa active = CpuIsa::kBaseline;  // what the kernels use
  bool valid = true;
  std::string value;  // the variable's value, when set
};

#if defined(__x86_64__) && defined(__GNUC__)
// What the CPU supports, from CPUID (Intel SDM vol. 2A, CPUID) and the register state the OS
// saves (XGETBV's XCR0, vol. 1, 13.3), as libgcc's __builtin_cpu_supports reads them. Read here
// rather than through that builtin, which links libgcc's whole CPU model (about 4.5 KB of a
// selective runtime), and knows no F16C in GCC 12 or clang 14.
CpuIsa DetectCpu() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return CpuIsa::kBaseline;
  const bool fma = (c & bit_FMA) != 0, f16c = (c & bit_F16C) != 0;
  if ((c & bit_OSXSAVE) == 0 || (c & bit_AVX) == 0) return CpuIsa::kBaseline;
  unsigned xcr0, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kYmm = 0x6;     // XMM and YMM state: AVX
  constexpr unsigned kZmm = 0xe6;    // and opmask, ZMM0-15's upper halves, ZMM16-31: AVX-512
  if ((xcr0 & kYmm) != kYmm || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return CpuIsa::kBaseline;
  if ((b & bit_AVX2) == 0 || !fma || !f16c) return CpuIsa::kBaseline;
  constexpr unsigned kAvx512 = bit_AVX512F | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
  return (xcr0 & kZmm) == kZmm && (b & kAvx512) == kAvx512 ? CpuIsa::kAvx512 : CpuIsa::kAvx2Fma;
}
#endif

IsaState Detect() {
  IsaState s;
#if defined(__x86_64__) && defined(__GNUC__)
  s.cpu = DetectCpu();
#endif
  s.active = s.cpu;
  if (const char* env = std::getenv(kVariable); env != nullptr && *env != '\0') {
    s.value = env;
    if (s.value == "baseline") {
      s.active = CpuIsa::kBaseline;
    } else if (s.value == "avx2") {
      s.active = std::min(s.cpu, CpuIsa::kAvx2Fma);
    } else if (s.value != "avx512") {
      s.valid = false;
      s.active = CpuIsa::kBaseline;
    }
  }
  return s;
}

const IsaState& State() {
  static const IsaState state = Detect();
  return state;
}

}  // namespace

CpuIsa ActiveCpuIsa() { return State().active; }

Status MaxCpuIsaSetting() {
  const IsaState& s = State();
  if (s.valid) return Status::Ok();
  return InvalidArgument(std::string(kVariable) + " is '" + s.value +
                         "', expected 'baseline' (baseline x86-64 kernels only), 'avx2' (at most AVX2+FMA) or "
                         "'avx512' (the best the CPU has)");
}

bool CpuIsaCapped() {
  const IsaState& s = State();
  return s.valid && s.active != s.cpu;
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline x86-64";
    case CpuIsa::kAvx2Fma: return "AVX2+FMA";
    case CpuIsa::kAvx512: return "AVX-512";
  }
  return "baseline x86-64";
}

}  // namespace kiln::cpu
