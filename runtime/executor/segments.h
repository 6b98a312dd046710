// An entry split into segments at load: maximal runs of instructions with no host decision
// between them, which the executor hands to a backend whole (runtime/backend.h, RunSegment). A
// segment ends where
//  - the predicates change (a run-time If's branch: the executor reads the condition first);
//  - a run-time Loop's control comes, or ends (kiln.LoopBegin and kiln.LoopEnd are the
//    executor's own instructions, runtime/executor/loop.h);
//  - an instruction reports a run-time dim (the executor sets it before anything reads it).
// A backend's placement (Backend::Where) may split a segment further at run time: a CUDA
// entry's instructions that run on the host form CPU fallback segments of their own.
#pragma once

#include "kiln/status.h"
#include "runtime/model_impl.h"

namespace kiln {

// Sets pe.segment_end, and pe.written_at and pe.last_read_at from pe.liveness (which must be
// built). Needs pe.loop_pair (PairLoops) and pe.runtime_dim_of.
void SplitSegments(PreparedEntry& pe);

}  // namespace kiln
