// Backend: what runs straight-line work of an ExecutionContext's entries on one kind of device.
// Control lives in the executor (runtime/executor/run_entry.h), as in ExecuTorch's Method and
// IREE's VM: it runs the prologue's entry, reads predicates, runs a run-time Loop's control and
// sets run-time dims, and hands each *segment* (a run of instructions with no host decision
// between them, runtime/executor/segments.h) to a backend. A backend never sees a jump.
// Backends:
//   cpu   runtime/cpu/backend.h: every instruction on the host, split over a thread pool;
//   cuda  runtime/cuda/backend.h: generated kernels, cuBLASLt and cuDNN on a CUDA device; the
//         instructions it does not run (Placement) the executor runs on a CPU backend of the
//         context's own, as CPU fallback segments, with the copies between them.
// A backend is added with its folder and one line in backend_registry.cc, its claims included;
// docs/adding_a_backend.md walks through it.
//
// Thread-compatible: one backend per context, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "runtime/bound_cache.h"
#include "runtime/claims.h"
#include "runtime/entry_state.h"
#include "runtime/instruction_observer.h"
#include "runtime/model_impl.h"

namespace kiln {

// One Run of entry `entry`, whose binding `state` is current and prepared (Backend::Prepare).
struct BackendRun {
  int32_t entry;
  const PreparedEntry& pe;
  EntryState& state;
  std::span<const TensorView> inputs;  // the caller's, in model input order, checked by the prologue
  void* stream;                        // the caller's stream (CUstream on CUDA), or null
  Stats& stats;
  const InstructionObserver& observer;  // empty when unset; the CPU backend calls it
  // The entry's bound KV caches (ExecutionContext::BindCache), or null: the CPU backend runs
  // their Attention instructions on the caller's buffers and does not deliver their outputs.
  const EntryCaches* caches = nullptr;
};

// Instructions [begin, end) of the running entry, all under the same predicates, none a
// run-time Loop's control, none but the last reporting a run-time dim.
struct Segment {
  size_t begin = 0;
  size_t end = 0;
  // Set when the last instruction reports a run-time dim (KernelDef::runtime_size): its kernel
  // stores the size it found here (runtime/kernels/kernel.h, KernelCall::runtime_size).
  int64_t* runtime_size = nullptr;
};

// Where the instructions of an entry run at its current binding, as a backend decides it.
struct Placement {
  // Per instruction: 1 when the executor runs it on the host (a CPU fallback region), 0 when
  // this backend does. Empty: every instruction runs on this backend.
  std::span<const uint8_t> host;
  // Per instruction (one each): what runs it (on the host: what the context's CPU backend runs
  // it with, Kiln's CPU kernel). Stats::last_instruction_library.
  std::span<const Library> library;
  // Per instruction (or empty): why it does not run where its artifact names, "" where it does
  // (a library that is missing or refuses the form: Stats::last_fallbacks).
  std::span<const std::string> why;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // What runs and how (ExecutionContext::device_note), e.g. "CPU backend, 2 threads".
  virtual const std::string& note() const = 0;
  // The memory the prologue accepts inputs in: kHost, or kAnyMemory (prologue.h) on a device.
  virtual MemoryKind input_memory() const = 0;

  // ---- An entry's memory at a binding of its symbols --------------------------------------
  // Whether `s`, bound for its symbols, still points into this backend's memory as it is now
  // (false after the memory moved to grow for another entry).
  virtual bool Holds(const EntryState& s) const = 0;
  // Called after each new binding `s` of entry `pe` (which left its arena tensors' data
  // pointers null): plans this backend's memory for it (arena, workspaces, library plans),
  // allocating it and pointing `s`'s arena tensors into it, or checking it now and placing it
  // when it runs (the CUDA backend: device addresses from EntryState::arena_offsets). Errors:
  // kResourceExhausted (over LoadOptions::max_context_bytes, or an allocation failed).
  virtual Status Prepare(const PreparedEntry& pe, EntryState& s) = 0;
  // ExecutionContext::Warm, after Prepare of run.state's binding: does what this backend's first
  // Run at that binding would do before its instructions (memory for run.inputs as they are,
  // library plans and the weights they read in their layouts, threads), running none of them.
  // The data of run.inputs may be a placeholder: it is never read. The default does nothing.
  // Errors: kResourceExhausted, a library's.
  virtual Status Warm(const BackendRun& run) {
    static_cast<void>(run);
    return Status::Ok();
  }

  // ---- One Run, in order: Begin, segments and transfers, End -----------------------------
  // Before the first segment: inputs staged where the backend reads them, timers started.
  virtual Status Begin(const BackendRun& run) = 0;
  // The binding changed during the Run (a run-time dim was set): what follows it (symbolic
  // values on the device, library decisions, workspaces) is brought up to date.
  virtual Status Bound(const BackendRun& run) = 0;
  // Where the entry's instructions run at the current binding. Valid until the next Bound, or
  // RunSegment returning early.
  virtual Placement Where(const BackendRun& run) = 0;
  // Runs (on the CPU) or enqueues on run.stream (on a device) the instructions of `seg`, which
  // Where places on this backend. *done: the end of what ran; before seg.end when a library
  // refused an instruction only when it ran (Where then places it on the host, and the executor
  // goes on from *done). Errors name the instruction.
  virtual Status RunSegment(const BackendRun& run, const Segment& seg, size_t* done) = 0;
  // Transfers between the backend's memory and the host, for the executor's control and its
  // CPU fallback segments: tensor `t` of the running entry (an arena tensor, or a model input in
  // the backend's memory), at byte `offset`. On a device they are enqueued on run.stream;
  // Wait makes them complete. Errors: kDeviceError naming the tensor.
  virtual Status ToHost(const BackendRun& run, int32_t t, void* host, uint64_t bytes) = 0;
  virtual Status FromHost(const BackendRun& run, int32_t t, uint64_t offset, const void* host, uint64_t bytes) = 0;
  // Copies `bytes` of tensor `from` into tensor `to` at byte `offset`, in the backend's memory.
  virtual Status Copy(const BackendRun& run, int32_t from, int32_t to, uint64_t offset, uint64_t bytes) = 0;
  virtual Status Wait(const BackendRun& run) = 0;
  // After the last segment.
  virtual Status End(const BackendRun& run) = 0;

  // Profiling (ContextOptions::profile; Stats::last_instruction_ns): instructions [first, last)
  // ended without a RunSegment of this backend (skipped by a predicate, a run-time Loop's
  // control, a CPU fallback segment): their time ends here.
  virtual Status Mark(const BackendRun& run, size_t first, size_t last) = 0;
  // Profiling: the run-time Loop from kiln.LoopBegin `begin` to kiln.LoopEnd `end` - 1 ran an
  // iteration and runs its body again: the times so far are kept, the next iteration's added.
  virtual Status Repeat(const BackendRun& run, size_t begin, size_t end) = 0;

  // ---- After the Run ----------------------------------------------------------------------
  // Hands out the outputs of the last Run: views of the backend's memory, valid until the
  // next Run (`into_caller` false), or copies into the caller's views (`into_caller` true;
  // their count, dtypes, shapes, data pointers and memory kinds (input_memory()) were checked
  // against the binding). On a device, the copies are enqueued on run.stream.
  virtual Status Deliver(const BackendRun& run, std::vector<TensorView>& outputs, bool into_caller) = 0;
  // Waits for the work enqueued on `stream`; reports errors found on the device then.
  virtual Status Synchronize(void* stream, Stats& stats) = 0;

  virtual ExecutionContext::MemoryUsage memory_usage() const = 0;
};

// A backend as the runtime and the compiler know it. `create` opens the device of
// its device (CudaOptions::device_ordinal on CUDA); Create of a device that is not there fails with kFailedPrecondition and
// the reason. A backend this runtime was built without keeps its registration, with its claims
// (the compiler records its placements), but no `create`.
struct BackendRegistration {
  Device device;
  const char* name;   // "cpu", "cuda": as in --device and InstructionPlacement::backend
  const char* title;  // "CPU", "CUDA": as in device notes ("CUDA unavailable: ...")
  Result<std::unique_ptr<Backend>> (*create)(const Model& model, const ContextOptions& options);
  ClaimFn claim;        // runtime/claims.h
  const char* missing;  // without `create`: why ("this runtime was built without the CUDA toolkit")
};

// The registered backends, in the order Device::kAuto tries them (the CPU backend last, always
// present). Thread-safe, unless RegisterBackend runs at the same time.
std::span<const BackendRegistration> RegisteredBackends();

// Adds a backend (before the CPU backend), for a backend linked into a program of its own: Kiln's
// tests register a toy one (tests/runtime/toy_backend/). Not thread-safe: call it before any
// context or compile reads the registry. kInvalidArgument when its device or name is registered
// already.
Status RegisterBackend(const BackendRegistration& backend);
// Removes the backend RegisterBackend added under `name`; kNotFound when there is none (the
// built-in ones stay). Not thread-safe, as RegisterBackend.
Status UnregisterBackend(std::string_view name);

// What runs instruction `op` (`fused`: a kiln.Fused region) on `backend`: its claims, except for
// a run-time Loop's control, which the executor runs on every backend.
Claim ClaimOn(const BackendRegistration& backend, std::string_view op, bool fused);

}  // namespace kiln
