#include "compiler/codegen/cpu/targets.h"

#include <algorithm>

namespace kiln::codegen::cpu {

const std::vector<CpuTarget>& AllCpuTargets() {
  static const std::vector<CpuTarget> targets = {
      {"x86-64", "x86_64-unknown-linux-gnu", "x86-64", "", false, false},
      {"x86-64-v3", "x86_64-unknown-linux-gnu", "x86-64-v3", "", true, true},
      {"x86-64-v4", "x86_64-unknown-linux-gnu", "x86-64-v4", "", true, true},
      {"aarch64", "aarch64-unknown-linux-gnu", "generic", "+neon,+fp-armv8", true, true},
  };
  return targets;
}

std::vector<std::string> DefaultCpuTargets() {
#if defined(__aarch64__)
  return {"aarch64"};
#else
  return {"x86-64", "x86-64-v3", "x86-64-v4"};
#endif
}

Result<std::vector<const CpuTarget*>> ParseCpuTargets(std::string_view text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name(text.substr(start, comma - start));
    if (name == "host") {
      for (const std::string& n : DefaultCpuTargets()) names.push_back(n);
    } else if (name != "none" && !(name.empty() && text.empty())) {
      names.push_back(name);
    }
    start = comma + 1;
  }
  std::vector<const CpuTarget*> out;
  for (const CpuTarget& t : AllCpuTargets()) {
    if (std::find(names.begin(), names.end(), t.name) != names.end()) out.push_back(&t);
  }
  for (const std::string& n : names) {
    const bool known = std::any_of(AllCpuTargets().begin(), AllCpuTargets().end(),
                                   [&](const CpuTarget& t) { return n == t.name; });
    if (!known) {
      return InvalidArgument("--cpu-targets: unknown CPU target '" + n +
                             "'; expected a comma-separated list of x86-64, x86-64-v3, x86-64-v4, aarch64, "
                             "host (this machine's family) or none");
    }
  }
  return out;
}

}  // namespace kiln::codegen::cpu
