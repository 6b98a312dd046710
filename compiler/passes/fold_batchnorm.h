// Folds an inference BatchNormalization into the Conv that feeds it, at compile time:
//   y = scale * (conv(x, W) + b - mean) / sqrt(var + eps) + B
//     = conv(x, W * s) + (b - mean) * s + B,   s = scale / sqrt(var + eps) per output channel.
// Exported CNNs (PaddleOCR, MobileNets, UltraFace) put one after nearly every Conv; folding
// removes a full pass over each activation. Applies when the Conv's only reader is the
// BatchNormalization, every weight involved is a float32 constant, and the Conv output is
// not a model output.
#pragma once

#include "compiler/ir/trace.h"

namespace kiln::passes {

// Returns the number of BatchNormalization nodes folded.
int FoldBatchNormIntoConv(ir::Trace& trace);

}  // namespace kiln::passes
