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
// CPUID leaf 1, ECX bit 29 (Intel SDM vol. 2A, CPUID): F16C, which neither GCC 12's nor
// clang 14's __builtin_cpu_supports knows.
bool HasF16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
#endif

IsaState Detect() {
  IsaState s;
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c()) {
    s.cpu = CpuIsa::kAvx2Fma;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
      s.cpu = CpuIsa::kAvx512;
  }
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
