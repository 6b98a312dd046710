// The `canonical` stage: shape inference through the op registry, constant folding (by
// running the CPU backend's kernels on constant inputs), shape-arithmetic folding (values
// known as Syms need no instruction), control flow lowered (passes/control_flow/: If resolved
// at compile time or run under predicates, Loop and Scan unrolled when their trip count is known
// at compile time, each iteration a copy of the body, its values named "h@3", or else compiled
// once as a run-time loop, kiln.LoopBegin ... kiln.LoopEnd), BatchNormalization folded into the
// Conv before it (passes/fold_batchnorm.h), and dead-code elimination.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// A condition on the symbols assumed true for this entry; becomes a prologue guard.
struct Assumption {
  ir::Sym condition;  // an expression over the input symbols
  bool holds = true;  // assume nonzero (true) or zero (false)
};

struct CanonicalizeResult {
  ir::Trace trace;
  // Set when an If's condition depended on symbols no assumption covered: the caller
  // compiles the entry twice, once assuming it true and once false.
  std::optional<ir::Sym> undecided_condition;
};

// Largest symbolic expression (Sym::tree_size) a dim or a known element of a node's output may
// be; past it the stage fails with ResourceExhausted naming the node. Real models stay in the
// tens; a hostile one doubling an expression per node would otherwise take exponential time.
inline constexpr int64_t kMaxSymTreeSize = 4096;
// A dim or known element larger than this (Sym::tree_size) becomes a derived symbol
// (ir::Sym::Derived) named after the output, so what later nodes compute from it stays small.
inline constexpr int64_t kDeriveAbove = 48;
// The most iterations of one Loop or Scan the canonical stage unrolls.
inline constexpr int64_t kMaxUnrolledIterations = 1024;

struct CanonicalizeOptions {
  // CompileOptions::loop_scan_bound: the iterations a run-time Loop's scan outputs have room
  // for when its trip count bounds nothing (0: room the runtime grows).
  int64_t loop_scan_bound = 0;
};

// Consumes `imported` (stage "import"); the result's guards list the assumptions used.
Result<CanonicalizeResult> Canonicalize(const ir::Trace& imported, const std::vector<Assumption>& assumptions,
                                        const CanonicalizeOptions& options = {});

// Removes nodes whose outputs nothing uses. Exposed for tests.
void EliminateDeadCode(ir::Trace& trace);

}  // namespace kiln::passes
