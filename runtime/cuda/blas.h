// MatMul and Gemm on cuBLASLt, with the fusion stage's epilogues (compiler/passes/epilogue.h):
// a bias, ReLU or GELU (tanh form) run inside the GEMM; and the CUDA plan's integer GEMM,
// kiln.MatMulIntegerTransB (runtime/kernels/matmul_integer_trans_b.h), on cuBLASLt's int8 kernels.
//
//   KILN_ASSIGN_OR_RETURN(const cuda::Blas* blas, cuda::LoadBlas());
//   KILN_ASSIGN_OR_RETURN(auto lt, cuda::BlasLibrary::Create(*blas, {}));   // device context current
//   if (cuda::BlasLibrary::Supports("MatMul", attrs, in, out).ok())          // else: the CPU backend runs it
//     KILN_RETURN_IF_ERROR(lt->MatMul(call, "fc1"));                          // enqueued on call.stream
//
// ---- Layout -------------------------------------------------------------------------------------
// ONNX tensors are dense and row-major; cuBLASLt is column-major. A row-major [R, C] matrix is,
// read column-major, its transpose [C x R] with leading dimension C, so the row-major product
// Y = op(A) * op(B) is computed as the column-major Y^T = op(B)^T * op(A)^T: cuBLASLt's A is
// ONNX's B, cuBLASLt's B is ONNX's A, and cuBLASLt's D (m = N rows, n = M columns, ld = N) is Y.
// No data is transposed; Gemm's transA/transB become cuBLASLt's op() on the swapped operands.
// A bias over Y's N columns is a bias over the rows of D, which is what CUBLASLT_EPILOGUE_BIAS
// broadcasts. PlanMatMul / PlanGemm compute this mapping; they are pure and tested on the CPU.
//
// ---- What runs here (everything else is kUnimplemented from Supports, for the CPU backend) -------
//   dtypes     float32 (compute CUBLAS_COMPUTE_32F, or _FAST_TF32 when BlasOptions::allow_tf32),
//              float16 and bfloat16 (fp32 accumulation and scaling; a bias vector of D's type,
//              CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE set to it). Not float64 or integers.
//   MatMul     ONNX's 1-D promotion; batch dims where each operand's batch is either the
//              output's whole batch or absent/all ones for B (a shared right operand: the batch
//              folds into M, one GEMM) — A and B with equal batches run as a strided batch.
//              A shared left operand with a batched B, and partial broadcasts, are refused.
//   Gemm       alpha, beta, transA, transB; C absent, of Y's full shape [M, N] (cuBLASLt's C,
//              scaled by beta), or a bias [N] / [1, N] with beta = 1 (the BIAS epilogue). C of
//              other broadcast shapes ([M, 1], scalars) is refused.
//   epilogue   bias alone; epilogue_activation Relu or GeluTanh (CUBLASLT_EPILOGUE_RELU[_BIAS],
//              _GELU[_BIAS]: cuBLASLt's GELU is the tanh approximation, so "Gelu" (erf) is
//              refused, as are Sigmoid, HardSwish and SiLU); a residual (input 3) only without
//              an activation, as cuBLASLt's C with beta = 1 (then D = A*B + R + bias, a plain
//              sum whatever the order). An activation together with any C matrix (a residual,
//              or Gemm's full C with beta != 0) is refused: the cuBLASLt documentation
//              available here does not pin whether its epilogue activation is applied after
//              beta*C, and a guess would be silently wrong. Lift this once a GPU check confirms.
//   sizes      every dim, leading dimension and the batch count fit in int32 (cuBLASLt's
//              documented range); K = 0 with a non-empty output is refused.
//   int8       kiln.MatMulIntegerTransB: int8 A [..., M, K] by int8 B [N, K] into int32 Y, as
//              cuBLASLt's CUBLAS_COMPUTE_32I with scale type CUDA_R_32I (alpha 1, beta 0), A and B
//              CUDA_R_8I, C and D CUDA_R_32I. The mapping above makes cuBLASLt's A ONNX's B [N, K]
//              read transposed and its B ONNX's A, untransposed: the "TN" format that cublasLtMatmul()
//              documents as the only one its IMMA kernels take with the regular (column) ordering,
//              which also needs m = N and k = K multiples of 4 (and so every leading dimension) and
//              4-byte aligned pointers; any of these failing is kUnimplemented (the CPU backend
//              runs it). uint8 operands are refused: cuBLASLt's int8 GEMM is signed (the compiler
//              shifts uint8 activations by -128 first, compiler/passes/qdq.h). No epilogue: the
//              zero points' correction and the scales are the generated kernel after it, which
//              fuses with the model's next elementwise ops. (cuBLASLt's int8-output form, with a
//              per-row alpha vector, CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO, and a
//              float bias, could requantize inside the GEMM; its rounding is not documented, so it
//              waits for a GPU to pin it.)
//
// ---- Execution ------------------------------------------------------------------------------
// For each distinct problem (the plan, plus the alignment of each pointer, which the heuristic
// depends on) the library object creates the matmul descriptor and the layouts once, asks
// cublasLtMatmulAlgoGetHeuristic once, and caches all of it (no algorithm, or
// CUBLAS_STATUS_NOT_SUPPORTED from the heuristic, as for bfloat16 on a GPU without it, is
// kUnimplemented: the CPU backend runs the op); later calls only set the bias pointer and
// enqueue cublasLtMatmul on the call's stream. It never allocates device memory
// and never synchronises. Workspace comes from OpCall::workspace (256-byte aligned).
//
// NOTE: written without a GPU. Every path runs in CI on the emulated CUDA device
// (tests/emulated_cuda/: a cuBLASLt written from NVIDIA's documentation), never yet on a GPU:
// scripts/gpu-check compares them with the CPU there.
//
// Thread-compatible: one library object per execution context, used by one thread at a time.
#pragma once

#include <cublasLt.h>
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "kiln/status.h"
#include "runtime/attrs.h"
#include "runtime/cuda/dynamic_symbols.h"
#include "runtime/cuda/library.h"
#include "runtime/cuda/op_call.h"

namespace kiln::cuda {

struct BlasOptions {
  // The most workspace any one cublasLtMatmul may use; heuristics only return algorithms that
  // fit. NVIDIA recommends 32 MiB on Hopper and 4 MiB on earlier GPUs.
  size_t max_workspace_bytes = size_t{32} << 20;
  // float32 GEMMs on TF32 tensor cores (10-bit mantissa inputs: about 1e-3 relative error).
  // Off by default, so results match the CPU backend to float32 rounding.
  bool allow_tf32 = false;
};

// One cuBLASLt matrix layout, column-major, as cublasLtMatrixLayoutCreate takes it: the stored
// matrix (before op()), its leading dimension, and the element stride between batch members
// (0 when the batch count is 1).
struct LtLayout {
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool operator==(const LtLayout&) const = default;
};

// A MatMul or Gemm as one cublasLtMatmul call:
//   D[m x n] = epilogue(alpha * op(A)[m x k] * op(B)[k x n] + beta * C),  for each of `batch`
// where A, B, C and D are the OpCall inputs/outputs named below (C shares D's layout).
struct LtMatmulPlan {
  cudaDataType_t type = CUDA_R_32F;    // of A and B (and the bias)
  cudaDataType_t d_type = CUDA_R_32F;  // of C and D: `type`, but CUDA_R_32I for the int8 GEMM
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;  // alpha and beta are float, or int32 for CUDA_R_32I
  bool trans_a = false;                    // cuBLASLt's op(A) = A^T
  bool trans_b = false;
  uint64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  LtLayout a, b, d;
  float alpha = 1.0f;
  float beta = 0.0f;  // 0 when c_input < 0
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int a_input = 1;      // ONNX B
  int b_input = 0;      // ONNX A
  int c_input = -1;     // Gemm's C or the residual; -1: none (C = D, beta = 0)
  int bias_input = -1;  // the BIAS epilogue's vector (m elements); -1: none
  bool empty = false;   // the output has no elements: nothing to enqueue
};

// The mapping above for MatMul (inputs A, B[, bias[, R]]) and Gemm (A, B[, C[, R]]), output Y,
// shapes and dtypes only (no pointer is read). Errors: kInvalidArgument for shapes or dtypes the
// op itself rejects (the CPU kernel's checks); kUnimplemented, saying why, for valid ops this
// library leaves to the CPU backend (see the header comment). `allow_tf32` picks the compute type.
Status PlanMatMul(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                  std::span<const DeviceTensor> outputs, bool allow_tf32, LtMatmulPlan* plan);
Status PlanGemm(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                std::span<const DeviceTensor> outputs, bool allow_tf32, LtMatmulPlan* plan);
// The same for kiln.MatMulIntegerTransB (inputs A, B; output Y), the int8 GEMM above.
Status PlanMatMulIntegerTransB(std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                               LtMatmulPlan* plan);

class BlasLibrary final : public Library {
 public:
  // Creates the cuBLASLt handle (cublasLtCreate, for the CUDA context current on this thread,
  // which must stay the same for the library object's life) and a heuristic preference. `blas` must
  // outlive the library object (LoadBlas's table does). Errors: kDeviceError naming the call, e.g.
  // when no driver or device is present (cublasLtCreate fails then). A zero workspace cap is
  // valid: only algorithms without workspace are chosen.
  static Result<std::unique_ptr<BlasLibrary>> Create(const Blas& blas, const BlasOptions& options = {});
  ~BlasLibrary();
  BlasLibrary(const BlasLibrary&) = delete;
  BlasLibrary& operator=(const BlasLibrary&) = delete;

  // OK when `op` ("MatMul", "Gemm" or kiln.MatMulIntegerTransB) with these attributes and shapes runs here; otherwise
  // kUnimplemented with the reason (the CPU backend then runs the op), or
  // kInvalidArgument when the op itself is malformed. Reads shapes and dtypes only.
  static Status Supports(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs);

  // Workspace bytes to plan for this op: the options' cap when it runs here and is not empty,
  // else 0. An upper bound that needs no device; Prepare gives the exact figure.
  size_t Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                   std::span<const DeviceTensor> outputs) const override;
  // The same for a library object created with `options` (none needed).
  static size_t WorkspaceFor(const BlasOptions& options, std::string_view op, const AttrMap& attrs,
                             std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs);

  // Creates (and caches) the descriptors and the algorithm for these shapes, with 256-byte
  // aligned pointers assumed, and returns the algorithm's exact workspace bytes (<= the cap).
  // Optional: MatMul/Gemm do the same on first use of a shape. Errors as MatMul's.
  Result<size_t> Prepare(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs);

  // Enqueue the op on call.stream. `node` names the node in errors. Errors: those of Supports;
  // kUnimplemented when cuBLASLt offers no algorithm for the problem, or cublasLtMatmul refuses
  // it with CUBLAS_STATUS_NOT_SUPPORTED (the caller may then run the op elsewhere);
  // kInvalidArgument when call.workspace is smaller than the algorithm needs or not 256-byte
  // aligned; kDeviceError
  // "<op> '<node>': <cuBLASLt call>: CUBLAS_STATUS_..." for any failed library call.
  Status MatMul(const OpCall& call, std::string_view node);
  Status Gemm(const OpCall& call, std::string_view node);
  // MatMul, Gemm or kiln.MatMulIntegerTransB by name (kUnimplemented for any other op).
  Status Run(std::string_view op, const OpCall& call, std::string_view node) override;
  // The descriptors and algorithm Run would find or make for `call` (its buffers' alignments),
  // cached; nothing enqueued. Errors as Run's.
  Status Plan(std::string_view op, const OpCall& call, std::string_view node) override;
  // Library: Supports (cuBLASLt takes the same forms on every device Kiln runs on).
  std::string_view name() const override { return "cuBLASLt"; }
  Status Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                 std::span<const DeviceTensor> outputs) const override {
    return Supports(op, attrs, inputs, outputs);
  }

  // Distinct problems whose descriptors and algorithm are cached (for tests and stats).
  size_t cached_plans() const;

 private:
  struct State;
  explicit BlasLibrary(std::unique_ptr<State> state);
  // Enqueues `plan` for `call`; with `plan_only`, only finds or makes its cached descriptors and
  // algorithm (Plan).
  Status Enqueue(std::string_view op, const LtMatmulPlan& plan, const OpCall& call, std::string_view node,
                 bool plan_only = false);
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cuda
