// One op as the CUDA backend's libraries (cuBLASLt, cuDNN: cuda/library.h) receive it: device
// tensors in the ONNX operator's input/output order (the newest opset's form, with the
// fusion stage's epilogue annotations: compiler/passes/epilogue.h, runtime/kernels/epilogue.h),
// the op's attributes, the caller's stream, and workspace carved from the context's arena.
// Shapes are already computed; a library only enqueues work on `stream` and never
// synchronises, allocates device memory, or throws.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kiln/tensor.h"
#include "runtime/attrs.h"
#include "runtime/shape_text.h"

namespace kiln::cuda {

struct DeviceTensor {
  CUdeviceptr data = 0;
  DType dtype = DType::kUndefined;
  int32_t rank = -1;  // -1: an absent optional operand
  const int64_t* dims = nullptr;
  int64_t num_elements = 0;
  bool weight = false;  // a model weight: its data never changes while the model is loaded
  const void* host = nullptr;  // a model weight's bytes on the host (the Model's, read-only), else null

  bool present() const { return rank >= 0; }
};

// A device operand's shape as text (runtime/shape_text.h): "[2, 3]", "<absent>" for an absent one.
inline std::string ShapeText(const DeviceTensor& t) {
  return t.present() ? kiln::ShapeText(std::span<const int64_t>(t.dims, static_cast<size_t>(t.rank))) : "<absent>";
}

struct OpCall {
  const AttrMap& attrs;
  std::span<const DeviceTensor> inputs;
  std::span<const DeviceTensor> outputs;
  CUstream stream = nullptr;
  CUdeviceptr workspace = 0;  // at least the library's Workspace() bytes for these shapes
  size_t workspace_bytes = 0;
};

// How a library's errors name one call: `node` as the caller gave it, which the CUDA
// backend makes its instruction label ("instruction 3 'conv1' (Conv)"), or `op` without one.
// Formatted only when an error occurs, so that a steady-state Run builds no string.
struct CallName {
  std::string_view op, node;
  std::string str() const { return std::string(node.empty() ? op : node); }
};

}  // namespace kiln::cuda
