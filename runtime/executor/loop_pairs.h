// A run-time Loop's two control instructions (kiln.LoopBegin, kiln.LoopEnd; runtime/executor/loop.h)
// found and checked at load, so that the executor's jumps stay inside the entry and a body never
// overlaps another loop.
#pragma once

#include "kiln/status.h"
#include "runtime/model_impl.h"

namespace kiln {

// Sets pe.loop_pair: per instruction, its partner's index for a LoopBegin (its LoopEnd) and a
// LoopEnd (its LoopBegin), else -1. kDataLoss, naming the instructions, when the loops do not
// nest, a LoopEnd's operands do not fit its `carried` (loop::EndLayout), its parameters are not its LoopBegin's outputs (its inputs 1 to carried + 2)
// or its trip count M not its LoopBegin's, or the two run under different predicates.
Status PairLoops(PreparedEntry& pe);

}  // namespace kiln
