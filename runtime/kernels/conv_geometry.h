// The geometry of a Conv call, checked against the ONNX operator spec
// (https://onnx.ai/onnx/operators/onnx__Conv.html): shared by the CPU kernel (conv.cc) and
// oneDNN's convolution (onednn.cc), so both accept exactly the same calls.
#pragma once

#include <cstdint>
#include <string_view>

#include "kiln/status.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {

// Geometry shared by Conv and ConvTranspose. "in" is the spatial extent of X, "out" that
// of Y; for ConvTranspose the roles in im2col/col2im are mirrored.
struct ConvGeometry : WindowGeometry {
  int64_t group = 1;
  int64_t kernel_size = 1;  // product of the kernel's spatial dims
};

// Reads and checks a Conv call's X (N, C, spatial...), W (M, C / group, kernel...) and Y
// (N, M, out...), all float32 of rank 3 to kMaxRank, and its group, kernel_shape, strides,
// dilations, pads and auto_pad (SAME_UPPER, SAME_LOWER, VALID or NOTSET); fills `g`, the
// pads resolved. kInvalidArgument, prefixed "Conv: ", with what was expected and found.
Status ConvGeometryFor(const KernelCall& call, ConvGeometry* g);
// kInvalidArgument unless `bias` (when not null) is float32 with `m` elements.
Status CheckBias(const TensorRef* bias, int64_t m, std::string_view op);

}  // namespace kiln::cpu
