// ONNX Attention (opset 23) on cuDNN 9's fused scaled-dot-product attention, built as an
// operation graph through cuDNN's backend API (cudnnBackend*, libcudnn_graph; no cudnn-frontend).
//
//   KILN_ASSIGN_OR_RETURN(const cuda::Dnn* dnn, cuda::LoadDnn());
//   cuda::SdpaOptions options;
//   options.compute_capability = 90;                                          // the device's
//   KILN_ASSIGN_OR_RETURN(auto sdpa, cuda::SdpaLibrary::Create(*dnn, options));   // device context current
//   if (sdpa->Accepts("Attention", attrs, in, out).ok())                      // else: the CPU backend runs it
//     KILN_RETURN_IF_ERROR(sdpa->Run("Attention", call, "attn"));               // enqueued on call.stream
//
// ---- The graph (one per shape, PlanSdpa's SdpaPlan) -------------------------------------------------
//   S = MATMUL(Q, K^T)            Q [B, H, Sq, D], K^T [B, H, D, Sk] (K's strides swapped), S float32
//   S = POINTWISE MUL(S, scale)   scale a by-value float32 [1, 1, 1, 1]: the `scale` attribute, or 1/sqrt(D)
//   S = POINTWISE ADD(S, mask)    only with attn_mask: the mask as a [b|1, h|1, Sq|1, Sk] tensor
//   m = REDUCTION MAX(S)          [B, H, Sq, 1]
//   P = DIV(EXP(SUB(S, m)), REDUCTION ADD(EXP(SUB(S, m))))      the softmax, float32
//   Y = MATMUL(P, V)              V [B, H, Sk, Dv], Y [B, H, Sq, Dv] of Q's dtype
// Every intermediate is a virtual float32 tensor; MATMUL, POINTWISE and REDUCTION compute in
// float32. Q, K, V and Y are read and written where they are: 4-D tensors with their packed
// strides, and the 3-D form [B, S, H*D] as [B, H, S, D] with strides [S*H*D, D, H*D, 1], so it
// needs no copy. The engine config is the first of CUDNN_HEUR_MODE_A's whose execution plan
// finalizes; the plan (and its workspace size) is made once per shape and kept, the variant
// pack once per set of device pointers (a steady-state call with the same buffers makes none).
//
// ---- What runs here (everything else is kUnimplemented with the reason, for the CPU backend) ----
//   Q, K, V, Y        float16 or bfloat16, one dtype (float32 is refused: cuDNN's fused attention
//                     takes half types only); 4-D, or 3-D with q_num_heads == kv_num_heads
//                     (with Kiln's packed_qkv too: each input [B, S, 3*H*D], Q, K and V its
//                     thirds of columns, read through strides and offset pointers);
//                     as many K/V heads as Q heads (grouped-query attention is refused); head
//                     sizes D and Dv multiples of 8 and at most 128; no empty tensor.
//   attn_mask         absent, or additive of Q's dtype (a boolean mask is refused) whose last
//                     dim is Sk and whose other dims are 1 or the full [B, H, Sq] dim (ONNX's
//                     right-aligned broadcast, rank 2 to 4).
//   not taken         is_causal, softcap, past_key / past_value, nonpad_kv_seqlen, and the
//                     present_key / present_value / qk_matmul_output outputs.
//   device            compute capability 8.0 or later (cuDNN's flash attention needs Ampere).
// A row whose every key the mask sets to -inf gives NaN here (exp(-inf - -inf)), where ONNX's
// Attention and Kiln's CPU kernel give zeros: masks that leave each query a key, or use a
// finite large negative value as the exporters do, give the same result on both.
//
// NOTE: written without a GPU. The graph, the heuristics and the execution run in CI on the
// emulated CUDA device (tests/emulated_cuda/cudnn_backend.cc, an interpreter of the backend
// API written from NVIDIA's documentation), never yet on a GPU.
//
// Thread-compatible: one library object per execution context, used by one thread at a time.
#pragma once

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

// One Attention call as the cuDNN graph takes it; also the library object's cache key.
struct SdpaPlan {
  int64_t batch = 0, heads = 0, q_seq = 0, kv_seq = 0, head = 0, v_head = 0;
  bool three_d = false;              // Q, K, V and Y are [B, S, H*D]
  bool packed = false;               // packed_qkv: Q, K and V are thirds of [B, S, 3*H*D] tensors
  DType dtype = DType::kFloat16;     // of Q, K, V, Y and the mask: float16 or bfloat16
  bool mask = false;
  int64_t mask_dims[4] = {};         // the mask's dims, right-aligned into [b|1, h|1, Sq|1, Sk]
  float scale = 0;                   // the `scale` attribute, or 1/sqrt(D)
  bool operator==(const SdpaPlan&) const = default;
};

// Reads an Attention node's attributes, dtypes and shapes into `plan`. kUnimplemented with the
// reason for what cuDNN's fused attention does not take here (see above); kInvalidArgument for
// operands that do not agree (the CPU kernel's errors). Needs no device.
Status PlanSdpa(const AttrMap& attrs, std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                SdpaPlan* plan);

struct SdpaOptions {
  // The most workspace one execution plan may use; engine configs needing more are skipped.
  size_t max_workspace_bytes = size_t{64} << 20;
  // The device's compute capability, major * 10 + minor; below 80 (and 0, unknown) is refused.
  int compute_capability = 0;
};

class SdpaLibrary final : public Library {
 public:
  // Creates a cuDNN handle for the CUDA context current on this thread, which must stay the
  // same for the library object's life. `dnn` must outlive it (LoadDnn's table does).
  // Errors: kDeviceError naming the call (no driver or device).
  static Result<std::unique_ptr<SdpaLibrary>> Create(const Dnn& dnn, const SdpaOptions& options = {});
  ~SdpaLibrary();
  SdpaLibrary(const SdpaLibrary&) = delete;
  SdpaLibrary& operator=(const SdpaLibrary&) = delete;

  // PlanSdpa, and the device's refusal (compute capability below 8.0). Needs no device.
  static Status SupportsWith(const SdpaOptions& options, std::string_view op, const AttrMap& attrs,
                             std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs);
  // SupportsWith this library object's options; any op but "Attention" is refused.
  Status Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                 std::span<const DeviceTensor> outputs) const override;
  std::string_view name() const override { return "cuDNN"; }
  // The workspace cap for an Attention this object accepts, else 0. Needs no device.
  size_t Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                   std::span<const DeviceTensor> outputs) const override;

  // Enqueues the attention on call.stream; `node` names it in errors. Errors: PlanSdpa's;
  // kUnimplemented when no engine config's execution plan finalizes within the workspace cap,
  // or cuDNN refuses the execution with CUDNN_STATUS_NOT_SUPPORTED (or a sub-code), naming the
  // cuDNN status (the caller may run the op elsewhere); kInvalidArgument for a workspace
  // smaller than the plan's; kDeviceError "<node>: <cuDNN call>: CUDNN_STATUS_..." for any other
  // failed library call.
  Status Run(std::string_view op, const OpCall& call, std::string_view node) override;

  // Distinct shapes whose execution plans are cached (for tests).
  size_t cached_plans() const;

 private:
  struct State;
  explicit SdpaLibrary(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cuda
