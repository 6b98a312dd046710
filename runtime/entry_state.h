// EntryState: what an ExecutionContext keeps per entry between Runs: the prologue's scratch
// and the entry's binding for the symbol values bound last (every tensor's dims, its arena
// offset, and its host data pointer once the tensor's memory is placed). The context binds shapes and the arena offsets of the entry's memory plan
// (runtime/context.cc); each backend places the arena in its own memory (runtime/backend.h,
// Backend::Prepare) and reads the binding to run.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/arena_plan.h"
#include "runtime/kernels/kernel.h"
#include "runtime/prologue.h"

namespace kiln {

struct EntryState {
  PrologueScratch scratch;
  PrologueFailure failure;  // this entry's failed check in the current Run
  bool bound = false;
  std::vector<int64_t> binding;      // symbol values the refs below were computed for
  uint64_t host_placement = 0;  // the cpu::HostMemory placement the arena pointers are for (0: none)
  uint64_t arena_needed = 0;          // bytes
  std::vector<uint64_t> arena_offsets;  // per tensor: its byte offset in the arena (0 unless an arena tensor)
  std::vector<int64_t> values;       // evaluated exprs
  std::vector<int64_t> dims;         // flat tensor dims, laid out as PreparedEntry::dim_exprs
  std::vector<cpu::TensorRef> refs;  // one per tensor
  std::vector<int64_t> symbolic;     // storage of Symbolic tensors
  std::vector<cpu::TensorRef> operands;  // flat instruction operands
  std::vector<int64_t> sizes;            // fused instructions' size arguments, evaluated
  // Operand slots holding model inputs, patched with the caller's pointers on every call.
  std::vector<std::pair<int32_t, int32_t>> input_slots;  // (slot, model input)
  // Operand slots holding arena tensors, given their pointers once the arena is placed.
  std::vector<std::pair<int32_t, int32_t>> arena_slots;  // (slot, tensor)
  uint64_t workspace_needed = 0;
  ArenaScratch arena_scratch;  // CheckArenaPlan's buffers, sized at Create
};

}  // namespace kiln
