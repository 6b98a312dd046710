// Which recognised attentions the CUDA plan keeps as one Attention op: those cuDNN's fused
// attention takes (runtime/cuda/sdpa.h, SdpaLibrary::SupportsWith, the runtime's own check),
// for the compiler's fusion stage (passes/attention.h, FuseAttention's `keep`). The others stay
// written out (MatMuls on cuBLASLt, the softmax a generated kernel), as they ran before the
// CUDA backend had an Attention, and the compile log says why.
//
//   FuseAttention(trace, &log, CudnnSdpaFilter(90));
//
// An additive mask the pass made from a boolean one (Where(cond, M, -inf)) is refused too when
// the node must give ONNX Attention's zeros (PyTorch's NaN guard matched): it may mask a query's
// every key, where cuDNN's softmax gives NaN. Without the guard (masked_rows_nan) NaN is right.
// Symbolic dims are checked with stand-in values (a distinct multiple of 8, at most 128, per
// distinct dim expression, so equal dims stay equal and no symbolic dim is refused for its
// size): the runtime checks the bound shapes again and runs a form cuDNN refuses on the CPU
// kernel. Thread-safe; needs no device.
#pragma once

#include "compiler/passes/attention.h"

namespace kiln::passes {

// A filter for compute capability `compute_capability` (major * 10 + minor: the newest GPU arch
// the artifact targets). In a build without the CUDA backend it refuses every attention.
AttentionFilter CudnnSdpaFilter(int compute_capability);

}  // namespace kiln::passes
