// Per-family kernel tables. Each op family lives in its own .cc file and exports its
// table here, through KeptKernels (runtime/kernels/selective.h: in a selective build, only the
// rows of the ops it keeps); registry.cc merges them into the sorted table behind FindKernel.
#pragma once

#include <span>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/selective.h"

namespace kiln::cpu {

std::span<const KernelDef> ElementwiseKernels();    // elementwise.cc
std::span<const KernelDef> UnaryKernels();          // unary.cc
std::span<const KernelDef> CastKernels();           // cast.cc
std::span<const KernelDef> MatMulKernels();         // matmul.cc
std::span<const KernelDef> ConvKernels();           // conv.cc
std::span<const KernelDef> NormalizationKernels();  // normalization.cc
std::span<const KernelDef> PoolKernels();           // pool.cc
std::span<const KernelDef> SoftmaxKernels();        // softmax.cc
std::span<const KernelDef> ReduceKernels();         // reduce.cc
std::span<const KernelDef> DataMovementKernels();   // data_movement.cc
std::span<const KernelDef> ShapeKernels();          // shape_ops.cc
std::span<const KernelDef> ResizeKernels();         // resize.cc
std::span<const KernelDef> LstmKernels();           // lstm.cc
std::span<const KernelDef> RnnKernels();            // rnn.cc
std::span<const KernelDef> TransformerKernels();    // transformer.cc
std::span<const KernelDef> CumulativeKernels();     // cumulative.cc
std::span<const KernelDef> BitCastKernels();        // bitcast.cc
std::span<const KernelDef> TensorScatterKernels();  // tensor_scatter.cc
std::span<const KernelDef> CausalConvKernels();     // causal_conv.cc
std::span<const KernelDef> QuantizeKernels();       // quantize.cc
std::span<const KernelDef> GridSampleKernels();     // grid_sample.cc
std::span<const KernelDef> SignalKernels();         // signal.cc
std::span<const KernelDef> MathKernels();           // math.cc
std::span<const KernelDef> MatrixKernels();         // matrix.cc
std::span<const KernelDef> ScatterKernels();        // scatter.cc
std::span<const KernelDef> TopKKernels();           // topk.cc
std::span<const KernelDef> VisionKernels();         // vision.cc
std::span<const KernelDef> FeatureNormKernels();    // feature_norm.cc
std::span<const KernelDef> EinsumKernels();         // einsum.cc
std::span<const KernelDef> CenterCropPadKernels();  // center_crop_pad.cc
std::span<const KernelDef> SelectionKernels();      // selection.cc
std::span<const KernelDef> ReverseSequenceKernels();  // reverse_sequence.cc

}  // namespace kiln::cpu
