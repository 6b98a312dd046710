// The `executors` stage: assigns every node the executor that will run it and records
// why. Preference order (DESIGN.md): cuDNN, cuBLASLt, a generated kernel, the CPU
// fallback. This build has only the CPU backend, so every op the registry lists with
// "cpu" and the runtime has a kernel for goes to "cpu"; anything else is an error.
#pragma once

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

Result<ir::Trace> AssignExecutors(const ir::Trace& canonical);

}  // namespace kiln::passes
