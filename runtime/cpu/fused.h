// The CPU backend's interpreter of fused programs (runtime/fused/program.h). It evaluates
// the program over blocks of consecutive domain elements, one node at a time across the
// block, so the per-node dispatch cost is paid once per block rather than per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kiln/status.h"
#include "runtime/cpu/kernel.h"
#include "runtime/fused/program.h"

namespace kiln::cpu {

// Bytes of scratch RunFused needs for `program` (independent of the sizes).
size_t FusedWorkspaceBytes(const fused::Program& program);

// Runs a validated program. `inputs`/`outputs` are dense row-major host tensors matching
// program.inputs/outputs (dtype and, once `sizes` are substituted, element counts);
// `sizes` holds the size arguments. `workspace` must hold FusedWorkspaceBytes(program).
// Errors: kInvalidArgument when a kCheckIndex fails (the message quotes the check and the
// index found), when counts or dtypes do not match, or when a size argument is negative;
// kInternal when a load index is out of range (a compiler bug). Never allocates.
Status RunFused(const fused::Program& program, std::span<const TensorRef> inputs,
                std::span<const TensorRef> outputs, std::span<const int64_t> sizes, void* workspace,
                size_t workspace_bytes);

}  // namespace kiln::cpu
