// The CPU backend (runtime/backend.h): every instruction of an entry runs on the host, a fused
// program in its portable interpreter (fused/interpreter.h) and every other op in its CPU kernel
// (kernels/registry.cc), one after the other on the calling thread, each splitting its outer loops
// over the context's thread pool (CpuOptions::threads). Memory: one host arena and
// kernel workspace (cpu/host_memory.h).
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace kiln::cpu {

// Errors: kInvalidArgument (KILN_MAX_CPU_ISA holds an unknown value), kResourceExhausted (a
// thread cannot be started).
Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const ContextOptions& options);

}  // namespace kiln::cpu
