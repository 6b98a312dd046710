// oneDNN (https://uxlfoundation.github.io/oneDNN/) as a library of the CPU backend, as cuDNN
// and cuBLASLt are the CUDA backend's (runtime/cuda/library.h). The CPU backend's claims name the
// ops it takes (runtime/cpu/claims.cc); for each instruction the artifact places on it, the CPU
// backend asks PlanOneDnn once per entry and binding of its shapes, and runs the planned op
// instead of its CPU kernel, or the CPU kernel with oneDNN's reason in Stats::last_fallbacks
// when oneDNN refuses the form.
//
// What oneDNN runs: Conv of 1 to 3 spatial dims (grouped and depthwise included), with the
// epilogue of compiler/passes/epilogue.h as post-ops: Conv's bias, then the activation (Relu,
// Sigmoid, SiLU, HardSwish, Gelu, GeluTanh) and the residual add (`sum`) in the node's order.
// X, W, Y and the residual have one type; the bias has it or is float32:
//   float32;
//   bfloat16: oneDNN's bfloat16 convolution (AVX512-BF16 instructions where the CPU has them,
//     emulated on other AVX-512 CPUs; refused without AVX-512), accumulating in float32 and
//     rounding Y once, as Kiln's kernel does on widened copies;
//   float16: in float32, on copies of X, W, the bias and the residual converted in the
//     workspace (half_convert.h: F16C), Y rounded once. oneDNN 2.6 has float16 convolutions
//     only on AVX512-FP16 CPUs, and its float16 reorders are reference loops. A model weight
//     is converted and reordered once, and kept. A Y kept in oneDNN's layout holds float16
//     values in that layout's order, converted from and to float32 element by element.
// MaxPool (without its Indices output) and AveragePool of 1 to 3 spatial dims, float32 and
// bfloat16, on oneDNN's pooling: 7-13x faster than Kiln's kernel on a ResNet's stem. It runs
// in its producer's layout (Follow), so that a Conv's Y stays in oneDNN's layout through it.
// oneDNN's max drops NaNs, where ONNX's MaxPool propagates them (docs/semantics.md): a MaxPool
// first scans X (a few percent of the pooling's time) and runs Kiln's kernel when it holds a
// NaN. Refused: dilated windows (oneDNN 2.6 has only its reference loops for them), a window
// wholly in the padding, and ceil_mode's extra window with count_include_pad.
// MatMul and Gemm, float32, of at least 2^18 multiply-adds, with a 2-D B (a model weight is
// reordered once into oneDNN's layout), Gemm with alpha 1 and a C of N values or none, the
// epilogue as post-ops; smaller products stay on OpenBLAS, which is faster there.
// LSTM, GRU and RNN, float32, with W, R and B model weights (put in oneDNN's gate order and
// layouts once), forward, reverse or bidirectional, on lstm_forward, gru_forward
// (linear_before_reset 0), lbr_gru_forward and vanilla_rnn_forward; refused: sequence_lens, clip,
// input_forget, peepholes, activations other than the defaults (RNN: one of Tanh, Relu and
// Sigmoid for every direction), activation_alpha/beta, layout 1, and LSTMs and GRUs of batches
// below 16, where Kiln's kernel is faster (by the batch alone, never the thread count, so that the
// bits do not depend on it; RNN runs on oneDNN at every batch, the faster at each).
// Kiln's kernel runs those.
// QLinearConv and QLinearMatMul (ONNX opset 10 and 21; what the compiler folds
// DequantizeLinear -> Conv / MatMul -> QuantizeLinear groups into, compiler/passes/qdq.h) on
// oneDNN's int8 convolution and matmul: u8 or s8 X, s8 W with zero point 0, s32 bias, u8 or s8
// Y, s32 accumulation (VNNI's vpdpbusd where the CPU has it). Without VNNI, oneDNN pairs u8 by
// s8 products in vpmaddubsw, whose 16-bit sums saturate once |w0| + |w1| passes 128: there a W
// of values beyond 7 bits (not made with onnxruntime's reduce_range) runs on the CPU kernel,
// which is exact, and the compile of such a model says nothing of it (it depends on the CPU
// that runs it; Stats::last_fallbacks names it). The scales fold
// into per-channel output scales x_scale * w_scale / y_scale; X's and Y's zero points are
// oneDNN's zero-point attributes. oneDNN 2.6 takes them only as values when the primitive is
// made, so W, the bias, scales and zero points must be model weights: they are read when
// planning. Refused (the CPU kernel runs): uint8 W, a W zero point other than 0, scales not
// float32 or not positive, a B of rank other than 2. The results are within one quantization
// step of the CPU kernel's (oneDNN scales in float32, the kernel in double). MatMulInteger
// (quantize_dynamic's MatMuls) runs on the same int8 matmul with an int32 Y, exactly the CPU
// kernel's values; A's zero point, which DynamicQuantizeLinear computes per call, is passed at
// each Run, and B and its zero point (0) must be model weights. onnxruntime's QGemm (what the
// compiler folds DequantizeLinear -> Gemm -> QuantizeLinear into) runs on it too: its int32 C
// is the matmul's s32 bias, added before the scales, alpha folded into them. ConvInteger runs on
// the int8 convolution into s32, on X as it comes; X's zero point, a per-call value that oneDNN
// 2.6 takes only when a primitive is made, is then taken out exactly: Y -= x_zero_point * (the
// sum of W over the taps inside X at each output), sums made once when planning.
// ConvTranspose stays on Kiln's kernel: oneDNN 2.6's deconvolution, measured on PP-OCR's
// 2x2/2 upsampling and four other forms, was 1.1-30x slower than Kiln's SGEMM and col2im
// with a bias (its bias is a separate slow pass) and won only at stride 1.
//
// Layouts: Kiln's tensors are NCHW (plain, row-major). oneDNN chooses each Conv's layouts
// (`any`): NHWC or a blocked layout (nChw16c, nChw8c), with one reorder of X into it and one
// of Y out of it in the call's workspace. Where a Conv's Y is read only by oneDNN Convs that
// want it in the same layout, as their X or as their residual (and is no model output), the
// CPU backend keeps it in that layout in the arena, with neither reorder (OneDnnOp::Place):
// such a tensor is not NCHW between those instructions (an InstructionObserver sees oneDNN's
// layout there). A ResNet's blocks chain this way: a block's output is the next block's first
// X and its residual. Weights that are model weights are
// reordered into the chosen layout once, when the binding is warmed (OneDnnOp::PackWeights, at
// ExecutionContext::Create or Warm) or else at the first Run that needs that layout, and kept in
// the context's WeightPacks, which every binding's ops share: a decoder's MatMuls, planned again
// for each step's cache length, reorder their weights only at the first step (LSTM, GRU and RNN
// keep theirs with the plan, OneDnnOp::held_bytes); other weights are reordered on every Run.
//
// Threads: this oneDNN (Debian's libdnnl) runs its parallel loops on OpenMP (libgomp). A Run
// sets the calling thread's OpenMP team size to the context's CpuOptions::threads for the duration
// of each oneDNN call and restores it after. Kiln's own kernels then split their loops over
// the same OpenMP team (OpenMpTeam), so the two never compete for the cores. libgomp's
// threads busy-wait for a while after each parallel region (GOMP_SPINCOUNT, up to about a
// millisecond) before they sleep, between Runs too; OMP_WAIT_POLICY=passive in the process's
// environment makes them sleep at once, at the cost of a wake-up per region.
//
// Numerics: oneDNN's results may differ from the CPU kernel's in the last bits (another
// summation order, polynomial activations), and may differ between thread counts where
// oneDNN splits a reduction.
//
// Thread-compatible: a plan is used by one context at a time; planning is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/status.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::cpu {

// The model weights in the layouts oneDNN chose, one copy per weight and layout, for the ops
// of every binding of one context's entries. Owned by the context's CPU backend; outlives the
// ops that read it. Thread-compatible, as a context is.
class WeightPacks {
 public:
  virtual ~WeightPacks() = default;
  // Bytes held: every packed copy.
  virtual uint64_t bytes() const = 0;
};
// An empty set (null in a runtime without oneDNN).
std::unique_ptr<WeightPacks> NewWeightPacks();

// One instruction planned on oneDNN for one binding of its shapes: its primitives, made once.
class OneDnnOp {
 public:
  virtual ~OneDnnOp() = default;
  // Bytes of KernelCall::workspace Run needs: the reordered X and Y (and W when it is not a
  // model weight), oneDNN's scratchpad and, for float16, the float32 copies of X, Y, the bias
  // (and W when it is not a model weight), each 64-byte aligned.
  virtual size_t workspace_bytes() const = 0;
  // Bytes the plan holds itself (0 before the first Run): an LSTM's, GRU's or RNN's model weights
  // in oneDNN's layout; a Conv's and MatMul's are in the WeightPacks, counted there.
  virtual uint64_t held_bytes() const = 0;
  // What runs, e.g. "brgconv:avx512_core, in nhwc, kept between oneDNN ops for Y" (oneDNN's
  // implementation name, its layout for X and Y, and which of them Place kept), ending in
  // ", on float32 copies of its float16 operands" for float16.
  virtual const std::string& description() const = 0;
  // A pointwise Conv (1x1, stride 1, no pads): Kiln's kernel runs it as one SGEMM on NCHW,
  // which is faster than oneDNN's with a reorder on each side (2-9x on PP-OCR's shapes), so
  // the CPU backend keeps it on oneDNN only where its X or Y stays in oneDNN's layout.
  virtual bool pointwise() const = 0;
  // Whether this op's Y can stay in oneDNN's layout as `consumer`'s input `slot`: as its X
  // (slot 0), where `consumer` wants X in this op's Y layout, or as its residual
  // (kEpilogueResidualInput), where `consumer`'s Y has this op's Y layout. The layout must not
  // be Kiln's NCHW, and must have NCHW's size in bytes (so the arena's place for the tensor
  // holds it); both float16 (converted) or neither. When this op has a residual itself, its Y
  // may share the residual's memory: the caller keeps Y only with the residual kept too.
  virtual bool CanFeed(const OneDnnOp& consumer, int slot) const = 0;
  // Whether the op adds a residual (input kEpilogueResidualInput, oneDNN's `sum` post-op).
  virtual bool residual() const = 0;
  // For an op that can run in whatever layout its X arrives in (pooling): re-plans it to take
  // X in `producer`'s Y layout, so that producer.CanFeed(*this, 0) can hold; X and Y then start
  // with reorders, as after Place(false, false, false). False, and nothing changed, for other
  // ops, when `producer`'s Y is in NCHW, or when oneDNN has no fast pooling for that layout.
  virtual bool Follow(const OneDnnOp& producer) {
    static_cast<void>(producer);
    return false;
  }
  // Where X, Y and the residual are: `x_in_layout`, X arrives in this op's layout (its
  // producer's Y, kept); `y_in_layout`, Y is left in it for its consumers; `r_in_layout`, the
  // residual arrives in Y's layout. Otherwise a reorder from or to NCHW in the workspace.
  // Planned ops start with all false. Sets workspace_bytes(). kInternal when oneDNN fails to
  // make a reorder, kResourceExhausted when memory runs out: the op is then unusable.
  virtual Status Place(bool x_in_layout, bool y_in_layout, bool r_in_layout) = 0;
  // Puts the model weights `call` reads (as Run would get them) in the op's layout, as its first
  // Run would: into the WeightPacks, or the plan's own for LSTM, GRU and RNN. Nothing for an op
  // without model weights to reorder, or whose weights are in place already. The CPU backend
  // calls it when it warms a binding (ExecutionContext::Create and Warm). Errors as Run's.
  virtual Status PackWeights(const KernelCall& call) {
    static_cast<void>(call);
    return Status::Ok();
  }
  // Runs the op on `call`, whose operands have the shapes it was planned for and whose
  // workspace has workspace_bytes(). Allocates nothing of Kiln's own after the first Run.
  // kInternal when a oneDNN call fails (its status named).
  virtual Status Run(const KernelCall& call) = 0;
};

// The OpenMP team oneDNN runs on (libgomp's parallel region on the calling thread's team), for
// the CPU backend's ThreadPool, so that Kiln's kernels and oneDNN share one team of threads;
// null without oneDNN, and under ThreadSanitizer, which cannot see libgomp's barriers (the
// pool's own workers are used there).
ThreadPool::TeamFn OpenMpTeam();

// Whether this runtime was built with oneDNN (-DKILN_WITH_ONEDNN=ON).
bool OneDnnBuilt();
// "oneDNN 2.6.3" (the library loaded), or "" when not built with it.
const std::string& OneDnnVersion();
// Whether oneDNN runs bfloat16 convolutions here: it needs AVX-512 (avx512_core) among the
// instructions it may use (the CPU's, capped by ONEDNN_MAX_CPU_ISA). False without oneDNN.
bool OneDnnRunsBFloat16();

// C[m, n] = alpha * op(A) * op(B) + beta * C (gemm.h's Sgemm contract) on oneDNN's dnnl_sgemm,
// on the calling thread only (its OpenMP team size is 1 for the call), so the bits do not
// depend on the context's threads. False, with nothing done, without oneDNN or when the call
// fails (the caller then runs its BLAS). Thread-safe.
bool OneDnnSgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Plans instruction `op` (Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU, RNN, QLinearConv,
// QLinearMatMul, MatMulInteger, QGemm or ConvInteger) for the shapes and dtypes of `call` (its
// data is not read, but for the model weights of the integer ops), for a context of `threads`
// threads. `weights_are_constant`: input 1 (W, B) is a model weight (its data never changes),
// and for LSTM and GRU R and B too; for QLinearConv, QLinearMatMul and QGemm every input but X;
// for MatMulInteger and ConvInteger B (W) and its zero point. The op starts with X, Y and the
// residual in NCHW (Place(false, false, false)).
// Forms for which oneDNN has only its reference implementation (`ref:any`, as for an
// activation before the residual add on CPUs without AVX-512) are refused too. kUnimplemented
// with the reason when oneDNN does not take this form (or this runtime has no oneDNN); the
// errors of the CPU kernel's checks (kInvalidArgument) for a malformed call. The CPU backend
// runs the CPU kernel after either.
// `packs`: where the op's model weights are reordered into (and found, when another binding's op
// reordered them into the same layout); it must outlive the op.
Result<std::unique_ptr<OneDnnOp>> PlanOneDnn(std::string_view op, const KernelCall& call, int threads,
                                             bool weights_are_constant, WeightPacks& packs);

}  // namespace kiln::cpu
