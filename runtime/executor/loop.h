// A run-time Loop's control on the executor (ONNX Loop-21, compiled by the compiler's control-flow
// lowering into kiln.LoopBegin ... body ... kiln.LoopEnd; operands in compiler/ops/meta_loop.cc):
//  - kiln.LoopBegin writes the body's parameters: iteration_num 0, cond_in the loop's condition
//    (true when absent), each carried value's initial value; the body runs when M (no limit when
//    absent) is above 0 and the condition holds, else the executor goes to the kiln.LoopEnd.
//  - kiln.LoopEnd, after each iteration n: copies the iteration's scan values to row n of each
//    stacked output (sized for the bound of the iterations, a run-time dim; with no row left the
//    room grows, RuntimeDims::Grow, or the Run fails), copies the body's carried results into the
//    parameters, then sets iteration_num n + 1 and cond_in the body's condition. The body runs
//    again while n + 1 < M and the condition holds; an iteration past
//    ContextOptions::max_loop_iterations, counting those of all loops of the Run together (nested
//    loops multiply), is kResourceExhausted. When the loop ends it copies the parameters into the
//    final carried values and sets the run-time dim of its scan outputs to the iterations that ran.
// The scalars (M, the conditions) are read on the host (on a device: one copy to the host and one
// wait each), and the copies between the body's tensors are the backend's (Backend::Copy), so the
// body's instructions run where they would outside a loop. The operands' layout, the decisions
// and their errors are runtime/executor/loop_rules.h's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

// One run-time Loop running: where it began, the iterations it ran, its trip count (M), whether
// its body was skipped, and the host copies of the scalars it writes.
struct LoopFrame {
  size_t begin = 0;
  int64_t ran = 0, trips = 0;
  bool skipped = false;
  int64_t iteration = 0;
  uint8_t condition = 0;
};

}  // namespace kiln
