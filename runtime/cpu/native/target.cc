#include "runtime/cpu/native/target.h"

#include <cstdlib>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "runtime/cpu/arch/x86/cpu_isa.h"

namespace kiln::native {
namespace {

// Rank of a target on this architecture: higher has more; -1 for a name this build does not
// know or another architecture's.
int Rank(std::string_view target) {
#if defined(__x86_64__)
  if (target == "x86-64") return 0;
  if (target == "x86-64-v3") return 1;
  if (target == "x86-64-v4") return 2;
#elif defined(__aarch64__)
  if (target == "aarch64") return 0;
#endif
  (void)target;
  return -1;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The highest rank the CPU and the OS support, from CPUID (Intel SDM vol. 2A) and XCR0
// (XGETBV, vol. 1, 13.3), checking every feature the psABI level lists.
int DetectRank() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const unsigned c1 = c;
  constexpr unsigned kV2 = bit_SSE3 | bit_SSSE3 | bit_SSE4_1 | bit_SSE4_2 | bit_POPCNT | bit_CMPXCHG16B;
  constexpr unsigned kV3 = bit_AVX | bit_FMA | bit_F16C | bit_MOVBE | bit_OSXSAVE;
  if ((c1 & kV2) != kV2 || (c1 & kV3) != kV3) return 0;
  if (!__get_cpuid(0x80000001, &a, &b, &c, &d)) return 0;
  constexpr unsigned kLahf = bit_LAHF_LM, kLzcnt = bit_LZCNT;
  if ((c & kLahf) == 0 || (c & kLzcnt) == 0) return 0;
  unsigned xcr0, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kYmm = 0x6, kZmm = 0xe6;  // XMM+YMM; and opmask, ZMM0-15 upper, ZMM16-31
  if ((xcr0 & kYmm) != kYmm || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  constexpr unsigned kV3Leaf7 = bit_AVX2 | bit_BMI | bit_BMI2;
  if ((b & kV3Leaf7) != kV3Leaf7) return 0;
  constexpr unsigned kV4 = bit_AVX512F | bit_AVX512BW | bit_AVX512CD | bit_AVX512DQ | bit_AVX512VL;
  return (xcr0 & kZmm) == kZmm && (b & kV4) == kV4 ? 2 : 1;
}
#elif defined(__aarch64__) && defined(__linux__)
int DetectRank() {
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
  return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0 ? 0 : -1;
}
#else
int DetectRank() { return -1; }
#endif

int CpuRank() {
  static const int rank = DetectRank();
  return rank;
}

// The highest rank KILN_MAX_CPU_ISA allows, and its value.
int CapRank(const char** value) {
  *value = std::getenv("KILN_MAX_CPU_ISA");
  if (*value == nullptr || **value == '\0' || std::string_view(*value) == "avx512") return 2;
  if (std::string_view(*value) == "avx2") return 1;
  return 0;  // "baseline", and a value ExecutionContext::Create refuses (MaxCpuIsaSetting)
}

}  // namespace

bool CpuRuns(std::string_view target) {
  const int r = Rank(target);
  return r >= 0 && r <= CpuRank();
}

TargetChoice ChooseTarget(std::span<const std::string_view> targets) {
  TargetChoice c;
  if (targets.empty()) {
    c.why = "the artifact has no native code";
    return c;
  }
  const char* value = nullptr;
#if defined(__x86_64__)
  const int cap = CapRank(&value);
#else
  const int cap = 2;  // the variable caps x86 kernels only
#endif
  int best = -1;
  std::string lacking, capped;
  for (size_t k = 0; k < targets.size(); ++k) {
    const int r = Rank(targets[k]);
    const std::string name(targets[k]);
    if (r < 0 || r > CpuRank()) {
      lacking += (lacking.empty() ? "" : ", ") + name;
    } else if (r > cap) {
      capped += (capped.empty() ? "" : ", ") + name;
    } else if (best < 0 || r > Rank(targets[best])) {
      best = static_cast<int>(k);
    }
  }
  c.index = best;
  const std::string cap_text = capped.empty() ? "" : capped + " left out by KILN_MAX_CPU_ISA=" + value;
  if (best >= 0) {
    c.why = cap_text;
  } else if (!capped.empty()) {
    c.why = cap_text;
  } else {
    c.why = "this CPU runs none of its targets (" + lacking + ")";
  }
  return c;
}

}  // namespace kiln::native
