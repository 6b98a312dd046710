// The fused-program interpreter (interpreter.inc) in each instruction set it is built
// for; RunFused (interpreter.h) chooses one. Each has FusedWorkspaceBytes's and RunFused's contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kiln/status.h"
#include "runtime/kernels/kernel.h"
#include "runtime/fused/program.h"

namespace kiln::cpu {

namespace baseline {
size_t WorkspaceBytes(const fused::Program& program, int threads);
Status Run(const fused::Program& p, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
           std::span<const int64_t> sizes, void* workspace, size_t workspace_bytes, ThreadPool* threads);
}  // namespace baseline

// A selective runtime (runtime/kernels/selective.h) has the baseline build alone.
#if defined(__x86_64__) && defined(__GNUC__) && !KILN_SELECTIVE
#define KILN_FUSED_HAS_X86_VARIANTS 1
namespace avx2 {
size_t WorkspaceBytes(const fused::Program& program, int threads);
Status Run(const fused::Program& p, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
           std::span<const int64_t> sizes, void* workspace, size_t workspace_bytes, ThreadPool* threads);
}  // namespace avx2
namespace avx512 {
size_t WorkspaceBytes(const fused::Program& program, int threads);
Status Run(const fused::Program& p, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
           std::span<const int64_t> sizes, void* workspace, size_t workspace_bytes, ThreadPool* threads);
}  // namespace avx512
#endif

}  // namespace kiln::cpu
