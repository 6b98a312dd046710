// The CUDA backend (runtime/backend.h): an entry's instructions run on one CUDA device, on the
// caller's stream, each where its artifact says (a generated kernel, cuBLASLt or cuDNN) or,
// when that cannot run here, on the host as a CPU fallback (cuda/runner.h has the rules).
// Memory: the device arena (at the entry's memory plan offsets), input staging and library
// workspace of the runner (cuda/runner.h), and, once a CPU fallback region runs, the host arena and kernel
// workspace (cpu/host_memory.h) it runs in.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace kiln::cuda {

// Opens device options.device_ordinal (cuda/runner.h, Runner::Create, gives the errors).
// CUDA graphs are used when options.cuda_graphs and not options.profile.
Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options);

}  // namespace kiln::cuda
