// Epilogue folding: the bias add, activation and residual add that follow a MatMul, Gemm or
// Conv become annotations on that node, so that the CUDA backend can ask cuBLASLt and cuDNN
// to run them inside the GEMM or convolution, and the CPU backend applies them while the
// output is still in cache (runtime/kernels/epilogue.h). The separate Add/Relu/... nodes are
// gone from the trace; the annotated node is the only instruction left for the chain.
//
// ---- What is folded ---------------------------------------------------------------------
//   P = MatMul | Gemm | Conv, with a float32, float64, float16 or bfloat16 output
//   then, each step optional, in this order:
//   1. bias:      Add(P, c) or Add(c, P), c a constant that only varies along the output
//                 channel: Conv: c of shape [C,1,1], [1,C,1,1], [1], ... (axis 1 of the
//                 output, right-aligned broadcasting); MatMul/Gemm: [N], [1,N], [1] (the
//                 last axis). The Add's output must have P's shape (c broadcasts into P,
//                 never P into c). Conv's own bias B and Gemm's own C, when present, must be
//                 constants too: the two are summed at compile time.
//   2. then either an activation followed by a residual ("bias,act,residual", the order of
//      e.g. transformer blocks) or a residual followed by an activation ("bias,residual,act",
//      ResNet's Conv -> Add(shortcut) -> Relu), each again optional:
//      activation: Relu, Gelu (approximate "none" or "tanh"), Sigmoid, HardSwish, SiLU
//                  written as Mul(x, Sigmoid(x)) (either operand order), and HardSwish
//                  written as Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6) (either operand order in
//                  the Add and the Mul; 0, 3 and 6 one-element constants, or Clip's min/max
//                  attributes), and Gelu written out with Erf as PyTorch exports it before
//                  opset 20, Mul(x, Add(Erf(Div(x, sqrt2)), 1)) * 0.5 or Mul(x * 0.5,
//                  1 + Erf(x * (1/sqrt2))) (either operand order; sqrt2 and 1/sqrt2 as float32
//                  constants, 1 and 0.5 exactly), x the pre-activation;
//      residual:   Add(t, r) or Add(r, t), r not a constant, of t's dtype and exactly t's
//                  shape (same rank, every dim the same, static or symbolic: no broadcast).
//   Every value inside the chain (P's output and each intermediate) must have exactly one
//   reader and must not be a model output; SiLU's x has exactly two readers, its Sigmoid and
//   its Mul, and the Sigmoid's output only the Mul; the written-out HardSwish's x exactly two,
//   its Add and its Mul. Only float chains fold (float32, float64, and the float16 / bfloat16 of
//   `--precision`: a folded half chain is computed in float32 and rounded once, where the
//   unfolded one rounds after every step; a bias summed here is rounded to the half type, as
//   the lowered constants are). The written-out HardSwish then
//   computes x * clamp(x / 6 + 0.5, 0, 1) (runtime/kernels/activation.h), which may differ from
//   x * clip(x + 3, 0, 6) / 6 in the last bit or two.
//
// ---- The annotated form (the contract for the backends) ----------------------------------
//   Conv(X, W[, B[, R]])        B: [M], the ONNX bias, now holding the folded bias too.
//   Gemm(A, B[, C[, R]])        C: the ONNX C. A folded bias becomes C ([N]), or is merged
//                               into a constant C (beta*C + bias, of C's shape broadcast with
//                               [N]); either way the attribute beta is then 1.
//   MatMul(A, B[, bias[, R]])   bias: a 1-D [N] tensor of A's dtype (float32 or float64),
//                               N the output's last dim (B's last dim; B of rank >= 2),
//                               added to every row:
//                               Y[..., i, j] = sum_k A[..., i, k] * B[..., k, j] + bias[j].
//   An optional input that is absent is kNoValue, so the residual R is always input 3.
//   Attributes (names and parsing in runtime/kernels/epilogue.h; absent means none/default):
//     epilogue_activation  string: "Relu", "Gelu" (erf), "GeluTanh", "Sigmoid", "HardSwish",
//                          "SiLU" (x * Sigmoid(x)).
//     epilogue_residual    int 1: input 3 is the residual R, of exactly the output's shape
//                          and dtype (the meta functions and the kernels both check).
//     epilogue_order       string: "bias,act,residual" (default) or "bias,residual,act".
//   Meaning: Y = P(inputs) + bias; then, in epilogue_order, Y = act(Y) and Y = Y + R. The
//   node keeps its name, its output is the chain's last value, and it sits where the chain's
//   last node was (so R is computed before it). Formulas: runtime/kernels/activation.h.
//
// ---- Which library fusion takes them (for the CUDA backend) ------------------------------
//   cuBLASLt (cublasLtMatmul with CUBLASLT_MATMUL_DESC_EPILOGUE and, for a bias,
//   CUBLASLT_MATMUL_DESC_BIAS_POINTER). Row-major Y = A*B is computed as column-major
//   Y^T = B^T * A^T, so the bias over Y's N columns is the bias over the rows of cuBLASLt's D,
//   which is what its BIAS epilogues broadcast:
//     bias only                 CUBLASLT_EPILOGUE_BIAS
//     bias + Relu               CUBLASLT_EPILOGUE_RELU_BIAS   (CUBLASLT_EPILOGUE_RELU without bias);
//                               only in CPU-only artifacts: its max(x, 0) has no NaN rule, so a
//                               GPU artifact keeps Relu as a generated kernel (docs/semantics.md)
//     bias + Gelu               CUBLASLT_EPILOGUE_GELU_BIAS   (CUBLASLT_EPILOGUE_GELU without bias)
//       cuBLASLt documents its GELU epilogue only as "GELU"; PyTorch routes only
//       gelu(approximate="tanh") to it, so map "GeluTanh" there, and check the other form
//       numerically against the CPU kernels before mapping "Gelu" (erf) onto it too.
//     Sigmoid, HardSwish, SiLU  no cuBLASLt epilogue: BIAS epilogue, then a generated
//                               elementwise kernel for the activation (and residual).
//     residual R                the C matrix with beta = 1 (D = alpha*A*B + beta*C, then the
//                               epilogue), which is the order "bias,residual,act", or either
//                               order without an activation. "bias,act,residual" with an
//                               activation cannot be one call: the residual add runs after.
//     Gemm with a full [M, N] C the C matrix with beta = 1, epilogue without BIAS.
//   cuDNN:
//     cudnnConvolutionBiasActivationForward computes y = act(alpha1 * conv(x, w) + alpha2 * z
//     + bias) with act CUDNN_ACTIVATION_RELU or CUDNN_ACTIVATION_IDENTITY: order
//     "bias,residual,act" (z = R, alpha2 = 1; alpha2 = 0 without R) with Relu or none.
//     The cuDNN graph API (runtime fusion engines) takes ConvolutionFwd followed by a chain of
//     pointwise ops in either order: CUDNN_POINTWISE_ADD for the bias ([1, C, 1, 1]) and for R,
//     then CUDNN_POINTWISE_RELU_FWD, CUDNN_POINTWISE_GELU_FWD ("Gelu"),
//     CUDNN_POINTWISE_GELU_APPROX_TANH_FWD ("GeluTanh"), CUDNN_POINTWISE_SIGMOID_FWD,
//     CUDNN_POINTWISE_SWISH_FWD ("SiLU"). HardSwish has no pointwise mode of its own
//     (compose it from ADD/MUL/MIN/MAX, or run a generated kernel after the convolution).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// Which activations fold into an epilogue.
//   kAny: every activation above; the CPU kernels apply them all (a CPU-only artifact).
//   kGpuLibraries: only those the CUDA backend's library call applies with the operation:
//     Relu on Conv (cudnnConvolutionBiasActivationForward), Relu and GeluTanh on MatMul/Gemm
//     (cuBLASLt; runtime/cuda/blas.cc, dnn.cc). Any other activation stays a separate op that
//     fusion makes a generated kernel; folded, it would send its Conv/MatMul to the CPU on the
//     CUDA backend (the libraries refuse the epilogue). An artifact for GPU archs uses this.
enum class EpilogueActivations { kAny, kGpuLibraries };

// Returns `canonical` (stage "canonical", shapes inferred) with every foldable chain folded
// into its MatMul, Gemm or Conv; stage "epilogue". When `log` is not null, appends one line
// per annotated node, e.g. "conv1 (Conv): folded bias 'b', Relu 'relu1', residual 'x' into
// the epilogue". Nodes that already carry an epilogue are left alone, so running it twice
// changes nothing. Errors only if re-inferring an annotated node fails (a bug here).
Result<ir::Trace> FoldEpilogues(const ir::Trace& canonical, std::vector<std::string>* log,
                                EpilogueActivations activations = EpilogueActivations::kAny);

}  // namespace kiln::passes
