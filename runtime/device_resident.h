// CudaOptions::require_device_resident: the checks that make a device context fail closed rather
// than copy tensor data to the host (docs/architecture.md, "Device residency"). The run-time half
// (an instruction a library refuses at the call's shapes) is in the executor's CPU regions
// (runtime/executor/run_entry.cc).
#pragma once

#include <span>
#include <string_view>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/context_impl.h"

namespace kiln {

// At Create: the context's backend is a device's, and no entry it runs places an instruction on
// the host. kFailedPrecondition naming the entry, the instruction, its ONNX node and op, or the
// device note when the context is on the CPU. `backend` is its name ("cuda").
Status CheckResidentPlan(const ExecutionContext::Impl& c, std::string_view backend);

// At Run: every input and caller's output with data is in device memory. kInvalidArgument naming
// the first that is not.
Status CheckResidentTensors(const ExecutionContext::Impl& c, std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs);

}  // namespace kiln
