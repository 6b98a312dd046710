// Quantized (QDQ) graphs: what onnxruntime's quantize_static writes, and what TensorRT and
// OpenVINO read as their int8 form. Every quantized tensor sits between a QuantizeLinear and
// the DequantizeLinear nodes of its readers; the ops between keep their float form.
//
// Folded, for a plan the CPU backend runs (QdqTarget::kCpu), into one integer op each:
//   y = Q(Conv(DQ(x), DQ(W)[, B]), ys, yzp)    -> QLinearConv(x, xs, xzp, W, ws, wzp, ys, yzp[, B'])
//   y = Q(MatMul(DQ(a), DQ(B)), ys, yzp)       -> QLinearMatMul(a, as, azp, B, bs, bzp, ys, yzp)
//   y = Q(Gemm(DQ(a), DQ(B)[, C]), ys, yzp)    -> QGemm(a, as, azp, B, bs, bzp, C', ys, yzp)
// (ONNX opset 10 and 21; onnxruntime's com.microsoft QGemm, Gemm without transA, with alpha and
// transB, beta 1) where x and a are int8 or uint8 with one scale and zero point; W and B
// are int8 or uint8 constants with one scale, or one per output channel (W's axis 0, B's
// columns); ys and yzp one element; every scale and zero point a constant; the float product read
// only by the QuantizeLinear (or by a Relu read only by it, when y's zero point is its type's
// lowest value, so that the saturation is the Relu). B is Conv's float bias, a constant or the
// DequantizeLinear of an int32 constant: B' = round(B / (xs * ws[c])) in int32, which is the
// int32 B itself when its scale is xs * ws[c] (onnxruntime's); Gemm's C likewise, N values, in
// the scale alpha * as * bs[c]. The integer ops run on oneDNN's
// int8 kernels (runtime/cpu/onednn/onednn.h); their int8 weights stay int8 in the artifact.
// A Conv or MatMul that a QuantizeLinear reads but that does not fold keeps its float form, and
// the log says why ("qdq not folded: ...").
//
// For the `cuda` plan (QdqTarget::kCuda) the MatMul and Gemm groups that fold keep their Relu and
// QuantizeLinear, and their float product is computed from the integers on cuBLASLt's int8 GEMM:
//   x8 = x - 128 as int8 (a uint8 x; an int8 x as it is)
//   acc = kiln.MatMulIntegerTransB(x8, W8)   W8 = W as int8 [N, K] (a constant, made here)
//   product = float(acc + offset[n]) * alpha * xs * ws[n]
// offset[n] the bias C' less (xzp - 128, or xzp) times the sum of W8's row n: exact in int32. The
// elementwise nodes fuse into the generated kernels around the GEMM (with the Relu and the
// QuantizeLinear after it). Conditions beyond the fold's: W int8 with zero point 0 (or uint8 with
// 128), K and N multiples of 4 (cuBLASLt's IMMA kernels, runtime/cuda/blas.h), a float32
// product and an input of rank 2 or more. Conv groups keep their float Conv on cuDNN (its int8
// convolution is not wired), and the log says so.
//
// DQ -> Reshape / Transpose / Squeeze / Unsqueeze / Flatten ... -> Q of one quantization runs
// those ops on the int8 tensor and drops the Q (every plan), and DQ -> MaxPool -> Q likewise
// (with `int8_ops`: cuDNN's pooling takes float types alone).
//
// Every plan: a DequantizeLinear of a constant that nothing folded becomes a float constant
// (the canonical stage leaves them for this pass), and so do the constant ops that read it;
// but one of an int8 constant of 4096 elements or more that only elementwise ops read stays, to
// fuse into their kernels, which widen the int8 weight as they read it (the artifact keeps it int8).
// Other QuantizeLinear and DequantizeLinear nodes stay, and fuse into the generated kernels of
// their neighbours (compiler/fusion/lower_elementwise.cc): DQ -> Add -> Q is one kernel.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// What FoldQdq makes of the groups above.
enum class QdqTarget {
  kNone,  // nothing: they keep their float ops
  kCpu,   // QLinearConv, QLinearMatMul and QGemm, for a plan the CPU backend runs
  kCuda,  // MatMul and Gemm groups on cuBLASLt's int8 GEMM, for the `cuda` plan (below)
};

// Whether FoldQdq(trace, ..., kCpu) would fold a group into an integer op.
bool QdqChanges(const ir::Trace& trace);

// The trace with the groups above folded for `target` and the remaining DequantizeLinear nodes of
// constants folded. Appends one line per fold count and per group not folded to `log`.
Result<ir::Trace> FoldQdq(const ir::Trace& trace, std::vector<std::string>* log, QdqTarget target);

}  // namespace kiln::passes
