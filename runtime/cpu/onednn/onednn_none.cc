// A runtime built without oneDNN (-DKILN_WITH_ONEDNN=OFF, and the aarch64 runtime): every op
// runs on its CPU kernel (onednn.h).
#include "runtime/cpu/onednn/onednn.h"

namespace kiln::cpu {

ThreadPool::TeamFn OpenMpTeam() { return nullptr; }

bool OneDnnBuilt() { return false; }

bool OneDnnRunsBFloat16() { return false; }

const std::string& OneDnnVersion() {
  static const std::string none;
  return none;
}

bool OneDnnSgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                 float*, int64_t) {
  return false;
}

std::unique_ptr<WeightPacks> NewWeightPacks() { return nullptr; }

Result<std::unique_ptr<OneDnnOp>> PlanOneDnn(std::string_view, const KernelCall&, int, bool, WeightPacks&) {
  return Unimplemented("this runtime was built without oneDNN");
}

}  // namespace kiln::cpu
