// kiln.NhwcConv: the CPU backend's plan's 2-D Conv in NHWC (compiler/passes/channels_last.h).
//
//   kiln.NhwcConv(X, W[, B[, R]]) -> Y
//   X: [N, H, W, C], Y: [N, OH, OW, M], R (the epilogue residual): Y's shape; W: [M, C/group,
//   KH, KW] and B: [M], as Conv has them. Attributes, epilogue annotations and results are
//   Conv's (ONNX Conv, passes/epilogue.h): Y[n, oh, ow, m] is Conv's Y[n, m, oh, ow] for X
//   transposed to NCHW.
//
// oneDNN runs it on the tensors where they are (runtime/cpu/onednn: its convolutions' `nhwc`
// memory); Kiln's kernel (conv.cc) runs Conv on NCHW copies in its workspace.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <string_view>

#include "runtime/kernels/kernel.h"

namespace kiln::cpu {

inline constexpr std::string_view kNhwcConvOp = "kiln.NhwcConv";

// kiln.NhwcConv's operands with the dims Conv reads them with: X, the residual (input 3) and Y
// of rank 4 as [N, C, H, W]; the other operands, and any of another rank, as they are. The data
// pointers are the NHWC tensors': the views are for shape checks and geometry, and for oneDNN,
// which is told the layout. Neither copyable nor movable (the views point at its dims).
class NchwViews {
 public:
  NchwViews(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
    n_in_ = std::min(inputs.size(), in_.size());
    n_out_ = std::min<size_t>(outputs.size(), 1);
    for (size_t i = 0; i < n_in_; ++i) in_[i] = View(inputs[i], i == 0 || i == 3, &dims_[i]);
    if (n_out_ == 1) out_ = View(outputs[0], true, &dims_[4]);
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
