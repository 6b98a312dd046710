// One prepared instruction on the CPU: its fused program (kiln.Fused) or its CPU kernel. The
// CPU backend (runtime/context.cc) runs every instruction through it, the CUDA backend its CPU
// fallbacks (runtime/cuda/runner.cc). `sizes` holds the entry's evaluated size arguments
// (EntryState::sizes); the instruction reads its num_sizes from sizes_begin. Thread-safe for
// distinct calls (the call's workspace and outputs are the caller's).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/status.h"
#include "runtime/fused/interpreter.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/widen.h"
#include "runtime/model_impl.h"

namespace kiln::cpu {

inline Status RunInstruction(const PreparedInstruction& pi, const KernelCall& call, const std::vector<int64_t>& sizes) {
  if (!pi.program) return RunKernel(*pi.kernel, call);
  return RunFused(*pi.program, call.inputs, call.outputs,
                  {sizes.data() + pi.sizes_begin, static_cast<size_t>(pi.num_sizes)}, call.workspace,
                  call.workspace_bytes, call.threads);
}

// The instruction an executor runs after instruction `k` of `pe`: k + 1, or for a run-time
// Loop's control (PreparedEntry::loop_pair) the jump its kernel asked for in `step`: a LoopBegin
// whose body does not run goes to its LoopEnd, setting *skipped_body for that call; a LoopEnd
// that runs the body again goes to the instruction after its LoopBegin.
inline size_t NextInstruction(const PreparedEntry& pe, size_t k, const LoopStep& step, bool* skipped_body) {
  const int32_t pair = pe.loop_pair.empty() ? -1 : pe.loop_pair[k];
  if (pair < 0) return k + 1;
  if (static_cast<size_t>(pair) > k) {
    if (step.again) return k + 1;
    *skipped_body = true;
    return static_cast<size_t>(pair);
  }
  return step.again ? static_cast<size_t>(pair) + 1 : k + 1;
}

}  // namespace kiln::cpu
