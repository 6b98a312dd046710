// kiln.NhwcConv: the CPU backend's plan's 2-D Conv in NHWC (compiler/passes/channels_last.h).
//
//   kiln.NhwcConv(X, W[, B[, R]]) -> Y
//   X: [N, H, W, C], Y: [N, OH, OW, M], R (the epilogue residual): Y's shape and layout; W:
//   [M, C/group, KH, KW] and B: [M], as Conv has them. Attributes, epilogue annotations and
//   results are Conv's (ONNX Conv, passes/epilogue.h): Y[n, oh, ow, m] is Conv's Y[n, m, oh, ow]
//   for X transposed to NCHW. Where the Conv is at the boundary between the layouts, one side
//   keeps ONNX's: x_layout = "NCHW" (X: [N, C, H, W]) or y_layout = "NCHW" (Y and R:
//   [N, M, OH, OW]); absent, both are "NHWC".
//
// oneDNN runs it on the tensors where they are (runtime/cpu/onednn: `nhwc` or `nchw` memory,
// reordered inside the op where its convolution wants another); Kiln's kernel (conv.cc) runs
// Conv on NCHW copies of the NHWC operands in its workspace.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "runtime/kernels/kernel.h"

namespace kiln::cpu {

inline constexpr std::string_view kNhwcConvOp = "kiln.NhwcConv";

// Whether kiln.NhwcConv's X, and its Y and residual, are NHWC (else NCHW).
inline bool XIsNhwc(const AttrMap& attrs) { return attrs.GetString("x_layout", "NHWC") != "NCHW"; }
inline bool YIsNhwc(const AttrMap& attrs) { return attrs.GetString("y_layout", "NHWC") != "NCHW"; }

// kiln.NhwcConv's operands with the dims Conv reads them with: its NHWC operands of rank 4
// (XIsNhwc, YIsNhwc) as [N, C, H, W]; the other operands, and any of another rank, as they are.
// The data pointers are the tensors': the views are for shape checks and geometry, and for
// oneDNN, which is told the layout. Neither copyable nor movable (the views point at its dims).
class NchwViews {
 public:
  NchwViews(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
    const bool x = XIsNhwc(attrs), y = YIsNhwc(attrs);
    n_in_ = std::min(inputs.size(), in_.size());
    n_out_ = std::min<size_t>(outputs.size(), 1);
    for (size_t i = 0; i < n_in_; ++i) in_[i] = View(inputs[i], (i == 0 && x) || (i == 3 && y), &dims_[i]);
    if (n_out_ == 1) out_ = View(outputs[0], y, &dims_[4]);
  }
  NchwViews(const NchwViews&) = delete;
  NchwViews& operator=(const NchwViews&) = delete;

  std::span<const TensorRef> inputs() const { return {in_.data(), n_in_}; }
  std::span<const TensorRef> outputs() const { return {&out_, n_out_}; }

 private:
  static TensorRef View(const TensorRef& t, bool nhwc, std::array<int64_t, 4>* dims) {
    if (!nhwc || t.rank != 4) return t;
    *dims = {t.dims[0], t.dims[3], t.dims[1], t.dims[2]};
    TensorRef v = t;
    v.dims = dims->data();
    return v;
  }

  std::array<TensorRef, 4> in_{};
  TensorRef out_{};
  std::array<std::array<int64_t, 4>, 5> dims_{};
  size_t n_in_ = 0, n_out_ = 0;
};

}  // namespace kiln::cpu
