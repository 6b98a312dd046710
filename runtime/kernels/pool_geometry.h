// The geometry of a pooling call (MaxPool, AveragePool, LpPool), checked against the ONNX
// operator spec (https://onnx.ai/onnx/operators/onnx__MaxPool.html): shared by the CPU kernel
// (pool.cc) and oneDNN's pooling (onednn.cc), so both accept exactly the same calls.
#pragma once

#include <string_view>

#include "kiln/status.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {

using PoolGeometry = WindowGeometry;

// Reads and checks a pooling call's X (N, C, spatial...) and Y (N, C, out...), of one rank,
// 3 to kMaxRank, and its kernel_shape, strides, dilations, pads and auto_pad (SAME_UPPER,
// SAME_LOWER, VALID or NOTSET); fills `g`, the pads resolved. Each out is the floor or
// (ceil_mode) the ceiling count of windows over the padded input, at least 0, with a last
// window that would start past the padded end dropped, as ONNX's reference does. Attributes
// whose window extent, padded input or window starts leave int64 are refused.
// kInvalidArgument, prefixed "<op>: ", with what was expected and found.
Status PoolGeometryFor(const KernelCall& call, std::string_view op, PoolGeometry* g);

}  // namespace kiln::cpu
