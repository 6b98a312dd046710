// New constants that passes write into a trace (epilogue.h's folded biases, attention.h's
// summed masks, contrib_ops.h's axes and shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"

namespace kiln::passes {

// A new constant value `name` of `dtype` (a float type) and static `dims` holding `values`
// (row-major, as many as dims' product), each rounded once to dtype. Returns its id.
ir::ValueId AddFloatConstant(ir::Trace& t, std::string name, DType dtype, std::vector<int64_t> dims,
                             const std::vector<double>& values);

// A new constant value `name` of `dtype` (an integer type or bool) and static `dims` holding
// `values` (row-major, as many as dims' product), each converted as a static_cast would.
ir::ValueId AddIntConstant(ir::Trace& t, std::string name, DType dtype, std::vector<int64_t> dims,
                           const std::vector<int64_t>& values);

}  // namespace kiln::passes
