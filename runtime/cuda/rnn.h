// ONNX LSTM, GRU and RNN (opset 22) on cuDNN 9's RNN API (cudnn_adv.h, libcudnn_adv): one
// cudnnRNNForward in inference mode per op.
//
//   KILN_ASSIGN_OR_RETURN(const cuda::Dnn* dnn, cuda::LoadDnn());
//   KILN_ASSIGN_OR_RETURN(const cuda::Driver* drv, cuda::LoadDriver());
//   KILN_ASSIGN_OR_RETURN(auto rnn, cuda::RnnLibrary::Create(*dnn, *drv));  // device context current
//   if (rnn->Accepts("LSTM", attrs, in, out).ok())                          // else: the CPU backend runs it
//     KILN_RETURN_IF_ERROR(rnn->Run("LSTM", call, "lstm"));                  // enqueued on call.stream
//
// ---- The mapping ------------------------------------------------------------------------------
// cell        LSTM -> CUDNN_LSTM; GRU (linear_before_reset 1) -> CUDNN_GRU, whose documented
//             candidate is tanh(W_h x + b_Wh + r * (R_h h + b_Rh)), ONNX's linear_before_reset
//             form; RNN -> CUDNN_RNN_TANH or CUDNN_RNN_RELU (its activation, one for every direction).
// gates       ONNX's W, R [dirs, gates * hidden, ..] and B [dirs, 2 * gates * hidden] are copied,
//             per direction (cuDNN's pseudo-layer) and gate, into cuDNN's weight space at the
//             places cudnnGetRNNWeightParams gives: cuDNN's LSTM linear layers i, f, c~, o are
//             ONNX's gates 0, 2, 3, 1 (ONNX orders them i, o, f, c); GRU's r, z, h~ are ONNX's
//             1, 0, 2 (ONNX: z, r, h); linear layers 0..gates-1 take W and W's bias (Wb), the
//             next gates take R and R's bias (Rb): CUDNN_RNN_DOUBLE_BIAS, ONNX's two biases as
//             they are. Each gate's matrix is copied as its [hidden, input] or [hidden, hidden]
//             rows (cuDNN's documented {1, rows, cols} matrix shape); no B: zero biases.
// direction   forward (CUDNN_UNIDIRECTIONAL) and bidirectional (CUDNN_BIDIRECTIONAL); cuDNN has
//             no backward-only RNN, so "reverse" is refused.
// layout      0: X [seq, batch, input] is CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED; cuDNN's y
//             [seq, batch, dirs * hidden] is ONNX's Y [seq, dirs, batch, hidden] for one
//             direction, and is written to the workspace and transposed into Y with
//             cudnnAddTensor (alpha 1, beta 0) for two. 1: X [batch, seq, input] is
//             BATCH_MAJOR_UNPACKED and Y [batch, seq, dirs, hidden] cuDNN's y as it is; states
//             [batch, dirs, hidden] are cuDNN's [dirs, batch, hidden] for one direction only.
// states      initial_h / initial_c are hx / cx, Y_h / Y_c are hy / cy, read and written in place
//             ([dirs, batch, hidden]); absent ones are NULL (zero initial state, no final state).
// lengths     sequence_lens, a model weight, read on the host (from the Model's bytes) into the
//             RNN data descriptors' seqLengthArray and the device copy cudnnRNNForward reads
//             (devSeqLengths): each batch entry runs its own steps, the backward direction from
//             its own last step, Y_h / Y_c are its last step's, and Y's steps past its length
//             are zeros (paddingFill 0), as ONNX and the CPU kernel have them. Without it every
//             length is seq.
// dtypes      float32 (math in float32 with CUDNN_FMA_MATH: no TF32) and float16 (stored in
//             float16, math in float32, CUDNN_TENSOR_OP_MATH), one for every
//             tensor of the op.
//
// ---- Memory -----------------------------------------------------------------------------------
// The weight space is the library object's own device memory, allocated and filled (device to
// device copies on call.stream) with the RNN descriptor at the first Run with a set of W, R and B
// pointers, and kept for every sequence length and batch (cuDNN's weight space depends on
// neither): W, R and B must be model weights (their data never changes), else the op is refused.
// Per plan (shapes, and sequence_lens's values): the data and state descriptors, and the
// sequence lengths cudnnRNNForward reads from device memory (devSeqLengths). A steady-state Run
// with an earlier call's shapes and pointers allocates nothing and only enqueues cudnnRNNForward
// (and, for a bidirectional Y in layout 0, the cudnnAddTensor). The workspace (OpCall::workspace) holds
// cudnnGetRNNTempSpaceSizes's inference workspace and, where needed, cuDNN's y.
//
// ---- Refused (kUnimplemented with the reason; the CPU backend runs the op) -----------------------
// sequence_lens that is not a model weight (cuDNN's RNN data descriptor takes the lengths on the
// host: reading a computed tensor back would wait on the device every call) or holds a length 0
// (cuDNN's are at least 1), direction reverse, clip, LSTM input_forget and
// peepholes (P), GRU linear_before_reset 0, activations other than the defaults (RNN: Tanh or Relu
// for every direction), activation_alpha / activation_beta, W, R or B not model weights, dtypes
// other than float32 and float16, layout 1 with two directions and a state, empty tensors, and
// dims beyond int32. kInvalidArgument for operands that do not agree (the CPU kernel's checks).
//
// NOTE: written without a GPU. The RNN API calls run in CI on the emulated CUDA device
// (tests/emulated_cuda/cudnn_adv.cc, reference loops written from NVIDIA's documentation), never
// yet on a GPU.
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
#include "runtime/cuda/driver.h"
#include "runtime/cuda/dynamic_symbols.h"
#include "runtime/cuda/library.h"
#include "runtime/cuda/op_call.h"

namespace kiln::cuda {

// One LSTM, GRU or RNN call as cuDNN's RNN API takes it; also the cache key (no pointers).
struct RnnPlan {
  int32_t cell = 0;                 // cudnnRNNMode_t
  int32_t dirs = 1;                 // 1 (forward) or 2 (bidirectional)
  bool batch_first = false;         // layout 1
  DType dtype = DType::kFloat32;    // float32 or float16
  int32_t seq = 0, batch = 0, input = 0, hidden = 0;
  bool bias = false;                // B present
  bool y = false;                   // Y present (else cuDNN's y goes to the workspace)
  bool lens = false;                // sequence_lens present (its values are the cache entry's)
  bool operator==(const RnnPlan&) const = default;
};

// Reads an LSTM, GRU or RNN node's attributes, dtypes and shapes into `plan` (see above for
// what is refused). Needs no device; reads no data.
Status PlanRnn(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
               std::span<const DeviceTensor> outputs, RnnPlan* plan);

class RnnLibrary final : public Library {
 public:
  // Creates a cuDNN handle for the CUDA context current on this thread, which must stay the
  // same for the library object's life. `dnn` and `drv` must outlive it (the loaders' tables do).
  // Errors: kDeviceError naming the call.
  static Result<std::unique_ptr<RnnLibrary>> Create(const Dnn& dnn, const Driver& drv);
  ~RnnLibrary();
  RnnLibrary(const RnnLibrary&) = delete;
  RnnLibrary& operator=(const RnnLibrary&) = delete;

  // PlanRnn for "LSTM", "GRU" and "RNN"; any other op is refused. Needs no device.
  static Status Supports(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs);
  Status Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                 std::span<const DeviceTensor> outputs) const override;
  std::string_view name() const override { return "cuDNN"; }
  // The cap (64 MiB) for an op this object accepts, else 0; Run refuses (kUnimplemented) a plan
  // whose workspace exceeds it. Needs no device.
  size_t Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                   std::span<const DeviceTensor> outputs) const override;

  // Enqueues the op on call.stream; `node` names it in errors. Errors: PlanRnn's;
  // kUnimplemented when cuDNN refuses the form (CUDNN_STATUS_NOT_SUPPORTED) or the workspace
  // exceeds the cap; kInvalidArgument for a workspace smaller than the plan's; kResourceExhausted
  // when the weight space cannot be allocated; kDeviceError "<node>: <call>: <status>" for any
  // other failed library or driver call.
  Status Run(std::string_view op, const OpCall& call, std::string_view node) override;

  // Plans with their descriptors, and weight spaces (one per W, R and B, whatever the shapes);
  // for tests.
  size_t cached_plans() const;
  size_t weight_spaces() const;
  // Device bytes the object holds: its weight spaces and sequence lengths.
  uint64_t held_bytes() const;

 private:
  struct State;
  explicit RnnLibrary(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cuda
