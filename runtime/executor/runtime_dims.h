// Run-time dims during one Run (PreparedEntry::runtime_dims): sizes an instruction reports once
// it has run (NonZero's count, a run-time Loop's iterations). A Run starts each at its bound (the
// binding's), so the instruction that reports one has outputs with room for any size; the
// executor then sets it to the size found. When that differs from the binding, every shape of
// the entry is evaluated again for it (Binder::Bind) so the instructions after it (and the
// delivered outputs) see the size; the arena does not move (its plan reads no run-time dim).
// Inside a run-time Loop's body the instruction runs once per iteration: before each run the
// executor resets the dim to its bound again.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/status.h"
#include "runtime/executor/binder.h"

namespace kiln {

class RuntimeDims {
 public:
  RuntimeDims(Binder& binder, int32_t entry, EntryState& state, std::span<const TensorView> inputs, Stats& stats)
      : binder_(binder), entry_(entry), state_(state), inputs_(inputs), stats_(stats) {}

  // Sets `dim` to `value` and checks the guards that read it. *rebound: whether the binding
  // changed (the backends' derived state must follow: Backend::Bound). Errors: those of Bind
  // (kDataLoss when the memory plan does not hold for the size, kInvalidArgument when a shape
  // cannot be computed) and of a failed guard (kInvalidArgument).
  Status Set(int32_t dim, int64_t value, bool* rebound);
  // Binds `dim` at its bound again when an earlier iteration set it to another size.
  Status Reset(int32_t dim, bool* rebound);
  // The instruction of `dim` found its outputs full (a run-time Loop's iteration with no row
  // left in its scan outputs): `full` is the error that says so. When the dim's bound is a room
  // (PreparedRuntimeDim::room), the room doubles and the error returned says so; the Run stops
  // there (nothing enqueued after the work done so far) and runs again from its binding
  // (TakeGrowth). Otherwise, or when the room is at kMaxRoom, it returns `full`.
  Status Grow(int32_t dim, Status full);

  // Whether a Grow since the last call asked for the Run to run again.
  bool TakeGrowth();
  // Halves the room the last Grow doubled (its binding failed: over max_context_bytes), so that
  // later calls keep the room that fit.
  void UndoGrowth();

 private:
  Binder& binder_;
  int32_t entry_;
  EntryState& state_;
  std::span<const TensorView> inputs_;
  Stats& stats_;
  bool grew_ = false;
  int64_t* grown_ = nullptr;  // the room the last Grow doubled
};

}  // namespace kiln
