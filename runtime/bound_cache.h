// The KV caches bound to an ExecutionContext (kiln/runtime.h, ExecutionContext::BindCache), as
// each entry runs them: which Attention instruction appends to which caller buffer, and which
// model outputs it writes there instead of into the arena.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/entry_state.h"
#include "runtime/model_impl.h"

namespace kiln {

// One Attention instruction that appends to two bound caches: its past_key and past_value
// inputs (model inputs) and its present_key and present_value outputs (model outputs) are the
// caller's buffers, [batch, kv_heads, capacity, head size] each.
struct CacheAppend {
  int32_t instruction = 0;
  int32_t past_key = 0, past_value = 0;        // model input indices
  int32_t present_key = 0, present_value = 0;  // model output indices
  int64_t capacity = 0;                        // rows per head (cpu::KernelCall::cache_rows)
};

// An entry's bound caches.
struct EntryCaches {
  std::vector<CacheAppend> appends;
  std::vector<int32_t> of_instruction;  // per instruction: its index in `appends`, or -1
  std::vector<uint8_t> bound_output;    // per model output: 1 when a bound cache holds it
  bool empty() const { return appends.empty(); }
};

// Checks, before entry `pe` runs at binding `s`, that the view of each present `caches` binds
// points at its past's buffer, which has room for its rows: kInvalidArgument otherwise.
Status CheckCaches(const ExecutionContext::Impl& c, const PreparedEntry& pe, const EntryState& s,
                   const EntryCaches& caches, std::span<const TensorView> inputs, const std::vector<TensorView>& outputs);

}  // namespace kiln
