// A fused region's portable program (runtime/fused/program.h) as an LLVM IR function of the
// native calling convention (runtime/cpu/native/abi.h): the program's semantics written as
// scalar loops over its work items, which LLVM's loop vectorizer then widens for the target.
//
//   LLVMModuleRef m = ...;  // one module per CPU target holds every kernel's function
//   Status st = EmitKernel(m, kernel.program, "kiln_kernel_3", target);
//   // kUnimplemented: this kernel stays interpreted on this target (the message says why)
//
// Work items are elements for a program without reduced axes (an outer loop over the domain's
// leading axes, an inner loop over its last axis, both cut to [begin, end)), and rows
// otherwise (per row: each reduction's loop over the row's columns, then the outputs).
// Results are those of the interpreter (runtime/fused/interpreter.h): the same bits for
// arithmetic, comparisons, selects, loads, stores and casts (no multiply-add contraction), and
// within the error documented in llvm_math.h for transcendental functions; float sums
// accumulate in double as the interpreter's do, but in another order, so they may differ in the
// last bits.
#pragma once

#include <llvm-c/Core.h>

#include <string>

#include "compiler/codegen/cpu/targets.h"
#include "kiln/status.h"
#include "runtime/fused/program.h"

namespace kiln::codegen::cpu {

// Adds `name` (external linkage) to `module` (whose context it uses): the native code of a
// validated `program` for `target`. Returns kUnimplemented naming the first node or tensor the
// native code does not cover; the module then holds no function of that name.
Status EmitKernel(LLVMModuleRef module, const fused::Program& program, const std::string& name,
                  const CpuTarget& target);

}  // namespace kiln::codegen::cpu
