// The backends this runtime was built with (runtime/backend.h). The CUDA backend is built
// when the CUDA toolkit's headers were found (CMakeLists.txt: runtime/cuda/ needs them).
#include "runtime/backend.h"
#include "runtime/cpu/backend.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/backend.h"
#endif

namespace kiln {

std::span<const BackendRegistration> RegisteredBackends() {
  static const BackendRegistration kBackends[] = {
#if KILN_HAVE_CUDA
      {Device::kCuda, "cuda", "CUDA", &cuda::CreateBackend},
#endif
      {Device::kCpu, "cpu", "CPU", &cpu::CreateBackend},
  };
  return kBackends;
}

}  // namespace kiln
