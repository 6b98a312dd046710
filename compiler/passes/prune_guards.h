// Drops the guards an entry's symbol ranges already imply, and rejects an entry none of whose
// shapes passes a guard. (Such an entry may still describe shapes the model accepts: a
// symbolic broadcast is compiled as equal dims, guarded, so a dim of 1 that ONNX would
// broadcast needs a profile that fixes it.) Guards come from canonicalisation ("Conv output dim 2 must
// be >= 1", "the two Add inputs' dims are equal", an If outcome); the prologue checks each
// symbol's range (compiler/profile.h) before any guard, so a guard that holds for every
// value in the ranges only costs time per call and lines in `kiln inspect`.
//
// A guard is decided by interval arithmetic over the ranges (exact for the monotone
// arithmetic of conv and pool extents), else by evaluating it at every binding of its
// symbols when they are bounded and have at most kMaxEnumerated bindings together; otherwise
// it is kept.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/profile.h"
#include "kiln/status.h"

namespace kiln::passes {

inline constexpr int64_t kMaxEnumerated = 4096;

// Symbols missing from `ranges` are >= 1 (the prologue's default). Removes implied guards
// from trace.guards and appends one line per removal to `log` (when not null). Errors:
// kInvalidArgument naming the guard when it fails for every binding the ranges admit.
Status PruneGuards(ir::Trace& trace, const std::map<std::string, compiler::DimRange>& ranges,
                   std::vector<std::string>* log);

}  // namespace kiln::passes
