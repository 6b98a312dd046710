// The CPU backend's kernel interface. Every registry op has one CPU kernel, a plain
// function over dense row-major host tensors. The runtime calls kernels from the
// instruction list; the compiler calls the same kernels to fold constants.
//
// Contract for every kernel:
//  - inputs and outputs follow the ONNX operator spec of the newest opset (the importer
//    rewrites older forms), with the input/output order of that spec;
//  - an absent optional input has `data == nullptr` and `rank == -1`; in a loaded artifact the
//    operand counts and the required inputs' presence match KernelDef::arity (runtime/verify.cc),
//    but dtypes, shapes, attributes and data are whatever the artifact and caller give: a kernel
//    checks each before it casts a pointer, indexes, or converts a float to an integer;
//  - output shapes are already computed by the compiler's shape inference and given in
//    `outputs[i].dims`; a kernel only writes the data;
//  - kernels never allocate on the heap and never throw: scratch memory comes from
//    `workspace` (sized by KernelDef::workspace), errors are returned as Status;
//  - callers go through runtime/kernels/widen.h (KernelWorkspaceBytes, RunKernel), which gives a
//    kernel without KernelDef::halves float32 copies of its float16/bfloat16 operands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/op_table.h"
#include "runtime/attrs.h"

namespace kiln::cpu {

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kUndefined;
  int32_t rank = -1;
  const int64_t* dims = nullptr;
  int64_t num_elements = 0;

  bool present() const { return rank >= 0; }
  int64_t dim(int i) const { return dims[i]; }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

class ThreadPool;  // runtime/kernels/thread_pool.h

struct KernelCall {
  const AttrMap& attrs;
  std::span<const TensorRef> inputs;
  std::span<const TensorRef> outputs;
  void* workspace = nullptr;      // scratch for this call, at least KernelDef::workspace bytes
  size_t workspace_bytes = 0;
  // The context's worker threads, for ParallelFor over a kernel's outer loop; null (constant
  // folding, most tests) runs it on the calling thread. A kernel's results must not depend on
  // it: parts may not split a floating-point reduction.
  ThreadPool* threads = nullptr;
  // Set for the instruction that reports a run-time dim (KernelDef::runtime_size): its outputs
  // are sized for the dim's bound (the largest size it can take); the kernel writes them packed
  // for the size it finds (NonZero's [rank, count] with stride count) and stores that size here,
  // or fails with kInternal, never writing past its outputs, when they have no room for it. Null: the
  // compiler knew the size, and the kernel checks that the data gives the outputs' dims.
  int64_t* runtime_size = nullptr;
  // Attention only, for a KV cache bound to the context (ExecutionContext::BindCache): 0, or the
  // rows per head of the caller's cache buffers. past_key and present_key then point at one
  // buffer [batch, kv_heads, cache_rows, head size] (past_value and present_value at another),
  // whose first `past` rows of each head hold the past already; the kernel writes the new rows
  // after them and reads every key and value from there.
  int64_t cache_rows = 0;
};

using KernelFn = Status (*)(const KernelCall& call);
// Bytes of scratch a call with these shapes needs (0 if none). Must not allocate.
using WorkspaceFn = size_t (*)(const AttrMap& attrs, std::span<const TensorRef> inputs,
                               std::span<const TensorRef> outputs);

struct KernelDef {
  std::string_view op;  // ONNX op type, or a "kiln."-prefixed internal op
  KernelFn run = nullptr;
  WorkspaceFn workspace = nullptr;  // null: no scratch needed
  // The kernel reads and writes float16/bfloat16 operands itself. Otherwise the runtime runs
  // it in float32 on widened copies of its half operands and rounds its half outputs once
  // (runtime/kernels/widen.h), so the kernel only ever sees float32 where a model has halves.
  bool halves = false;
  // The operands the op takes (runtime/op_table.h), filled by the registry. Load checks every
  // instruction against it (runtime/verify.cc), so a kernel is never reached with too few or
  // too many operands or with a required input absent; kernels still check dtypes and shapes.
  Arity arity{};
  // The kernel can report a run-time dim (KernelCall::runtime_size): its output size depends on
  // the data (NonZero, Compress, Unique, NonMaxSuppression).
  bool runtime_size = false;
};

// The kernel for `op`, or nullptr. Thread-safe; the table is built once.
const KernelDef* FindKernel(std::string_view op);
// Every registered kernel, sorted by op name.
std::span<const KernelDef> AllKernels();

}  // namespace kiln::cpu
