// Per-family op tables. Each op family's meta functions live in their own .cc file and
// append their OpDefs here; registry.cc builds the table once from all of them.
#pragma once

#include <vector>

#include "compiler/ops/registry.h"

namespace kiln::ir {

void RegisterElementwiseOps(std::vector<OpDef>& ops);    // meta_elementwise.cc
void RegisterMatMulOps(std::vector<OpDef>& ops);         // meta_matmul.cc
void RegisterConvOps(std::vector<OpDef>& ops);           // meta_conv.cc
void RegisterPoolOps(std::vector<OpDef>& ops);           // meta_pool.cc
void RegisterNormOps(std::vector<OpDef>& ops);           // meta_norm.cc (incl. Softmax)
void RegisterReduceOps(std::vector<OpDef>& ops);         // meta_reduce.cc
void RegisterShapeOps(std::vector<OpDef>& ops);          // meta_shape.cc
void RegisterDataMovementOps(std::vector<OpDef>& ops);   // meta_data_movement.cc
void RegisterRnnOps(std::vector<OpDef>& ops);            // meta_rnn.cc
void RegisterTransformerOps(std::vector<OpDef>& ops);    // meta_transformer.cc
void RegisterCumulativeOps(std::vector<OpDef>& ops);     // meta_cumulative.cc
void RegisterBitCastOps(std::vector<OpDef>& ops);        // meta_bitcast.cc
void RegisterTensorScatterOps(std::vector<OpDef>& ops);  // meta_tensor_scatter.cc
void RegisterCausalConvOps(std::vector<OpDef>& ops);     // meta_causal_conv.cc
void RegisterQuantizeOps(std::vector<OpDef>& ops);       // meta_quantize.cc
void RegisterGridSampleOps(std::vector<OpDef>& ops);     // meta_grid_sample.cc
void RegisterSignalOps(std::vector<OpDef>& ops);         // meta_signal.cc
void RegisterMathOps(std::vector<OpDef>& ops);           // meta_math.cc
void RegisterMatrixOps(std::vector<OpDef>& ops);         // meta_matrix.cc
void RegisterScatterOps(std::vector<OpDef>& ops);        // meta_scatter.cc
void RegisterTopKOps(std::vector<OpDef>& ops);           // meta_topk.cc
void RegisterVisionOps(std::vector<OpDef>& ops);         // meta_vision.cc
void RegisterFeatureNormOps(std::vector<OpDef>& ops);    // meta_feature_norm.cc
void RegisterEinsumOps(std::vector<OpDef>& ops);         // meta_einsum.cc
void RegisterCenterCropPadOps(std::vector<OpDef>& ops);  // meta_center_crop_pad.cc
void RegisterSelectionOps(std::vector<OpDef>& ops);      // meta_selection.cc
void RegisterLoopOps(std::vector<OpDef>& ops);           // meta_loop.cc
void RegisterReverseSequenceOps(std::vector<OpDef>& ops);  // meta_reverse_sequence.cc

}  // namespace kiln::ir
