// onnxruntime's com.microsoft ops whose ONNX form depends on their inputs' ranks and dims, to
// the specification in onnxruntime's docs/ContribOperators.md: FusedMatMul, FusedConv,
// Attention, MultiHeadAttention, RotaryEmbedding and EmbedLayerNormalization, the ops its
// transformer optimizer writes into "optimized" models.
//
// The importer keeps each as one node of op "com.microsoft.<op_type>" with its attributes; the
// canonical stage, where the inputs' shapes are known, writes it as the ONNX ops it composes
// (ExpandContribOp), which are then inferred, folded and fused as any others (the attention
// ops become ONNX's Attention, which runs on oneDNN, cuDNN or Kiln's kernel). The com.microsoft
// ops that need no shapes (Gelu, SkipLayerNormalization, the quantized ops, ...) are written out
// at import (compiler/onnx/importer.cc). docs/contrib_ops.md lists what each op takes.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// The op name prefix of the nodes ExpandContribOp takes.
inline constexpr std::string_view kContribPrefix = "com.microsoft.";

// Whether `op_type` (of domain com.microsoft) is one of the ops above.
bool IsShapedContribOp(std::string_view op_type);

// The ONNX nodes that compute `node` (op kContribPrefix + one of the ops above, its inputs'
// dtypes and shapes inferred), writing node's own output values; their intermediate values and
// constants are added to `trace`. Errors name the node: InvalidArgument for inputs or
// attributes the specification does not allow (a missing required input, a rank it does not
// define), Unimplemented for forms Kiln does not take (each listed in docs/contrib_ops.md).
Result<std::vector<ir::Node>> ExpandContribOp(ir::Trace& trace, const ir::Node& node);

}  // namespace kiln::passes
