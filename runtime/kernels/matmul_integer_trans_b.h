// kiln.MatMulIntegerTransB: the CUDA plan's integer GEMM (compiler/passes/qdq.h), MatMulInteger
// with B given transposed and no zero points:
//
//   kiln.MatMulIntegerTransB(A, B) -> Y
//   A: int8 or uint8 [..., M, K] (rank >= 2), B: int8 or uint8 [N, K], Y: int32 [..., M, N]
//   Y[..., m, n] = sum over k of A[..., m, k] * B[n, k], in int32 (wrapping, as MatMulInteger)
//
// Both operands have K contiguous: the "TN" form cuBLASLt's int8 kernels (IMMA) take
// (runtime/cuda/blas.h), which MatMulInteger's B [K, N] is not. The compiler writes it for a
// quantized MatMul or Gemm whose weight is a constant, so the transposed B is made once, at
// compile time. Its CPU kernel (quantize.cc, plain loops) runs it where cuBLASLt does not.
#pragma once

#include <string_view>

namespace kiln::cpu {

inline constexpr std::string_view kMatMulIntegerTransBOp = "kiln.MatMulIntegerTransB";

}  // namespace kiln::cpu
