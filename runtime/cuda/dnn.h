// Conv, ConvTranspose, MaxPool and AveragePool on cuDNN 9's descriptor API, with the fusion
// stage's Conv epilogues (compiler/passes/epilogue.h) where cuDNN can run them.
//
//   KILN_ASSIGN_OR_RETURN(const cuda::Dnn* dnn, cuda::LoadDnn());
//   cuda::DnnOptions options;
//   options.compute_capability = 90;                                          // the device's (bfloat16: >= 80)
//   KILN_ASSIGN_OR_RETURN(auto cudnn, cuda::DnnLibrary::Create(*dnn, options));  // device context current
//   if (cudnn->Accepts("Conv", attrs, in, out).ok())                         // else: the CPU backend runs it
//     KILN_RETURN_IF_ERROR(cudnn->Run("Conv", call, "conv1"));                // enqueued on call.stream
//
// ---- Geometry -----------------------------------------------------------------------------------
// ResolveConvGeometry / ResolveConvTransposeGeometry / ResolvePoolGeometry apply ONNX's rules
// exactly as the CPU kernels do (runtime/kernels/conv.cc, pool.cc): strides, dilations, group,
// kernel_shape, explicit pads or auto_pad (SAME_UPPER puts the odd pad at the end, SAME_LOWER
// at the start; pooling derives SAME pads from the output size), output_padding and
// output_shape, and check the output's spatial dims. PlanDnn then maps the op onto cuDNN's
// NCHW / NCDHW tensors: a 1-D op becomes 2-D with a unit height (input [N, C, 1, L], kernel
// [.., 1, k], pad 0, stride 1 and dilation 1 along it). Both are pure and tested on the CPU.
//
// ---- What runs here (everything else is kUnimplemented from Supports, for the CPU backend) -------
//   all ops     tensors of 1 to 3 spatial dims, every dim and element count within int32;
//               symmetric pads only (cuDNN's legacy descriptors have one pad per axis: e.g.
//               SAME_UPPER with an odd total pad is refused).
//   dtypes      float32, float16 or bfloat16, one for every tensor of the op (X, W, the bias,
//               the residual, Y). Convolutions compute in float32 for all three (the
//               convolution descriptor's type is CUDNN_DATA_FLOAT: cuDNN's FLOAT_CONFIG,
//               PSEUDO_HALF_CONFIG and PSEUDO_BFLOAT16_CONFIG); alpha and beta are float.
//               float16 / bfloat16 convolutions use tensor-core math (CUDNN_TENSOR_OP_MATH);
//               float32 keeps FMA math (below). bfloat16 needs compute capability 8.0:
//               SupportsWith / Accepts / Run refuse it below that (DnnOptions::compute_capability).
//   Conv        groups and dilations (cudnnSetConvolutionGroupCount); bias B (input 2, [M]);
//               epilogue activation none or Relu (Gelu, GeluTanh, Sigmoid, HardSwish and SiLU
//               are refused), residual R (input 3) in either order: cudnnConvolutionForward,
//               then cudnnAddTensor for the bias and R and cudnnActivationForward (RELU with
//               CUDNN_PROPAGATE_NAN, in place) for Relu, in the epilogue's order. The fused
//               cudnnConvolutionBiasActivationForward is not used: its API reference requires
//               reluNanOpt CUDNN_NOT_PROPAGATE_NAN (CUDNN_STATUS_NOT_SUPPORTED otherwise), which
//               makes Relu(NaN) 0 where ONNX, the CPU backend and the generated kernels give NaN;
//               and with CUDNN_ACTIVATION_IDENTITY it allows only IMPLICIT_PRECOMP_GEMM.
//   ConvTranspose  cudnnConvolutionBackwardData of the convolution whose input is Y and whose
//               output is X (the filter [C, M/group, k...] is ONNX's W as it is), then
//               cudnnAddTensor for the bias. output_padding must be below the stride (so that
//               convolving Y gives back X's size, as cuDNN checks). No epilogue.
//   MaxPool     CUDNN_POOLING_MAX (NaN propagates), no Indices output, dilations 1.
//   AveragePool CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING / _EXCLUDE_PADDING from
//               count_include_pad, dilations 1.
//   pooling     the output must be the floor-mode size (ceil_mode adding a window is refused:
//               cuDNN computes floor-mode outputs only) and every pad below the window.
//   int8        kiln.NhwcConvInt8 (runtime/kernels/nhwc_conv_int8.h): cudnnConvolutionForward in
//               cuDNN's INT8_EXT_CONFIG (X and W CUDNN_DATA_INT8, compute type CUDNN_DATA_INT32,
//               Y CUDNN_DATA_FLOAT; alpha 1 and beta 0 as floats): 2-D, one group, X and Y packed
//               NHWC and the filter in CUDNN_TENSOR_NHWC format, input and output channels
//               multiples of 4 (the compiler pads a model's input channels), symmetric pads, compute capability 6.1 or later (int8 dot
//               products), as the cudnnConvolutionForward() reference gives its int8
//               configurations; anything else is kUnimplemented (the CPU backend runs it).
//
// ---- Execution ------------------------------------------------------------------------------
// Descriptors are created once per distinct plan (DnnPlan is the cache key) and destroyed with
// the library object. The convolution algorithm comes from cudnnGetConvolutionForwardAlgorithm_v7 /
// BackwardDataAlgorithm_v7 once per plan: the first that succeeds, fits the workspace cap and,
// unless DnnOptions::allow_tf32, uses plain FMA math (CUDNN_FMA_MATH set on the descriptor:
// CUDNN_DEFAULT_MATH would let Ampere and later GPUs use TF32); deterministic algorithms are
// preferred. Each call sets the stream (cudnnSetStream) and enqueues; nothing is allocated on
// the device and nothing synchronises. Workspace comes from OpCall::workspace.
//
// NOTE: written without a GPU. Descriptor creation, algorithm selection and every compute call
// run in CI on the emulated CUDA device (tests/emulated_cuda/: a cuDNN written from NVIDIA's
// documentation), never yet on a GPU, for any dtype: scripts/gpu-check compares them with the
// CPU backend there.
//
// Thread-compatible: one library object per execution context, used by one thread at a time.
#pragma once

#include <cuda.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/attrs.h"
#include "runtime/cuda/dynamic_symbols.h"
#include "runtime/cuda/library.h"
#include "runtime/cuda/op_call.h"

namespace kiln::cuda {

inline constexpr int kMaxWindowDims = kMaxRank - 2;

// An op's sliding window in ONNX terms, per spatial axis. `in` is X's extent and `out` Y's,
// for every op (for ConvTranspose the window slides over Y and X is the smaller side).
struct WindowGeometry {
  int spatial = 0;  // spatial rank: X's rank - 2
  int64_t group = 1;
  int64_t kernel[kMaxWindowDims] = {};
  int64_t stride[kMaxWindowDims] = {};
  int64_t dilation[kMaxWindowDims] = {};
  int64_t pad_begin[kMaxWindowDims] = {};
  int64_t pad_end[kMaxWindowDims] = {};
  int64_t in[kMaxWindowDims] = {};
  int64_t out[kMaxWindowDims] = {};
  int64_t output_padding[kMaxWindowDims] = {};  // ConvTranspose only
};

// Conv(X [N, C, D...], W [M, C/group, k...]) -> Y [N, M, O...]. kInvalidArgument, with what was
// expected and found, for the cases the CPU kernel rejects (ranks, channels, group, attribute
// lengths, unknown auto_pad, output dims that do not follow from the rest).
Status ResolveConvGeometry(const AttrMap& attrs, const DeviceTensor& x, const DeviceTensor& w,
                           const DeviceTensor& y, WindowGeometry* g);
// ConvTranspose(X [N, C, D...], W [C, M/group, k...]) -> Y [N, M, O...], with output_padding,
// and output_shape / SAME auto_pad deriving the pads from Y's size.
Status ResolveConvTransposeGeometry(const AttrMap& attrs, const DeviceTensor& x, const DeviceTensor& w,
                                    const DeviceTensor& y, WindowGeometry* g);
// MaxPool / AveragePool (`op` names errors): kernel_shape, strides, dilations, pads or auto_pad;
// Y's dims must be the floor- or ceil-mode size.
Status ResolvePoolGeometry(std::string_view op, const AttrMap& attrs, const DeviceTensor& x,
                           const DeviceTensor& y, WindowGeometry* g);

enum class DnnOp : uint8_t { kConv, kConvTranspose, kMaxPool, kAveragePool, kConvInt8 };

// One op as cuDNN descriptors take it; also the library object's cache key (no pointers).
struct DnnPlan {
  DnnOp op = DnnOp::kConv;
  int32_t nb_dims = 0;           // 4 (2-D, and 1-D promoted) or 5 (3-D)
  std::array<int32_t, 5> x{};    // cuDNN's X dims (ConvTranspose: its dy)
  std::array<int32_t, 5> w{};    // filter dims (convolutions)
  std::array<int32_t, 5> y{};    // cuDNN's Y dims (ConvTranspose: its dx)
  std::array<int32_t, 3> pad{};  // per spatial axis (nb_dims - 2 used)
  std::array<int32_t, 3> stride{};
  std::array<int32_t, 3> dilation{};
  std::array<int32_t, 3> window{};  // pooling
  int32_t group = 1;
  bool bias = false;            // input 2, one value per output channel
  bool residual = false;        // input 3, Y's shape
  bool residual_first = false;  // order "bias,residual,act"
  bool relu = false;
  bool count_include_pad = false;  // AveragePool
  bool empty = false;              // Y has no elements: nothing to enqueue
  DType dtype = DType::kFloat32;   // of every tensor: float32, float16 or bfloat16 (kConvInt8: int8
                                   // X and W, float32 Y; the dims above in NCHW order, the data NHWC)
  bool operator==(const DnnPlan&) const = default;
};

// Geometry, then the cuDNN mapping, for "Conv", "ConvTranspose", "MaxPool", "AveragePool" or
// kiln.NhwcConvInt8.
// Errors: kInvalidArgument for malformed ops (as the CPU kernels), kUnimplemented with the reason
// for valid ops cuDNN is not used for here (see the header comment). Reads shapes and dtypes only.
Status PlanDnn(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
               std::span<const DeviceTensor> outputs, DnnPlan* plan);

struct DnnOptions {
  // The most workspace one convolution may use; algorithms needing more are skipped.
  size_t max_workspace_bytes = size_t{64} << 20;
  // Lets cuDNN choose TF32 tensor-core algorithms for float32 (about 1e-3 relative error).
  bool allow_tf32 = false;
  // The device's compute capability, major * 10 + minor (90 for Hopper); 0 when unknown.
  // bfloat16 ops need 80 (Ampere) or later: below that, and when unknown, they are refused.
  int compute_capability = 0;
};

class DnnLibrary final : public Library {
 public:
  // Creates the cuDNN handle (cudnnCreate, for the CUDA context current on this thread, which
  // must stay the same for the library object's life). `dnn` must outlive the library object (LoadDnn's
  // table does). Errors: kDeviceError naming the call, e.g. without a driver or a device.
  static Result<std::unique_ptr<DnnLibrary>> Create(const Dnn& dnn, const DnnOptions& options = {});
  ~DnnLibrary();
  DnnLibrary(const DnnLibrary&) = delete;
  DnnLibrary& operator=(const DnnLibrary&) = delete;

  // OK when the op runs here on some device; kUnimplemented with the reason, or
  // kInvalidArgument for a malformed op (PlanDnn's errors).
  static Status Supports(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs);
  // Supports, and also kUnimplemented for what the device of a library object created with `options`
  // cannot run (bfloat16 below compute capability 8.0 or unknown). Needs no device.
  static Status SupportsWith(const DnnOptions& options, std::string_view op, const AttrMap& attrs,
                             std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs);
  // SupportsWith this library object's options: whether Run takes the op.
  Status Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                 std::span<const DeviceTensor> outputs) const override;
  std::string_view name() const override { return "cuDNN"; }

  // Workspace bytes to plan: the cap for a convolution that runs here and is not empty, 0 for
  // pooling and for ops that do not run here (Accepts refuses them). Needs no device; Prepare gives the exact figure.
  size_t Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                   std::span<const DeviceTensor> outputs) const override;
  // The same for a library object created with `options` (none needed).
  static size_t WorkspaceFor(const DnnOptions& options, std::string_view op, const AttrMap& attrs,
                             std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs);

  // Creates (and caches) the descriptors and the algorithm for these shapes and returns the
  // exact workspace bytes. Optional: Run does the same on first use. Errors as Run's.
  Result<size_t> Prepare(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs);

  // Enqueues `op` on call.stream; `node` names the node in errors. Errors: PlanDnn's;
  // kUnimplemented when cuDNN offers no algorithm within the workspace cap, or refuses a
  // compute call with CUDNN_STATUS_NOT_SUPPORTED (or a sub-code; the caller may then run the
  // op elsewhere; calls enqueued before it still run); kInvalidArgument
  // for a null pointer or a workspace smaller than the algorithm needs; kDeviceError
  // "<op> '<node>': <cuDNN call>: CUDNN_STATUS_..." for any failed library call.
  Status Run(std::string_view op, const OpCall& call, std::string_view node) override;
  // Prepare for `call`'s shapes (the descriptors and algorithm do not depend on its buffers),
  // with `node` in errors.
  Status Plan(std::string_view op, const OpCall& call, std::string_view node) override;
  Status Conv(const OpCall& call, std::string_view node) { return Run("Conv", call, node); }
  Status ConvTranspose(const OpCall& call, std::string_view node) { return Run("ConvTranspose", call, node); }
  Status MaxPool(const OpCall& call, std::string_view node) { return Run("MaxPool", call, node); }
  Status AveragePool(const OpCall& call, std::string_view node) { return Run("AveragePool", call, node); }

  // Distinct plans whose descriptors are cached (for tests and stats).
  size_t cached_plans() const;

 private:
  struct State;
  explicit DnnLibrary(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cuda
