// Backend: what runs an ExecutionContext's entries on one kind of device. The context
// (runtime/context.cc) runs the prologue, picks the entry, binds its shapes for the symbol
// values (EntryState) and hands the entry to its backend; it names no backend's internals.
// Backends:
//   cpu   runtime/cpu/backend.h: every instruction on the host, split over a thread pool;
//   cuda  runtime/cuda/backend.h: generated kernels, cuBLASLt and cuDNN on a CUDA device,
//         the instructions no device path takes as CPU fallbacks.
// A backend is added with its folder and one line in RegisteredBackends (backend_registry.cc).
//
// Thread-compatible: one backend per context, used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "runtime/entry_state.h"
#include "runtime/instruction_observer.h"
#include "runtime/model_impl.h"

namespace kiln {

// How a backend sets an entry's run-time dims (PreparedEntry::runtime_dims) during Execute.
// A Run starts with each at its bound (the context binds it so), so the instruction that
// reports one has outputs with room for any size; the backend runs it with
// KernelCall::runtime_size, then calls Set with the size the kernel found. When that differs
// from the binding, the context evaluates every shape again for it and calls Backend::Prepare,
// so the instructions after it (and Deliver) see the size; the arena does not move (its plan
// reads no run-time dim). Errors: those of binding (kDataLoss when the memory plan does not
// hold for the size, kInvalidArgument when a shape cannot be computed).
// Inside a run-time Loop's body the instruction runs once per iteration: before each run the
// backend calls Reset, which binds the dim at its bound again when an earlier iteration set it
// to another size (a compare otherwise), so the outputs again have room for any size.
class RuntimeDimSetter {
 public:
  virtual Status Set(int32_t dim, int64_t value) = 0;
  // *rebound: whether the binding changed (the backend's derived state must follow, as after Set).
  virtual Status Reset(int32_t dim, bool* rebound) = 0;
  // The instruction of run-time dim `dim` found its outputs full (a run-time Loop's iteration
  // with no row left in its scan outputs): `full` is the error that says so. When the dim's
  // bound is a room (PreparedRuntimeDim::room), the context doubles it and returns an error
  // that the backend returns from Execute at once (leaving its memory as it is, nothing
  // enqueued after the work done so far); the context then binds the entry again and runs
  // the call again. Otherwise, or when the room is at kMaxRoom, it returns `full`.
  virtual Status Grow(int32_t dim, Status full) = 0;

 protected:
  ~RuntimeDimSetter() = default;
};

// One Run of entry `entry` whose binding `state` is current and prepared (Backend::Prepare).
struct BackendRun {
  int32_t entry;
  const PreparedEntry& pe;
  EntryState& state;
  std::span<const TensorView> inputs;  // the caller's, in model input order, checked by the prologue
  void* stream;                        // the caller's stream (CUstream on CUDA), or null
  Stats& stats;
  const InstructionObserver& observer;  // empty when unset; the CPU backend calls it
  RuntimeDimSetter& runtime_dims;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // What runs and how (ExecutionContext::device_note), e.g. "CPU backend, 2 threads".
  virtual const std::string& note() const = 0;
  // The memory the prologue accepts inputs in: kHost, or kAnyMemory (prologue.h) on a device.
  virtual MemoryKind input_memory() const = 0;

  // Whether `s`, bound for its symbols, still points into this backend's memory as it is now
  // (false after the memory moved to grow for another entry).
  virtual bool Holds(const EntryState& s) const = 0;
  // Called after each new binding `s` of entry `pe` (which left its arena tensors' data
  // pointers null): plans this backend's memory for it (arena, workspaces), allocating it and
  // pointing `s`'s arena tensors into it, or checking it now and placing it when it runs (the
  // CUDA backend: device addresses from EntryState::arena_offsets). Errors:
  // kResourceExhausted (over LoadOptions::max_context_bytes, or an allocation failed).
  virtual Status Prepare(const PreparedEntry& pe, EntryState& s) = 0;

  // Runs the entry: on the CPU it returns when the outputs are computed; on a device it
  // enqueues on run.stream. Errors name the instruction.
  virtual Status Execute(const BackendRun& run) = 0;
  // Hands out the outputs of the last Execute: views of the backend's memory, valid until the
  // next Run (`into_caller` false), or copies into the caller's views (`into_caller` true;
  // their count, dtypes, shapes, data pointers and memory kinds (input_memory()) were checked
  // against the binding). On a device, the copies are enqueued on run.stream.
  virtual Status Deliver(const BackendRun& run, std::vector<TensorView>& outputs, bool into_caller) = 0;
  // Waits for the work enqueued on `stream`; reports errors found on the device then.
  virtual Status Synchronize(void* stream, Stats& stats) = 0;

  virtual ExecutionContext::MemoryUsage memory_usage() const = 0;
};

// How a context gets a backend. `create` opens the device of options.device_ordinal;
// `Create` of a device that is not there fails with kFailedPrecondition and the reason.
struct BackendRegistration {
  Device device;
  const char* name;   // "cpu", "cuda": as in --device
  const char* title;  // "CPU", "CUDA": as in device notes ("CUDA unavailable: ...")
  Result<std::unique_ptr<Backend>> (*create)(const Model& model, const ContextOptions& options);
};

// The backends built into this runtime, in the order Device::kAuto tries them (the CPU
// backend last, always present).
std::span<const BackendRegistration> RegisteredBackends();

}  // namespace kiln
