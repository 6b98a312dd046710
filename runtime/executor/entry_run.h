// EntryRun: one Run of an entry on the executor (runtime/executor/run_entry.h), from its first
// instruction to its last. Internal to the executor: run_entry.cc runs segments and predicates,
// loop.cc a run-time Loop's control.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/status.h"
#include "runtime/backend.h"
#include "runtime/context_impl.h"
#include "runtime/executor/runtime_dims.h"

namespace kiln {

// What a control transfer is, for its errors: "kiln.LoopEnd: carried value" and an index (-1:
// none), formatted only when one fails, so that a steady-state Run builds no string.
struct TransferName {
  const char* what;
  int64_t index = -1;
  std::string str() const { return index < 0 ? what : std::string(what) + " " + std::to_string(index); }
};

class EntryRun {
 public:
  EntryRun(ExecutionContext::Impl& c, const BackendRun& run, RuntimeDims& dims);
  // Every instruction of the entry, in order, with the jumps of its run-time Loops.
  Status Go();

 private:
  // Runs the segment that starts at instruction k (its predicates hold) on the backend or, where
  // the backend places it on the host, on the host; *next: the instruction after it.
  Status RunSegment(size_t k, size_t* next);
  Status RunOnHost(size_t begin, size_t end, int32_t dim);
  Status RunOnHostTimed(size_t begin, size_t end, int32_t dim);  // RunOnHost less its timing and residency check
  // Whether instruction `pi`'s predicates hold, each condition read once per Run (and loop
  // iteration). kDataLoss for a condition that is not one bool.
  Status Holds(const PreparedInstruction& pi, bool* holds);
  // Sets run-time dim `dim` to `size` (or back to its bound), following a new binding.
  Status SetDim(int32_t dim, int64_t size);
  Status ResetDim(int32_t dim);
  // The binding changed: the backend follows it, and the placement is read again.
  Status Rebound();
  // What ran instructions [begin, end): Stats::last_fallbacks, and when profiling
  // Stats::last_instruction_library.
  void Report(size_t begin, size_t end);

  // A run-time Loop's control (loop.cc).
  Status LoopBegin(size_t k, size_t* next);
  Status LoopEnd(size_t k, size_t* next);
  Status StartIteration(const char* op);

  // Transfers for the control: one element of `dtype` of tensor t read to the host (directly
  // where its memory is the host's, else through the backend, one wait); written from the host;
  // tensor `from` copied into `to` at byte `offset`, or into all of `to` (`whole`). kDataLoss
  // naming the tensors when they do not fit.
  Status ReadScalar(int32_t t, DType dtype, void* out, const TransferName& name);
  Status WriteScalar(int32_t t, DType dtype, const void* value, const TransferName& name);
  Status CopyTensor(int32_t from, int32_t to, uint64_t offset, bool whole, const TransferName& name);

  ExecutionContext::Impl& c_;
  const BackendRun& run_;
  const PreparedEntry& pe_;
  EntryState& s_;
  Backend& backend_;
  RuntimeDims& dims_;
  ExecutorScratch& x_;
  Placement place_;
};

}  // namespace kiln
