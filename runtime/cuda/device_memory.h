// The device memory of one CUDA context (runtime/cuda/backend.h), each buffer only growing: the
// arena, which holds the running entry's arena tensors at their memory plan's offsets
// (EntryState::arena_offsets); the staging of host inputs; the entry's symbolic values; the
// generated kernels' error words; the cuBLASLt/cuDNN workspace. A steady-state Run with the
// shapes of an earlier call allocates nothing.
//
// Thread-compatible: owned by one context's backend.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/cuda/device_model.h"
#include "runtime/cuda/driver.h"
#include "runtime/entry_state.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {

// A device buffer that only grows.
struct DeviceBuffer {
  const Driver* drv = nullptr;
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  // At least `want` bytes; `what` names the buffer in the error (kResourceExhausted).
  Status Reserve(uint64_t want, const char* what);
  void Free();
  ~DeviceBuffer() { Free(); }
};

struct DeviceMemory {
  DeviceBuffer arena, staging, symbolic, err, library_ws;
  // This Run's device address of each model input (set by Reserve): its own when in device
  // memory, else its place in `staging`.
  std::vector<CUdeviceptr> input_ptrs;

  explicit DeviceMemory(const Driver& drv, size_t num_inputs);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Device address of tensor `t` of entry `pe` at its binding `s` (0 for an absent one).
  CUdeviceptr Address(const DeviceModel& dm, const PreparedEntry& pe, const EntryState& s, int32_t t) const;
  // Reserves the arena for `s`, the staging of the host inputs (256-byte aligned one after
  // another) and the symbolic values, and sets input_ptrs.
  Status Reserve(const EntryState& s, std::span<const TensorView> inputs);
  // Enqueues on `stream` the copies of the host inputs to staging and of `s`'s symbolic values;
  // device inputs are read in place.
  Status Stage(const EntryState& s, std::span<const TensorView> inputs, CUstream stream);
  // Enqueues the copy of `s`'s symbolic values (after a binding changed during the Run).
  Status UploadSymbolic(const EntryState& s, CUstream stream);
  uint64_t bytes() const;  // every buffer, as allocated

 private:
  std::array<DeviceBuffer*, 5> Buffers() { return {&arena, &staging, &symbolic, &err, &library_ws}; }
  const Driver* drv_;
};

}  // namespace kiln::cuda
