// The CUDA backend's runner for one ExecutionContext: runs an entry's instructions on a
// device, on the caller's stream. Generated kernels are launched from the artifact's
// cubin for the device's arch (or its PTX, JIT-compiled by the driver); an instruction the
// artifact labels @cublaslt or @cudnn goes to that library when it is present and accepts the
// op (decided once per entry and binding of its symbols); every other op runs on the CPU
// backend. Consecutive instructions that run on the host form one CPU fallback region: one
// copy to the host of what the region reads from the device, one wait, the CPU kernels, one
// copy back of what is read after it, one wait (FallbackRegion in runner.cc). A library op
// that runs on the CPU is reported with the reason in Stats::last_fallbacks. The
// library workspace is planned once at the libraries' caps (32 MiB cuBLASLt, 64 MiB cuDNN).
// With cuda_graphs, an entry whose every instruction runs on the device is captured at its
// second run with the same shape and buffer addresses, and replayed afterwards; input
// staging and symbolic-value uploads stay outside the graph.
//
// Memory: one device arena holds the entry's arena tensors at their memory plan's offsets
// (EntryState::arena_offsets); host inputs are staged in device memory. The host arena and
// workspace (runtime/cpu/host_memory.h) that CPU fallback regions run in, at the same
// offsets, are placed at the first region of a binding: a context whose entries run wholly on
// the device holds none. Weights are
// uploaded once per (Model, device) and shared by every runner on that device.
//
// NOTE: written without a GPU. It runs end to end in CI on the emulated CUDA device
// (tests/emulated_cuda/), never yet on a GPU: scripts/gpu-check exercises it there.
//
// Thread-compatible: one runner per context, used by one thread at a time.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "runtime/backend.h"
#include "runtime/cpu/host_memory.h"
#include "runtime/entry_state.h"
#include "runtime/cuda/driver.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {

class Runner {
 public:
  // Opens device `ordinal`, uploads the weights (or reuses another runner's upload on the
  // same device) and loads every kernel's module. Errors: kFailedPrecondition (no driver,
  // no device), kIncompatible (a kernel has no cubin for the device's arch and no PTX; the
  // message lists the artifact's archs and the device's), kResourceExhausted (device
  // memory), kDeviceError (any other driver failure).
  // With `own_stream`, it also makes a non-blocking stream of its own (default_stream()).
  static Result<std::unique_ptr<Runner>> Create(const Model& model, int ordinal, bool cuda_graphs, bool profile,
                                                int64_t max_loop_iterations, bool own_stream);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  const DeviceInfo& device() const;
  // The stream a null `stream` means: the runner's own (ContextOptions::own_stream), else null
  // (the legacy default stream).
  CUstream default_stream() const;
  // "" when cuBLASLt and cuDNN are both in use; else which is missing and why (its ops then
  // run on the CPU backend), for the context's device_note().
  const std::string& library_note() const;

  // Runs entry `e` (its binding `s` is current). Device inputs are read in place; host
  // inputs are copied to device staging. Outputs: device views into the arena, valid until
  // the next Run. Enqueues on `stream` and returns without waiting, except around CPU
  // fallback regions, which need their inputs on the host; they run in `host`, placed for
  // `s` within `max_context_bytes` (LoadOptions::max_context_bytes) when a region first needs
  // it. A CPU fallback region ends at an instruction that reports a run-time dim: once it
  // ran, `runtime_dims` sets the dim (rebinding `s`), and the region's outputs go to the device
  // at their new sizes. Errors name the instruction.
  Status Execute(int32_t e, const PreparedEntry& pe, EntryState& s, cpu::HostMemory& host,
                 uint64_t max_context_bytes, std::span<const TensorView> inputs, CUstream stream,
                 std::vector<TensorView>& outputs, Stats& stats, RuntimeDimSetter& runtime_dims);

  // Waits for `stream`; then reports a generated kernel's failed index check as
  // kInvalidArgument (e.g. "Gather 'g' input 'idx': index 7 is out of range") and fills
  // Stats::last_gpu_ns from the call's CUDA events.
  Status Synchronize(CUstream stream, Stats& stats);

  // Copies `bytes` from device `src` to `dst` (host or device memory) on `stream`, for
  // outputs into caller buffers; the caller's Synchronize makes them visible.
  Status Copy(void* dst, MemoryKind dst_memory, const void* src, uint64_t bytes, CUstream stream);

  // Bytes this runner holds (ExecutionContext::memory_usage): device buffers plus the
  // uploaded weights; host copies of device inputs.
  uint64_t device_bytes() const;
  uint64_t host_bytes() const;

 private:
  struct State;
  explicit Runner(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cuda
