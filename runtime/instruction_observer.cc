#include "runtime/instruction_observer.h"

#include "runtime/context_impl.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/executor.h"  // the complete type ExecutionContext::Impl's members need
#endif

namespace kiln {

void SetInstructionObserver(ExecutionContext& ctx, InstructionObserver observer) {
  ctx.impl().instruction_observer = std::move(observer);
}

}  // namespace kiln
