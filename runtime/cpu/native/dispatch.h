// Running a generated kernel's native function (abi.h) for one kiln.Fused instruction, in
// place of the interpreter (runtime/fused/interpreter.h), which it must match: the same
// outputs for valid inputs, the same error when a kCheckIndex fails.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/status.h"
#include "runtime/cpu/native/abi.h"
#include "runtime/fused/program.h"
#include "runtime/kernels/kernel.h"

namespace kiln::native {

// Most inputs, and most outputs, a program run as native code may have (the argument arrays
// live on the stack: a Run allocates nothing); the loader leaves programs with more to the
// interpreter.
inline constexpr size_t kMaxOperands = 256;

// Runs `fn`, the native code of `program`, over its work items (abi.h: domain elements
// without reduced axes, rows with them), split over `threads` (null: the calling thread) into
// ranges of whole items, each computed by one call, so the results do not depend on the
// thread count. Zero items: no call. The tensors are checked first as the interpreter checks
// them (counts, dtypes, element counts, data), since native code trusts them.
// Errors: kInvalidArgument for tensors that do not match, a negative size argument, or a
// failed kCheckIndex (the interpreter's text: "<check>: index 7 is out of range [-5, 5)", for
// the first failing item in domain order); kInternal when the function returns other than 0
// or 1, or reports a check the program does not have, or the program has over kMaxOperands
// inputs or outputs. Allocates nothing but error messages.
Status RunNative(KernelFn fn, const fused::Program& program, std::span<const cpu::TensorRef> inputs,
                 std::span<const cpu::TensorRef> outputs, std::span<const int64_t> sizes, cpu::ThreadPool* threads);

}  // namespace kiln::native
