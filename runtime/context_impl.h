// ExecutionContext::Impl: the per-context state behind Run: the backend that runs entries
// (runtime/backend.h), the CPU backend of a device backend's fallback segments, each entry's
// binding (runtime/entry_state.h), the executor's scratch and the Stats. Every buffer a
// steady-state Run touches is sized at Create or when an entry first sees a larger shape, so that
// Run with the shapes of the previous call allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/backend.h"
#include "runtime/bound_cache.h"
#include "runtime/entry_state.h"
#include "runtime/executor/loop.h"
#include "runtime/kernels/selective.h"
#include "runtime/instruction_observer.h"
#include "runtime/model_impl.h"

namespace kiln {

// The executor's scratch for one Run (runtime/executor/run_entry.h), kept so that a steady-state
// Run allocates nothing.
struct ExecutorScratch {
  // Per tensor of the running entry: a predicate's condition as read this Run (0 or 1), or -1
  // before it is read (again after each iteration of a run-time Loop).
  std::vector<int8_t> conditions;
  std::vector<LoopFrame> loops;  // the run-time Loops running, innermost last
  int64_t loop_iterations = 0;   // started this Run, by every loop
  // Host copies of model inputs in device memory, for CPU fallback segments that read them.
  std::vector<std::vector<uint8_t>> host_inputs;
  std::vector<int32_t> copied;  // the tensors the current fallback segment copied to the host
  size_t fallbacks = 0;         // Stats::last_fallbacks filled this Run
};

// Hidden: a nested class takes the KILN_API visibility of its enclosing class, and this one
// is internal to the runtime (libkiln_runtime.so must not export it).
struct [[gnu::visibility("hidden")]] ExecutionContext::Impl {
  explicit Impl(const Model& m) : model(m), mi(&m.impl()) {}

  Model model;  // keeps the mapping and prepared entries alive
  const Model::Impl* mi;
  std::unique_ptr<Backend> backend;
  // On a device backend: the CPU backend that runs the instructions the device does not
  // (Backend::Where), on the calling thread, in host memory placed at its first segment of a
  // binding. Null on the CPU backend.
  std::unique_ptr<Backend> host;
  std::string device_note;  // the backend's note, and why a backend asked for was not used
  Stats stats;
  std::vector<EntryState> entries;
  // Per entry: whether this context's backend runs it (its plan is for this backend, or for
  // every one: EntryInfo::backend). Run tries only these.
  std::vector<uint8_t> runs_entry;
  ExecutorScratch scratch;
  int64_t max_loop_iterations = 0;  // ContextOptions::max_loop_iterations
  int32_t warm_runs = 0;            // ContextOptions::warm_runs
  bool profile = false;             // ContextOptions::profile
  bool require_device_resident = false;  // CudaOptions::require_device_resident (runtime/device_resident.h)
  // Data pointers of the views the last Run handed out (one per model output). A caller
  // who passes that vector back without clear() gets it refilled, not treated as buffers
  // of their own: after the arena grows those pointers are freed memory.
  std::vector<const void*> delivered;
  int32_t last_ok_entry = -1;          // the entry the last Run ran, when it succeeded; else -1
  std::vector<TensorView> copy_views;  // CopyOutputs' views, reused
  InstructionObserver instruction_observer;  // runtime/instruction_observer.h; CPU backend
  // ExecutionContext::BindCache: per entry, its bound caches (empty when none are bound). A runtime
  // without BindCache (runtime/kernels/selective.h) has an always empty table, with nothing to
  // destroy.
#if KILN_KEEPS_BOUND_CACHE
  std::vector<EntryCaches> caches;
#else
  std::array<EntryCaches, 0> caches;
#endif
};

}  // namespace kiln
