// Arrays across the boundary: any DLPack or buffer-protocol array (NumPy, PyTorch, CuPy) as a
// kiln::TensorView without a copy, and Kiln's outputs as new NumPy arrays.
#pragma once

#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "kiln/runtime.h"

namespace kiln::python {

// An array, read-only, on the CPU or a CUDA device, any dtype and layout; checked by ToView.
using AnyArray = nanobind::ndarray<nanobind::ro>;
// An array Kiln writes outputs into.
using WritableArray = nanobind::ndarray<>;

// A view of `a`'s memory, which the caller keeps alive. `what` names it in errors
// ("input 'x'"). `rows` > 0: `a` views a KV cache bound with that many rows per head
// (ExecutionContext::BindCache): rank 4, C order but for dim 2, whose stride is that of `rows`
// rows (buffer[:, :, :n] of a C-contiguous [batch, heads, rows, head size] buffer). Errors
// (kInvalidArgument): a dtype Kiln has no type for, a rank above kMaxRank, strides that are not
// C order (np.ascontiguousarray makes a copy that is), memory that is neither the CPU's nor a
// CUDA device's.
Result<TensorView> ToView(const AnyArray& a, const std::string& what, int64_t rows = 0);
Result<TensorView> ToView(const WritableArray& a, const std::string& what, int64_t rows = 0);

// A new NumPy array holding a copy of host tensor `t`.
nanobind::object ToNumpy(const TensorView& t);

// The NumPy array to copy the CUDA backend's output `t` into: its shape and dtype, in host
// memory, with `*view` viewing its buffer.
nanobind::object EmptyNumpy(const TensorView& t, TensorView* view);

}  // namespace kiln::python
