// The calling convention between the CPU backend and the native code that `kiln compile`
// generates for a fused region (docs/architecture.md, "Native CPU code"). The compiler's
// emitter (compiler/codegen/cpu/) writes functions of this type; the runtime's loader
// (runtime/cpu/native/) maps them and the CPU backend calls them. Only plain C types cross
// it, so that an artifact's code and the runtime agree on it whatever compiled either.
//
// One function per generated kernel and CPU target:
//
//   int32_t kernel(const kiln::native::KernelArgs* args);
//
// It computes the work items [args->begin, args->end) of its program (runtime/fused/program.h):
//  - a program without reduced axes: elements, in row-major order of the domain;
//  - a program with reduced axes: rows (one combination of kept coordinates), each whole, its
//    reductions and outputs as the program's semantics say.
// Calls on disjoint ranges may run at once on different threads; each writes only its own
// items' output elements. The function reads no memory but its inputs, sizes and constants,
// writes none but its outputs and `failed`, calls nothing, allocates nothing and keeps no state.
//
// Returns 0, or 1 when a kCheckIndex failed: then failed[0] is the check (an index into
// Program::checks), failed[1] the index as the check saw it (operand x) and failed[2] its bound
// (operand y), for the first failing element in domain order within the range; the outputs of
// the range are then unspecified. The runtime words the error from the three as the
// interpreter does (fused::IndexOutOfRange needs the bound).
#pragma once

#include <cstdint>

namespace kiln::native {

// Version of this convention, NativeCode.abi in the artifact: a runtime refuses other versions
// (and interprets the programs instead).
inline constexpr uint32_t kAbiVersion = 1;

struct KernelArgs {
  const void* const* inputs;  // Program::inputs.size() pointers to dense row-major tensors
  void* const* outputs;       // Program::outputs.size() pointers to dense row-major tensors
  const int64_t* sizes;       // Program::num_sizes size arguments
  int64_t begin;              // first work item
  int64_t end;                // one past the last work item; begin <= end
  int64_t* failed;            // three int64 the function writes when it returns 1
};

using KernelFn = int32_t (*)(const KernelArgs* args);

}  // namespace kiln::native
