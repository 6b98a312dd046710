// The `executors` stage: what runs every node on every registered backend, and why, from the
// backends' own claims (runtime/claims.h: runtime/cpu/claims.cc, runtime/cuda/claims.cc), the
// same the runtime reads. Fused regions are generated kernels everywhere; library ops go to the
// backend's library (cuBLASLt or cuDNN on CUDA, oneDNN on the CPU); every other op runs on its CPU
// kernel, which on a device backend is a CPU fallback region. Every op must have a CPU kernel,
// since the CPU backend runs whole artifacts; anything else is an error. The trace notes each
// backend's library nodes and each device backend's CPU fallback regions with their reasons.
#pragma once

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

Result<ir::Trace> AssignExecutors(const ir::Trace& canonical);

// Sets node.placements from every registered backend's claims.
void PlaceNode(ir::Node& node);

}  // namespace kiln::passes
