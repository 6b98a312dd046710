// Index arithmetic of a fused program rewritten so that LLVM sees affine addresses: each integer
// sum of products by constants is held as a linear form, in which a pair
//   k*d * floordiv(x, d)  +  k * mod(x, d)        (d a constant, not 0)
// becomes k * x, the identity of floor division and Python's modulo (runtime/fused/program.h),
// exact in the programs' wrapping int64 arithmetic too. A Reshape read through a Transpose or
// Concat unflattens an index and flattens it again: ((c*20 + x/20)*20 + x%20) is c*400 + x after
// this, a contiguous load the loop vectorizer widens where it would otherwise gather.
//
//   fused::Program q = SimplifyIndices(p);  // same semantics; dead nodes are left for Eval to skip
#pragma once

#include "runtime/fused/program.h"

namespace kiln::codegen::cpu {

// `p` with every kI64 kAdd, kSub, kMul and kNeg node replaced by its simplified linear form
// (new nodes appended; outputs and every other node keep their operands' values). The result
// computes the same values as `p` for every input; its nodes still come after their operands.
fused::Program SimplifyIndices(const fused::Program& p);

// SimplifyIndices(p), with the trailing axes of an elementwise program merged into one while
// the last is shorter than `min_extent` (constant extents only): a 7x7 feature map becomes one
// loop of 49 instead of 7 loops of 7. The merged axis' coordinate J stands for the old ones
// (floordiv(J, W) and mod(J, W)); a merge is kept only when the simplification cancels every
// such division the outputs still depend on (the addresses were affine in the merged axes), so
// the loop body never divides per element. The result computes the same values as `p` over
// the same row-major elements (kLinear is unchanged).
fused::Program SimplifyAndMergeAxes(const fused::Program& p, int64_t min_extent);

}  // namespace kiln::codegen::cpu
