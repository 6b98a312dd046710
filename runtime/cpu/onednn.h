// oneDNN (https://uxlfoundation.github.io/oneDNN/) as a library of the CPU backend, as cuDNN
// and cuBLASLt are the CUDA backend's (runtime/cuda/library.h). The op table names the ops it
// claims (CpuLibraryOf, runtime/op_table.h); for each such instruction the CPU backend asks
// PlanOneDnn once per entry and binding of its shapes, and runs the planned op instead of
// its CPU kernel, or the CPU kernel with oneDNN's reason in Stats::last_fallbacks when
// oneDNN refuses the form.
//
// What oneDNN runs: float32 Conv of 1 to 3 spatial dims (grouped and depthwise included),
// with the epilogue of compiler/passes/epilogue.h as post-ops: Conv's bias, then the
// activation (Relu, Sigmoid, SiLU, HardSwish, Gelu, GeluTanh) and the residual add (`sum`)
// in the node's order.
//
// Layouts: Kiln's tensors are NCHW (plain, row-major). oneDNN chooses each Conv's layouts
// (`any`): NHWC or a blocked layout (nChw16c, nChw8c), with one reorder of X into it and one
// of Y out of it in the call's workspace. Weights that are model weights are
// reordered into the chosen layout once, at the first Run of a binding, and kept with the
// plan (OneDnnOp::held_bytes); other weights are reordered on every Run.
//
// Threads: this oneDNN (Debian's libdnnl) runs its parallel loops on OpenMP (libgomp). A Run
// sets the calling thread's OpenMP team size to the context's cpu_threads for the duration
// of each oneDNN call and restores it after. Kiln's own kernels then split their loops over
// the same OpenMP team (OpenMpTeam), so the two never compete for the cores. libgomp's
// threads busy-wait for a while after each parallel region (GOMP_SPINCOUNT, up to about a
// millisecond) before they sleep, between Runs too; OMP_WAIT_POLICY=passive in the process's
// environment makes them sleep at once, at the cost of a wake-up per region.
//
// Numerics: oneDNN's results may differ from the CPU kernel's in the last bits (another
// summation order, polynomial activations), and may differ between thread counts where
// oneDNN splits a reduction.
//
// Thread-compatible: a plan is used by one context at a time; planning is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/status.h"
#include "runtime/cpu/kernel.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::cpu {

// One instruction planned on oneDNN for one binding of its shapes: its primitives, made once.
class OneDnnOp {
 public:
  virtual ~OneDnnOp() = default;
  // Bytes of KernelCall::workspace Run needs: the reordered X and Y (and W when it is not a
  // model weight) and oneDNN's scratchpad, each 64-byte aligned.
  virtual size_t workspace_bytes() const = 0;
  // Bytes the plan holds itself: the model weights in oneDNN's layout (0 before the first Run).
  virtual uint64_t held_bytes() const = 0;
  // What runs, e.g. "brgconv:avx512_core, X and Y in nChw16c" (oneDNN's implementation name).
  virtual const std::string& description() const = 0;
  // Runs the op on `call`, whose operands have the shapes it was planned for and whose
  // workspace has workspace_bytes(). Allocates nothing of Kiln's own after the first Run.
  // kInternal when a oneDNN call fails (its status named).
  virtual Status Run(const KernelCall& call) = 0;
};

// The OpenMP team oneDNN runs on (libgomp's parallel region on the calling thread's team), for
// the CPU backend's ThreadPool, so that Kiln's kernels and oneDNN share one team of threads;
// null without oneDNN, and under ThreadSanitizer, which cannot see libgomp's barriers (the
// pool's own workers are used there).
ThreadPool::TeamFn OpenMpTeam();

// Whether this runtime was built with oneDNN (-DKILN_WITH_ONEDNN=ON).
bool OneDnnBuilt();
// "oneDNN 2.6.3" (the library loaded), or "" when not built with it.
const std::string& OneDnnVersion();

// Plans instruction `op` for the shapes and dtypes of `call` (its data is not read), for a
// context of `threads` threads. `weights_are_constant`: input 1 is a model weight (its data
// never changes). Null (and OK) where Kiln's CPU kernel is the faster choice: a pointwise
// Conv (1x1, stride 1, no pads), which Kiln's kernel runs as one SGEMM on NCHW with no
// reorder, where oneDNN 2.6 is 2-9x slower on NCHW. kUnimplemented with the reason when oneDNN
// does not take this form (or this runtime has no oneDNN); the errors of the CPU kernel's
// checks (kInvalidArgument) for a malformed call. The CPU backend runs the CPU kernel after
// each of these.
Result<std::unique_ptr<OneDnnOp>> PlanOneDnn(std::string_view op, const KernelCall& call, int threads,
                                             bool weights_are_constant);

}  // namespace kiln::cpu
