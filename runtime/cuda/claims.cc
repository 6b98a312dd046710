#include "runtime/cuda/claims.h"

#include <algorithm>
#include <iterator>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/matmul_integer_trans_b.h"
#include "runtime/kernels/nhwc_conv_int8.h"
#include "runtime/kernels/nhwc_conv.h"
#include "runtime/op_table.h"

namespace kiln::cuda {
namespace {

struct LibraryOp {
  std::string_view op;
  Library library;
  std::string_view reason;
};

constexpr std::string_view kCudnnRnn =
    "cuDNN RNN (cudnnRNNForward: model weights, forward or bidirectional, the default activations (RNN: Tanh or "
    "Relu), GRU with linear_before_reset, sequence_lens a model weight, no clip or peepholes)";

// The libraries' ops, sorted. What each refuses is runtime/cuda/blas.h's, dnn.h's, sdpa.h's and rnn.h's.
constexpr LibraryOp kLibraryOps[] = {
    {"Attention", Library::kCudnn, "cuDNN SDPA (fused attention through the backend graph API)"},
    {"AveragePool", Library::kCudnn, "cuDNN pooling"},
    {"Conv", Library::kCudnn, "cuDNN convolution, fused with bias and activation"},
    {"ConvTranspose", Library::kCudnn, "cuDNN convolution backward-data"},
    {"GRU", Library::kCudnn, kCudnnRnn},
    {"Gemm", Library::kCublasLt, "cuBLASLt matmul, with its bias/activation epilogue"},
    {"LSTM", Library::kCudnn, kCudnnRnn},
    {"MatMul", Library::kCublasLt, "cuBLASLt matmul, with its bias/activation epilogue"},
    {"MaxPool", Library::kCudnn, "cuDNN pooling"},
    {"RNN", Library::kCudnn, kCudnnRnn},
    {cpu::kMatMulIntegerTransBOp, Library::kCublasLt, "cuBLASLt int8 GEMM (IMMA, int32 accumulation)"},
    {cpu::kNhwcConvInt8Op, Library::kCudnn, "cuDNN int8 convolution (INT8_EXT_CONFIG: NHWC, int32 accumulation)"},
};
static_assert(std::is_sorted(std::begin(kLibraryOps), std::end(kLibraryOps),
                             [](const LibraryOp& a, const LibraryOp& b) { return a.op < b.op; }));

}  // namespace

Claim ClaimOp(std::string_view op, bool fused) {
  if (fused) return {Library::kGenerated, "a generated kernel (CUDA, compiled by NVRTC)"};
  const auto* it = std::lower_bound(std::begin(kLibraryOps), std::end(kLibraryOps), op,
                                    [](const LibraryOp& r, std::string_view name) { return r.op < name; });
  if (it != std::end(kLibraryOps) && it->op == op) return {it->library, it->reason};
  if (op == cpu::kNhwcConvOp)
    return {Library::kCpuKernel, "the CPU backend's plan's NHWC convolution (the CUDA plan keeps Conv NCHW, for cuDNN)"};
  if (const OpInfo* info = FindOpInfo(op); info != nullptr && info->fusion == FusionKind::kCpuOnly)
    return {Library::kCpuKernel, info->note};
  if (const cpu::KernelDef* kernel = cpu::FindKernel(op); kernel != nullptr && kernel->runtime_size)
    return {Library::kCpuKernel, "a data-dependent output size: a run-time dim that the host reads"};
  return {Library::kCpuKernel, "this instance has no fused form (see the fusion log)"};
}

}  // namespace kiln::cuda
