// Binding: an entry's tensors laid out for the symbol values its prologue bound (every dim, data
// pointer and arena offset, cached per entry in EntryState), then placed by the context's
// backend (Backend::Prepare). The executor binds an entry before it runs when its symbols
// changed, and again during a Run when a run-time dim is set (runtime/executor/runtime_dims.h).
// No allocation once the entry has seen its shapes; strings only on failure.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/status.h"
#include "runtime/context_impl.h"

namespace kiln {

class Binder {
 public:
  explicit Binder(ExecutionContext::Impl& c) : c_(c) {}

  // Evaluates the entry's exprs for the symbols its prologue just bound and lays out every
  // tensor: dims, data pointer, arena size; then the backend places it (Backend::Prepare).
  // Checks the memory plan for these shapes (unless load did) before the backend allocates
  // anything. Run-time dims start at their bounds, unless `runtime_dims_set` (a run-time dim
  // changed during the run). Errors: kInvalidArgument (a shape cannot be computed or is too
  // large), kDataLoss (the plan does not hold for these shapes), the backend's.
  Status Bind(int32_t e, std::span<const TensorView> inputs, bool runtime_dims_set = false);

  // Whether the entry must be bound before it runs: its symbols changed, the backend's memory
  // moved, or a run-time dim is not at its bound (a Run starts there, so that the instruction
  // that reports it has room for any size: each call whose sizes changed binds twice or more).
  bool NeedsBind(int32_t e) const;

  // Run-time dim `dim` of entry `e`: its symbol, and its bound for this Run as the prologue
  // evaluated it.
  int32_t RuntimeSymbol(int32_t e, int32_t dim) const;
  int64_t RuntimeBound(int32_t e, int32_t dim) const;
  // The guards checked once run-time dim `dim` is set, on the binding's values: a failure is
  // kInvalidArgument naming the guard and the symbols it reads, as bound in this run.
  Status CheckRuntimeGuards(int32_t e, int32_t dim) const;

  const PreparedEntry& entry(int32_t e) const { return c_.mi->prepared[static_cast<size_t>(e)]; }

 private:
  Status LayOut(const PreparedEntry& pe, EntryState& s, int32_t t, std::span<const TensorView> inputs);

  ExecutionContext::Impl& c_;
};

// A view's shape as ShapeText writes it (runtime/shape_text.h), or "of rank R" for a rank outside
// [0, kMaxRank] (a caller's view may carry any).
std::string ViewShapeText(const int64_t* dims, int32_t rank);

}  // namespace kiln
