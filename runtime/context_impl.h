// ExecutionContext::Impl: the per-context state behind Run: the backend that runs entries
// (runtime/backend.h), each entry's binding (runtime/entry_state.h) and the Stats. Every
// buffer a steady-state Run touches is sized at Create or when an entry first sees a larger
// shape, so that Run with the shapes of the previous call allocates nothing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/backend.h"
#include "runtime/entry_state.h"
#include "runtime/instruction_observer.h"
#include "runtime/model_impl.h"

namespace kiln {

// Hidden: a nested class takes the KILN_API visibility of its enclosing class, and this one
// is internal to the runtime (libkiln_runtime.so must not export it).
struct [[gnu::visibility("hidden")]] ExecutionContext::Impl {
  explicit Impl(const Model& m) : model(m), mi(&m.impl()) {}

  Model model;  // keeps the mapping and prepared entries alive
  const Model::Impl* mi;
  std::unique_ptr<Backend> backend;
  std::string device_note;  // the backend's note, and why a backend asked for was not used
  Stats stats;
  std::vector<EntryState> entries;
  // Data pointers of the views the last Run handed out (one per model output). A caller
  // who passes that vector back without clear() gets it refilled, not treated as buffers
  // of their own: after the arena grows those pointers are freed memory.
  std::vector<const void*> delivered;
  int32_t last_ok_entry = -1;          // the entry the last Run ran, when it succeeded; else -1
  std::vector<TensorView> copy_views;  // CopyOutputs' views, reused
  InstructionObserver instruction_observer;  // runtime/instruction_observer.h; CPU backend
};

}  // namespace kiln
