// One prepared instruction on the CPU: its fused program (kiln.Fused: its native code when the
// model has some for it, else the interpreter) or its CPU kernel. The CPU
// backend (runtime/cpu/backend.cc) runs every instruction it does not give oneDNN through it.
// `sizes` holds the entry's evaluated size arguments (EntryState::sizes); the instruction reads
// its num_sizes from sizes_begin. Thread-safe for distinct calls (the call's workspace and
// outputs are the caller's).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/status.h"
#include "runtime/cpu/native/dispatch.h"
#include "runtime/fused/interpreter.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/selective.h"
#include "runtime/kernels/widen.h"
#include "runtime/model_impl.h"

namespace kiln::cpu {

inline Status RunInstruction(const PreparedInstruction& pi, const KernelCall& call, const std::vector<int64_t>& sizes) {
  if (!pi.program) return RunKernel(*pi.kernel, call);
  if (KeepsNativeCode() && pi.native)  // the kernel's native code (runtime/cpu/native/), else its portable program
    return kiln::native::RunNative(pi.native, *pi.program, call.inputs, call.outputs,
                             {sizes.data() + pi.sizes_begin, static_cast<size_t>(pi.num_sizes)}, call.threads);
  return RunFused(*pi.program, call.inputs, call.outputs,
                  {sizes.data() + pi.sizes_begin, static_cast<size_t>(pi.num_sizes)}, call.workspace,
                  call.workspace_bytes, call.threads);
}

}  // namespace kiln::cpu
