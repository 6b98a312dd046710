// Validation of the epilogue annotations that passes/epilogue.h records on MatMul, Gemm and
// Conv nodes, shared by their meta functions (meta_matmul.cc, meta_conv.cc).
#pragma once

#include "compiler/ir/sym.h"
#include "compiler/ops/registry.h"
#include "kiln/status.h"

namespace kiln::ir::meta {

// Checks the epilogue attributes (runtime/kernels/epilogue.h parses them, so the compiler and
// the kernels accept the same forms), that the node has at most 4 inputs, and the residual
// (input 3): present exactly when epilogue_residual = 1, with the output's dtype and exactly
// its shape `out` (same rank, every dim the same Sym: no broadcast, no guard). Any epilogue
// needs a float32, float64, float16 or bfloat16 output (the CPU kernels see float16 and
// bfloat16 as float32, runtime/kernels/widen.h; cuBLASLt and cuDNN apply epilogues to them).
Status CheckEpilogue(MetaContext& ctx, const SymShape& out, DType out_dtype);

}  // namespace kiln::ir::meta
