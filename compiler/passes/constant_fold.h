// Constant folding by running the CPU backend's kernel for a node whose inputs are all
// constants, so the compiler and the runtime compute folded values the same way.
#pragma once

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// Folded results larger than this stay as instructions unless their inputs were larger.
inline constexpr int64_t kMaxFoldBytes = 4 << 20;

// True if every present input is constant, every output shape is static and a CPU kernel
// exists for the op.
bool CanFold(const ir::Trace& trace, const ir::Node& node);
// Runs the kernel and stores each output's data (only for a node CanFold accepts); errors
// name the node.
Status FoldNode(ir::Trace& trace, const ir::Node& node);
// Turns a Value whose `sym` elements are all constants into a constant. Returns true if
// it did.
bool MaterializeKnownElements(ir::Value& value);

}  // namespace kiln::passes
