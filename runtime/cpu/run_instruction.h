// One prepared instruction on the CPU: its fused program (kiln.Fused) or its CPU kernel. The
// CPU backend (runtime/context.cc) runs every instruction through it, the CUDA backend its CPU
// fallbacks (runtime/cuda/runner.cc). `sizes` holds the entry's evaluated size arguments
// (EntryState::sizes); the instruction reads its num_sizes from sizes_begin. Thread-safe for
// distinct calls (the call's workspace and outputs are the caller's).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/status.h"
#include "runtime/cpu/fused.h"
#include "runtime/cpu/kernel.h"
#include "runtime/cpu/widen.h"
#include "runtime/model_impl.h"

namespace kiln::cpu {

inline Status RunInstruction(const PreparedInstruction& pi, const KernelCall& call, const std::vector<int64_t>& sizes) {
  if (!pi.program) return RunKernel(*pi.kernel, call);
  return RunFused(*pi.program, call.inputs, call.outputs,
                  {sizes.data() + pi.sizes_begin, static_cast<size_t>(pi.num_sizes)}, call.workspace,
                  call.workspace_bytes, call.threads);
}

}  // namespace kiln::cpu
