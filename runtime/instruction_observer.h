// An internal hook on the CPU backend, for Kiln's own tools (the `kiln compile --validate`
// accuracy report, compiler/validate/precision_report.h); not part of the runtime API and not
// exported from libkiln_runtime.so.
#pragma once

#include <functional>
#include <span>

#include "kiln/runtime.h"
#include "runtime/kernels/kernel.h"
#include "runtime/model_impl.h"

namespace kiln {

// Called by a CPU-backend Run after each instruction that succeeded, on the Run's thread,
// with the entry, the instruction and its output tensors (operand order; an absent optional
// output has a null data pointer). The outputs live in the context's arena: read them inside
// the call, a later instruction may reuse their bytes. The CUDA backend never calls it. With
// CpuOptions::onednn, an output kept in oneDNN's layout between two oneDNN Convs is not
// NCHW (runtime/cpu/onednn/onednn.h): an observer that reads values makes its context without oneDNN.
using InstructionObserver =
    std::function<void(const PreparedEntry&, const PreparedInstruction&, std::span<const cpu::TensorRef>)>;

// Installs `observer` on `ctx` (an empty function removes it). Unset, a Run pays one untaken
// branch per instruction. Not thread-safe against a Run on the same context.
void SetInstructionObserver(ExecutionContext& ctx, InstructionObserver observer);  // runtime/context.cc

}  // namespace kiln
