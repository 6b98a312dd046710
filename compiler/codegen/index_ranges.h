// Value ranges of a fused program's integer (kI64) nodes, for the CUDA emitter: which index
// computations are non-negative (so floor division and Python modulo are plain C `/` and
// `%`), and which fit in 32 bits (so they are computed as `unsigned` or `int` instead of
// 64-bit integers, whose division costs ~100 instructions on a GPU).
//
//   IndexRanges r = AnalyseRanges(program, nonempty_axes, sizes_checked);
//   r.range[n]   // every value node n takes, in every scope the kernel evaluates it in
//
// The ranges are sound for the program's semantics (runtime/fused/program.h): kI64 arithmetic
// wraps modulo 2^64, so a range is the exact interval of the mathematical result only when
// that interval fits in int64 (`exact`); otherwise the node gets the full int64 range.
// Leaves: kCoord along an axis of constant extent d is in [0, d - 1]; kLinear is below the
// domain's element count; kSize is >= 0 where the kernel checks it (returns early when it is
// negative) and >= 1 where it is the extent of an axis that is never empty where nodes are
// evaluated; kLoad is in its dtype's range; kCheckIndex is in [0, bound - 1].
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/fused/program.h"

namespace kiln::codegen {

struct IntRange {
  int64_t lo = INT64_MIN;
  int64_t hi = INT64_MAX;
  bool NonNegative() const { return lo >= 0; }
  bool Contains(int64_t v) const { return lo <= v && v <= hi; }
  bool operator==(const IntRange&) const = default;
};

// How the emitter holds an integer node: kU32 for values in [0, 2^31) (an `int` that may be
// divided as `unsigned`), kS32 for other 32-bit values (`int`), kS64 otherwise (`long
// long`). Ordered by width: a node is computed in the widest representation of it and its
// operands.
enum class IntRep : uint8_t { kU32 = 0, kS32 = 1, kS64 = 2 };

struct IndexRanges {
  std::vector<IntRange> range;  // per node; float nodes get the full range
  std::vector<bool> exact;      // per node: the value is the unwrapped mathematical result
  // Per node: depends on tensor data (kLoad, kAcc). A kCheckIndex result depends on its
  // bound only: it is a checked index, whatever the checked value was.
  std::vector<bool> data;
  std::vector<IntRep> rep;      // per kI64 node: kS64 for data, else the narrowest that holds the range
};

// `nonempty_axes`: bit k set when axis k's extent is >= 1 wherever nodes are evaluated (all
// axes of an elementwise kernel, whose loop body only runs for a non-empty domain; the kept
// axes of a row reduction). `sizes_checked[k]`: the kernel returns early when size argument
// k is negative. `coords[a]`, where given, is the range coordinate a takes where the nodes are
// evaluated (a piece of a loop split at cuts; the CPU emitter), instead of [0, extent - 1].
// A kI64 comparison whose operands' ranges decide it gets the range of its one result, and a
// select on it the range of the operand it takes. The program must be valid (fused::Validate).
IndexRanges AnalyseRanges(const fused::Program& program, uint32_t nonempty_axes,
                          const std::vector<bool>& sizes_checked, const std::vector<IntRange>& coords = {});

// The representation of a value with this range that does not depend on data.
IntRep RepOf(const IntRange& range);

}  // namespace kiln::codegen
