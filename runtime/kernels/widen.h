// float16 and bfloat16 operands for every CPU kernel. A kernel whose KernelDef::halves is
// false computes only in float32 (and the other dtypes it lists); when a call of it has a
// float16 or bfloat16 operand, RunKernel copies each half input into the workspace widened
// to float32, runs the kernel on those copies and on float32 stand-ins for its half outputs,
// then rounds each stand-in into the real output (to nearest even, once). Other operands
// (int64 indices, bool masks, float32 scales, absent ones) pass through untouched. The
// copies cost one pass over each half operand (float16 on F16C where the CPU has it,
// half_convert.h) and 4 bytes of workspace per element.
//
// The CPU backend (runtime/cpu/backend.cc, which also runs a CUDA context's CPU fallback
// segments) and the compiler's constant folding call kernels only through these two functions.
#pragma once

#include <cstddef>
#include <span>

#include "kiln/status.h"
#include "runtime/attrs.h"
#include "runtime/kernels/kernel.h"

namespace kiln::cpu {

// Bytes of workspace RunKernel needs for a call of `kernel` on these operands (data pointers
// are not read): the kernel's own KernelDef::workspace, and, when it is widened, that figure
// taken on the float32 view of the operands plus the widening scratch: 63 bytes to align
// to 64, the float32 view's TensorRefs (one per operand) and 4 bytes
// per element of each half operand, each part rounded up to 64 bytes. SIZE_MAX when that
// overflows size_t. Thread-safe; allocates only for a widened call with more than 32 operands
// of a kernel with its own WorkspaceFn (the sizing's float32 view), never in RunKernel.
size_t KernelWorkspaceBytes(const KernelDef& kernel, const AttrMap& attrs, std::span<const TensorRef> inputs,
                            std::span<const TensorRef> outputs);

// Runs `kernel` on `call`, widening its half operands as above. `call.workspace` must hold
// KernelWorkspaceBytes(kernel, call.attrs, call.inputs, call.outputs) bytes at any alignment;
// a widened call with less returns kInternal "<op>: widening float16/bfloat16 operands to
// float32 needs N bytes of workspace, M given" before touching any output. A kernel's error
// on a widened call keeps its code and gains " (its float16/bfloat16 operands widened to
// float32)", since the dtypes it names are the float32 stand-ins. Allocates nothing unless
// the kernel fails; thread-safe as the kernel is (each call needs its own workspace).
Status RunKernel(const KernelDef& kernel, const KernelCall& call);

}  // namespace kiln::cpu
