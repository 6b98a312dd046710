// RunFused: the interpreter (interpreter.inc) built for baseline x86-64 here, for AVX2
// in interpreter_avx2.cc and for AVX-512 in interpreter_avx512.cc, chosen per call (by default
// ActiveCpuIsa()).
#include "runtime/fused/interpreter.h"

#include "runtime/fused/interpreter_variants.h"

#define KILN_FUSED_VARIANT baseline
#include "runtime/fused/interpreter.inc"
#undef KILN_FUSED_VARIANT

namespace kiln::cpu {

size_t FusedWorkspaceBytes(const fused::Program& program, int threads) {
  return baseline::WorkspaceBytes(program, threads);  // the same layout in every variant
}

Status RunFused(const fused::Program& p, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                std::span<const int64_t> sizes, void* workspace, size_t workspace_bytes, ThreadPool* threads,
                CpuIsa isa) {
#ifdef KILN_FUSED_HAS_X86_VARIANTS
  if (isa == CpuIsa::kAvx512) return avx512::Run(p, inputs, outputs, sizes, workspace, workspace_bytes, threads);
  if (isa == CpuIsa::kAvx2Fma) return avx2::Run(p, inputs, outputs, sizes, workspace, workspace_bytes, threads);
#endif
  (void)isa;
  return baseline::Run(p, inputs, outputs, sizes, workspace, workspace_bytes, threads);
}

}  // namespace kiln::cpu
