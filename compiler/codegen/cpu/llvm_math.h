// Placeholder until the math library lands: no transcendental function has native code yet.
#pragma once

#include <llvm-c/Core.h>

#include "runtime/fused/program.h"

namespace kiln::codegen::cpu {

// op(x) (op(x, y) for kPow) as branch-free IR that calls nothing; nullptr when not covered.
LLVMValueRef EmitMath(LLVMModuleRef m, LLVMBuilderRef b, fused::Op op, LLVMValueRef x, LLVMValueRef y = nullptr);
// The maximum error of EmitMath(op) in ULP; -1 when op is not covered.
int MathMaxUlp(fused::Op op);

}  // namespace kiln::codegen::cpu
