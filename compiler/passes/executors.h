// The `executors` stage: assigns every node the executor that will run it and records
// why. Preference order (DESIGN.md): cuDNN, cuBLASLt, a generated kernel, the CPU
// fallback. Fused regions get "generated"; MatMul/Gemm "cublaslt"; Conv, ConvTranspose and
// pooling "cudnn"; every other op "cpu" (a CPU fallback region on a GPU). Every op must
// also have a CPU kernel, since the CPU backend runs whole artifacts; anything else is an
// error.
#pragma once

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

Result<ir::Trace> AssignExecutors(const ir::Trace& canonical);

}  // namespace kiln::passes
