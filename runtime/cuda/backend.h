// The CUDA backend (runtime/backend.h): an entry's segments run on one CUDA device, on the
// caller's stream, each instruction where its artifact says: a generated kernel launched from the
// artifact's cubin for the device's arch or its PTX (cuda/launch.h), cuBLASLt or cuDNN (cuda/blas.h,
// cuda/dnn.h, opened with dlopen: cuda/dynamic_symbols.h), or, when that cannot run here, on the
// host as a CPU fallback segment, which the executor runs on the context's CPU backend
// (cuda/placement.h decides, once per entry and binding). One file per object:
//   device_model.h   the weights uploaded and the kernels' modules loaded, once per (Model, device)
//   device_memory.h  arena, input staging, symbolic values, error words, library workspace
//   placement.h      which instruction runs on a library, and which on the host, and why
//   launch.h         generated kernel launches and their index-check reports
//   graphs.h         CUDA graphs, one per segment and key (CudaOptions::graphs)
//   profiler.h       the Run's GPU time, and each instruction's (ContextOptions::profile)
//   driver.h         the driver API's dynamic symbol table
//
// NOTE: written without a GPU. It runs end to end in CI on the emulated CUDA device
// (tests/emulated_cuda/); scripts/gpu-check exercises it on a real one.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace kiln::cuda {

// Opens device options.cuda.device_ordinal, uploads the weights (or reuses another context's upload
// on the same device) and loads every kernel's module. CUDA graphs are used when
// options.cuda.graphs and not options.profile. Errors: kFailedPrecondition (no driver, no
// device), kIncompatible (a kernel has no cubin for the device's arch and no PTX; the message
// lists the artifact's archs and the device's), kResourceExhausted (device memory),
// kDeviceError (any other driver failure).
Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options);

}  // namespace kiln::cuda
