// The executor: one instruction loop for every backend, as ExecuTorch's Method runs its
// instructions and IREE's VM its control flow. For the entry a Run's prologue chose it
//  - binds the entry when its symbols changed (runtime/executor/binder.h);
//  - walks the instructions: reads each segment's predicates (a run-time If's conditions),
//    runs a run-time Loop's control itself (runtime/executor/loop.h), hands each segment
//    (runtime/executor/segments.h) to the context's backend, and sets the run-time dim its last
//    instruction reports (runtime/executor/runtime_dims.h);
//  - runs, on a device backend, the instructions the device does not take (Backend::Where) as CPU
//    fallback segments on the context's CPU backend: the tensors the segment reads from the
//    device come to the host (arena tensors into the host arena at their offsets, device model
//    inputs into host copies), one wait, the CPU kernels, then what is read after the segment
//    (or is an entry output) goes back to the device, and one wait before the host arena is used
//    again. Tensors that live and die inside the segment never cross; the memory plan makes this
//    safe (a tensor read after the segment is live to its end, so nothing the segment writes
//    shares its bytes). Instructions that did not run where their artifact names are reported
//    with the reason (Stats::last_fallbacks);
//  - keeps the profile's bookkeeping (Backend::Mark, Repeat) and delivers the outputs.
// No allocation and no strings on a steady-state Run's success path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kiln/status.h"
#include "runtime/context_impl.h"

namespace kiln {

// Runs entry `e` of context `c`, whose prologue passed for `inputs`, and hands out the outputs
// (ExecutionContext::Run's contract). A room that grows (RuntimeDims::Grow) runs the call again.
Status RunEntry(ExecutionContext::Impl& c, int32_t e, std::span<const TensorView> inputs,
                std::vector<TensorView>& outputs, void* stream);

// Prepares entry `e` of context `c`, whose prologue passed for `inputs`, as RunEntry does before
// its first instruction, running none (ExecutionContext::Warm): binds it where its symbols
// changed, then the backend warms the binding (Backend::Warm), and on a device backend the CPU
// backend of its fallback segments places their host memory.
Status WarmEntry(ExecutionContext::Impl& c, int32_t e, std::span<const TensorView> inputs);

// Copies the outputs of the last successful Run into the caller's views
// (ExecutionContext::CopyOutputs).
Status CopyLastOutputs(ExecutionContext::Impl& c, std::span<const TensorView> outputs, void* stream);

}  // namespace kiln
