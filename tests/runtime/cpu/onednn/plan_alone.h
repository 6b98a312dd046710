// Test helper: PlanOneDnn with a WeightPacks of the op's own, as if each op were in a context of
// its own, so that ops planned on one test buffer whose values change never share a reordered
// weight. The packs live until the test program exits (ops must not outlive theirs).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "runtime/cpu/onednn/onednn.h"

namespace kiln::cpu {

inline Result<std::unique_ptr<OneDnnOp>> PlanAlone(std::string_view op, const KernelCall& call, int threads,
                                                   bool weights_are_constant) {
  static std::vector<std::unique_ptr<WeightPacks>> packs;
  packs.push_back(NewWeightPacks());
  return PlanOneDnn(op, call, threads, weights_are_constant, *packs.back());
}

}  // namespace kiln::cpu
