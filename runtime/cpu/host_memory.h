// The host memory CPU kernels run in: one arena that holds an entry's intermediate tensors at
// the offsets of its memory plan (runtime/arena_plan.h) and one kernel workspace, both
// 64-byte aligned, both only growing. The CPU backend runs every instruction in it; the CUDA
// backend runs its CPU fallback instructions in it (runtime/cuda/backend.h). A steady-state
// Run with the shapes of an earlier call allocates nothing.
//
// Thread-compatible: owned by one backend of one ExecutionContext.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "kiln/status.h"
#include "runtime/entry_state.h"
#include "runtime/model_impl.h"

namespace kiln::cpu {

// A 64-byte-aligned heap block that only grows; from 2 MiB, 2 MiB-aligned and advised for
// transparent huge pages (host_memory.cc). A new block is zero-filled, so its pages are touched
// when it grows, not by the first kernel that writes them.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }
  // False when the allocation fails; the old block is kept then.
  bool Reserve(uint64_t bytes);
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }  // bytes, as allocated (AllocationBytes)

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

class HostMemory {
 public:
  // Sizes the workspace the CPU kernels of entry `pe` need for its binding `s` (kernels split
  // over `threads` parts), grows the arena to s.arena_needed and the workspace to that, and
  // points every arena tensor and operand of `s` into the arena. `library_workspace`: bytes
  // the entry's library ops need (onednn.h), at least that much workspace. Errors, before
  // anything is allocated: kResourceExhausted when the arena plus the workspace would exceed
  // `max_context_bytes` (LoadOptions::max_context_bytes) or an allocation fails, naming the
  // entry and the sizes.
  Status Place(const PreparedEntry& pe, EntryState& s, int threads, uint64_t max_context_bytes,
               uint64_t library_workspace = 0);
  // Whether `s` was placed in the arena as it is now (false before its first placement and
  // after the arena moved).
  bool Holds(const EntryState& s) const { return s.host_placement != 0 && s.host_placement == placement_; }

  uint8_t* arena() const { return arena_.data(); }
  void* workspace() const { return workspace_.data(); }
  uint64_t workspace_bytes() const { return workspace_.size(); }
  uint64_t bytes() const { return arena_.size() + workspace_.size(); }  // as allocated

 private:
  AlignedBuffer arena_;
  AlignedBuffer workspace_;
  uint64_t placement_ = 0;  // counts the arena's moves (and its first placement)
};

}  // namespace kiln::cpu
