// The CPU backend's claims (runtime/claims.h): a fused region runs as a generated kernel (its
// portable program, interpreted: runtime/fused/interpreter.h); Conv, MaxPool, AveragePool, MatMul
// and Gemm on oneDNN (runtime/cpu/onednn/onednn.h), where the runtime has it
// (CpuOptions::onednn) and it takes the form; every other op on its CPU kernel.
#pragma once

#include <string_view>

#include "runtime/claims.h"

namespace kiln::cpu {

Claim ClaimOp(std::string_view op, bool fused);

}  // namespace kiln::cpu
