// ExecutionContext::Impl: the per-context state behind Run. Every buffer a steady-state
// Run touches is sized at Create or when an entry first sees a larger shape, so that Run
// with the shapes of the previous call allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cpu/kernel.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/instruction_observer.h"
#include "runtime/model_impl.h"
#include "runtime/prologue.h"

namespace kiln {
namespace cuda {
#if KILN_HAVE_CUDA
class Executor;  // runtime/cuda/executor.h
#else
class Executor {};  // no CUDA backend in this build: never created, but unique_ptr needs a complete type
#endif
}

// A 64-byte-aligned heap block that only grows.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }
  // False when the allocation fails; the old block is kept then.
  bool Reserve(uint64_t bytes);
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Per-entry state: the prologue's scratch and the tensors as bound for the last symbol
// values this entry saw.
struct EntryState {
  PrologueScratch scratch;
  PrologueFailure failure;  // this entry's failed check in the current Run
  bool bound = false;
  std::vector<int64_t> binding;      // symbol values the refs below were computed for
  const uint8_t* arena_base = nullptr;  // arena they point into (it may move when it grows)
  uint64_t arena_needed = 0;
  std::vector<int64_t> values;       // evaluated exprs
  std::vector<int64_t> dims;         // flat tensor dims, laid out as PreparedEntry::dim_exprs
  std::vector<cpu::TensorRef> refs;  // one per tensor
  std::vector<int64_t> symbolic;     // storage of Symbolic tensors
  std::vector<cpu::TensorRef> operands;  // flat instruction operands
  std::vector<int64_t> sizes;            // fused instructions' size arguments, evaluated
  // Operand slots holding model inputs, patched with the caller's pointers on every call.
  std::vector<std::pair<int32_t, int32_t>> input_slots;  // (slot, model input)
  // Operand slots holding arena tensors, given their pointers once Bind placed the arena.
  std::vector<std::pair<int32_t, int32_t>> arena_slots;  // (slot, tensor)
  uint64_t workspace_needed = 0;
  ArenaScratch arena_scratch;  // CheckArenaPlan's buffers, sized at Create
};

// Hidden: a nested class takes the KILN_API visibility of its enclosing class, and this one
// is internal to the runtime (libkiln_runtime.so must not export it).
struct [[gnu::visibility("hidden")]] ExecutionContext::Impl {
  explicit Impl(const Model& m) : model(m), mi(&m.impl()) {}
  ~Impl();  // context.cc, where cuda::Executor is complete

  Model model;  // keeps the mapping and prepared entries alive
  const Model::Impl* mi;
  Device device = Device::kCpu;
  bool profile = false;
  std::string device_note;
  std::unique_ptr<cuda::Executor> cuda;  // set on the CUDA backend
  // CPU backend: the workers the kernels split their outer loops over (ContextOptions::
  // cpu_threads); null on the CUDA backend, whose CPU instructions run on the calling thread.
  std::unique_ptr<cpu::ThreadPool> threads;
  Stats stats;
  std::vector<EntryState> entries;
  AlignedBuffer arena;
  AlignedBuffer workspace;
  // Data pointers of the views the last Run handed out (one per model output). A caller
  // who passes that vector back without clear() gets it refilled, not treated as buffers
  // of their own: after the arena grows those pointers are freed memory.
  std::vector<const void*> delivered;
  std::vector<TensorView> device_views;  // CUDA backend: the outputs of the last Run
  InstructionObserver instruction_observer;  // runtime/instruction_observer.h; CPU backend
};

}  // namespace kiln
