// The CUDA half of the preflight (kiln/check.h): the driver and device found, and per entry and
// instruction what the CUDA backend would run, without making a context, allocating device memory
// or loading a module.
#pragma once

#include "kiln/check.h"
#include "kiln/runtime.h"

namespace kiln::cuda {

// Fills `out` (its device already named "cuda:N") for `model` on device `ordinal`: the driver's
// and device's description, the oldest driver this runtime accepts, each CUDA entry's
// instructions' paths (cubin, PTX JIT, cuBLASLt, cuDNN, CPU region), the libraries the plan calls
// against their required major (one missing is a note: its instructions run in CPU regions), and
// every reason the device cannot run it (no driver, no device, a kernel without an image for its
// arch, weights and arena above its memory).
void CheckDevice(const Model& model, int ordinal, DeviceCheck& out);

}  // namespace kiln::cuda
