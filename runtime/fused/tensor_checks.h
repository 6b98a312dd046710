// The checks every runner of a fused program (the interpreter, runtime/fused/interpreter.h, and
// native code, runtime/cpu/native/dispatch.h) makes of the tensors it is given, before it reads
// or writes any: one wording of each error for both.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "runtime/fused/program.h"
#include "runtime/kernels/kernel.h"

namespace kiln::fused {

// Encoded dims (program.h) with the size arguments' values when a dim is one:
// "[4, s0] with s0 = 7".
std::string DimsWithSizes(const std::vector<int64_t>& dims, std::span<const int64_t> sizes);

// The element count of encoded dims under `sizes`; false when a dim names a missing size
// argument, is negative, or the count overflows int64.
bool CountOf(const std::vector<int64_t>& dims, std::span<const int64_t> sizes, int64_t* count);

// Checks `refs` against `specs` (`what`: "input" or "output", for the message): as many tensors,
// each of the spec's dtype and element count under `sizes`, with data when not empty.
// kInvalidArgument naming the tensor, what was expected and what was found.
Status CheckTensors(const std::vector<TensorSpec>& specs, std::span<const cpu::TensorRef> refs,
                    std::span<const int64_t> sizes, const char* what);

}  // namespace kiln::fused
