// kiln.NhwcConvInt8: the CUDA plan's int8 convolution (compiler/passes/qdq.h), in the form of
// cuDNN's INT8_EXT_CONFIG (runtime/cuda/dnn.h):
//
//   kiln.NhwcConvInt8(X, W) -> Y
//   X: int8 [N, H, W, C]; W: int8 [M, KH, KW, C] (cuDNN's NHWC filter); Y: float32 [N, OH, OW, M]
//   Y[n, oh, ow, m] = sum over kh, kw, c of X[n, oh * sh - ph + kh * dh, ow * sw - pw + kw * dw, c]
//                     * W[m, kh, kw, c]   (zero outside X)
//   the int32 sum converted to float32 (exact while below 2^24 in magnitude).
//   Attributes: Conv's `strides`, `pads` ([h_begin, w_begin, h_end, w_end]) and `dilations`
//   (default 1, 0 and 1); one group. OH and OW are Conv's output dims for them.
//
// The compiler writes it for a quantized 2-D Conv whose weight is a constant (the NHWC filter is
// made once, at compile time), between the generated kernels that move X's channels last and Y's
// back. Its CPU kernel (quantize.cc, plain loops) runs it where cuDNN does not.
#pragma once

#include <string_view>

namespace kiln::cpu {

inline constexpr std::string_view kNhwcConvInt8Op = "kiln.NhwcConvInt8";

}  // namespace kiln::cpu
