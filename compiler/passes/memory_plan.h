// The `plan` stage: a liveness-based memory plan for the intermediate tensors.
//
// Every value an instruction writes lives in one arena. A buffer is live from the
// instruction that writes it to the last instruction that reads it (model outputs stay
// live to the end). Sizes are rounded up to 64 bytes.
//  - Static shapes: greedy by size (largest first), each buffer at the lowest offset that
//    does not overlap a buffer whose lifetime intersects its own (TFLite Micro's greedy
//    planner). Offsets and the arena size are exact numbers.
//  - Symbolic shapes: buffers share slots whose lifetimes do not overlap; a slot's size is
//    the max of its buffers' sizes, and offsets are sums of slot sizes: expressions the
//    runtime evaluates once per new binding of the symbols.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

enum class StorageKind { kAbsent, kInput, kWeight, kArena, kSymbolic };

struct TensorPlan {
  StorageKind storage = StorageKind::kAbsent;
  int64_t input_index = -1;  // kInput
  ir::Sym offset;            // kArena, bytes
  ir::Sym bytes;             // kArena, rounded size
  int32_t first = -1, last = -1;  // kArena: lifetime in instruction indices
  int32_t slot = -1;              // kArena with symbolic sizes: the slot it shares
};

struct MemoryPlan {
  ir::Trace trace;                 // stage "plan": the final instruction list
  std::vector<TensorPlan> tensors; // one per trace value
  ir::Sym arena_bytes;
  // Largest total of simultaneously live arena bytes, when shapes are static.
  std::optional<int64_t> lower_bound_bytes;
};

// Graph outputs that are not written by an instruction (a constant, an input, a
// shape-derived value) get an Identity copy into the arena first.
Result<MemoryPlan> PlanMemory(const ir::Trace& executors);

}  // namespace kiln::passes
