// The backends this runtime knows (runtime/backend.h). The CUDA backend runs when the CUDA
// toolkit's headers were found (CMakeLists.txt: runtime/cuda/ needs them); its claims
// (runtime/cuda/claims.cc) need none and are here in every runtime but a selective one
// (cmake/selective.cmake), which registers the CPU backend alone: it has no compiler to record
// CUDA placements for, and an artifact records its own.
#include <string>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu/backend.h"
#include "runtime/cpu/claims.h"
#if !KILN_SELECTIVE
#include "runtime/cuda/claims.h"
#endif
#if KILN_HAVE_CUDA
#include "runtime/cuda/backend.h"
#endif

namespace kiln {
namespace {

std::vector<BackendRegistration>& Registry() {
  static std::vector<BackendRegistration> backends = {
#if KILN_HAVE_CUDA
      {Device::kCuda, "cuda", "CUDA", &cuda::CreateBackend, &cuda::ClaimOp, nullptr},
#elif !KILN_SELECTIVE
      {Device::kCuda, "cuda", "CUDA", nullptr, &cuda::ClaimOp, "this runtime was built without the CUDA toolkit"},
#endif
      {Device::kCpu, "cpu", "CPU", &cpu::CreateBackend, &cpu::ClaimOp, nullptr},
  };
  return backends;
}

}  // namespace

std::span<const BackendRegistration> RegisteredBackends() { return Registry(); }

Status RegisterBackend(const BackendRegistration& backend) {
  std::vector<BackendRegistration>& all = Registry();
  for (const BackendRegistration& r : all)
    if (r.device == backend.device || std::string(r.name) == backend.name)
      return InvalidArgument(std::string("backend '") + backend.name + "': its device or name is registered already ('" +
                             r.name + "')");
  all.insert(all.end() - 1, backend);  // before the CPU backend, which Device::kAuto takes last
  return Status::Ok();
}

Status UnregisterBackend(std::string_view name) {
  std::vector<BackendRegistration>& all = Registry();
  for (auto it = all.begin(); it != all.end(); ++it)
    if (name == it->name && it->device != Device::kCpu && it->device != Device::kCuda) {
      all.erase(it);
      return Status::Ok();
    }
  return NotFound("no backend '" + std::string(name) + "' was registered by RegisterBackend");
}

Claim ClaimOn(const BackendRegistration& backend, std::string_view op, bool fused) {
  if (op == "kiln.LoopBegin" || op == "kiln.LoopEnd")
    return {Library::kControl, "a run-time Loop's control, run by the executor (on a device: the host reads the trip "
                               "count and each iteration's condition, one copy and one wait each)"};
  return backend.claim(op, fused);
}

}  // namespace kiln
