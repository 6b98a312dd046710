// The device model: one Model's weights uploaded to one CUDA device, and its generated kernels'
// modules loaded there, shared by every context of that Model on that device (one upload per
// (Model, device) while any context uses it).
//
// Thread-safe to share: immutable once made; SharedDeviceModel serialises making it.
#pragma once

#include <cuda.h>

#include <memory>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "runtime/cuda/driver.h"
#include "runtime/model_impl.h"

namespace kiln::cuda {

struct DeviceModel {
  const Driver* drv = nullptr;
  Model model;  // keeps the mapped artifact (and the cache key) alive
  CUdeviceptr weights = 0;
  std::vector<CUmodule> modules;
  std::vector<CUfunction> functions;  // one per kernel of the artifact; null for one no CUDA entry launches

  explicit DeviceModel(Model m) : model(std::move(m)) {}
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;
  ~DeviceModel();

  // Device address of weight `index`.
  CUdeviceptr Weight(int64_t index) const {
    return weights + model.impl().weight_table[static_cast<size_t>(index)].offset;
  }
};

// The image of kernel `k` that device `dev` runs: its own arch's cubin, else the PTX of the
// newest arch not above the device's (the driver JIT-compiles it); null when there is none.
const PreparedImage* PickImage(const PreparedKernel& k, const DeviceInfo& dev);

// The device model of `model` on `dev` (current context), made at its first use. Errors:
// kResourceExhausted (the weights do not fit), kIncompatible (a kernel has no cubin for the
// device's arch and no PTX it can JIT: the message lists the artifact's archs and the device's),
// kDeviceError for other driver failures.
Result<std::shared_ptr<DeviceModel>> SharedDeviceModel(const Driver& drv, const Model& model, const DeviceInfo& dev);

}  // namespace kiln::cuda
