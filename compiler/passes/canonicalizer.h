// The walk the canonical stage (canonicalize.h) makes over a trace's nodes: each node's inputs
// mapped to the values that now stand for them, then inferred and folded, forwarded or kept
// (canonicalizer.cc), or lowered when it is control flow (control_flow/: If, Loop and Scan).
// Internal to the canonical stage; Canonicalize() is its only user.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/passes/canonicalize.h"
#include "kiln/status.h"

namespace kiln::passes {

class Canonicalizer {
 public:
  // Writes new values and the meta functions' guards into `trace`.
  Canonicalizer(ir::Trace& trace, const std::vector<Assumption>& assumptions, const CanonicalizeOptions& options)
      : trace_(trace), assumptions_(assumptions), options_(options), remap_(trace.values.size()) {
    for (size_t i = 0; i < remap_.size(); ++i) remap_[i] = static_cast<ir::ValueId>(i);
  }

  // Processes `block` into `out`. Stops early, with undecided() set, at an If whose
  // condition no assumption decides.
  Status Run(const ir::Block& block, std::vector<ir::Node>& out);

  ir::ValueId Map(ir::ValueId id) const {
    return id == ir::kNoValue || static_cast<size_t>(id) >= remap_.size() ? id : remap_[id];
  }
  // Unimplemented when `id` (mapped) is a run-time If's output that it could not carry, read by
  // `reader`; an output nothing reads does not stop the compile.
  Status Usable(ir::ValueId id, const std::string& reader) const {
    auto it = unmerged_.find(id);
    if (it == unmerged_.end()) return Status::Ok();
    return Unimplemented(it->second + "; " + reader + " reads it");
  }
  const std::optional<ir::Sym>& undecided() const { return undecided_; }
  // Every guard of the entry: the If assumptions first (they are why the entry exists), then the
  // meta functions' `ops` (each states an op's own rule, the most precise reason a call fails),
  // then the checks of output extents.
  std::vector<ir::Guard> TakeGuards(std::vector<ir::Guard> ops) {
    std::vector<ir::Guard> all = std::move(entry_guards_);
    all.insert(all.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
    all.insert(all.end(), std::make_move_iterator(guards_.begin()), std::make_move_iterator(guards_.end()));
    guards_.clear();
    return all;
  }

 private:
  // ---- canonicalizer.cc: any node ------------------------------------------------------------

  // A node whose inputs are mapped: If and Loop/Scan lowered (control_flow/), a float Range
  // over integers rewritten, anything else processed.
  Status Dispatch(ir::Node& node, std::vector<ir::Node>& out);
  void SetMap(ir::ValueId id, ir::ValueId to);
  // A new value for one iteration of body value `id`: its name with the iteration ("h@3"),
  // its type left to inference.
  ir::ValueId Fresh(ir::ValueId id);
  // A new value named `name`, its type left to inference.
  ir::ValueId NewValue(std::string name);
  // A new int64 (or bool) scalar constant.
  ir::ValueId ScalarConstant(const std::string& name, DType dtype, int64_t value);
  // A new constant of static `shape` holding `elements` (an integer or bool dtype), stored in
  // its dtype as the canonical stage stores known elements.
  ir::ValueId Constant(const std::string& name, DType dtype, ir::SymShape shape,
                       const std::vector<int64_t>& elements);
  // The value of a one-element int or bool tensor known at compile time (constant data or
  // constant known elements).
  std::optional<int64_t> KnownScalar(ir::ValueId id) const;
  // Infers `node`, then folds it, forwards it (Identity) or appends it to `out`.
  Status Process(ir::Node node, std::vector<ir::Node>& out);
  // Infers `node` and appends it to `out` under the current predicates, as it is: never
  // folded or forwarded (a loop's control, or a copy it needs).
  Status Emit(ir::Node node, std::vector<ir::Node>& out);
  // A float Range whose start, limit and delta are integers (float constants of integral value,
  // or Casts of integer tensors), such as YOLOv8's anchor grid Range(0, Cast<float>(W), 1), is
  // the integer Range cast to float: the same values (exact below 2^24 in float32), and its
  // length is an expression in the shapes rather than data. Rewritten so (true) when at least
  // one operand is not a constant; false leaves the node as it is. New values are never
  // remapped (remap_ covers the imported ones).
  Result<bool> RangeOverIntegers(const ir::Node& node, std::vector<ir::Node>& out);
  // False when every output is constant or known element-wise as Syms, so the runtime
  // needs no instruction for it.
  bool NeedsInstruction(const ir::Node& node);
  // Every output dim must be computable: a dim with no symbols that did not fold to a
  // number overflowed int64. A static dim may be 0 (an empty tensor, as ONNX allows), and so
  // may a symbolic one that is provably >= 0 (a Slice length is clamped at 0). Any other
  // symbolic dim computed from the inputs (a Conv or pool extent, a value symbol) must be at
  // least 1 for the calls this entry accepts; the prologue gets a guard for it.
  Status CheckOutputDims(const ir::Node& node);
  // `s` itself, or where it is larger than kDeriveAbove, a derived symbol for it named `name`
  // (made unique): the same one for every expression Same() as an earlier definition.
  ir::Sym Derive(const ir::Sym& s, const std::string& name);

  // ---- control_flow/: If, Loop and Scan --------------------------------------------------------

  // control_flow/if_resolution.cc: an If whose condition is known at compile time, or decided by
  // an assumption, becomes the branch it takes; one on undecided symbols sets undecided(); one
  // on tensor data is a RuntimeIf.
  Status InlineIf(const ir::Node& node, std::vector<ir::Node>& out);
  // control_flow/runtime_if.cc: both branches under predicates, outputs merged.
  Status RuntimeIf(const ir::Node& node, std::vector<ir::Node>& out);

  // control_flow/body.cc: a Loop's or Scan's body, its parameters bound, run once.
  static const ir::Block* Body(const ir::Node& node);
  // Binds body parameter `param` to value `to`, whose dtype must be the one the body declares
  // for it, if any (ONNX's type of the body's input): InvalidArgument otherwise.
  Status BindParameter(const ir::Node& node, ir::ValueId param, ir::ValueId to);
  // Runs `body` once (iteration `i`) with its parameters bound to `params`; the body's outputs,
  // mapped.
  Result<std::vector<ir::ValueId>> Iterate(const ir::Node& node, const ir::Block& body,
                                           const std::vector<ir::ValueId>& params, int64_t i,
                                           std::vector<ir::Node>& out);

  // control_flow/unroll.cc: a Loop or Scan whose iterations are known at compile time, one copy
  // of the body per iteration.
  Status UnrollLoop(ir::Node& node, std::vector<ir::Node>& out);
  Status UnrollScan(ir::Node& node, std::vector<ir::Node>& out);
  // Stacks one value per iteration (each `shape` the same) along `axis` of a new dim: each
  // Unsqueezed there, then one Concat writing `result`.
  Status Stack(const ir::Node& node, std::vector<ir::ValueId> parts, int64_t axis, ir::ValueId result,
               std::vector<ir::Node>& out);
  // The stack of no iterations: an empty constant whose dims are the body output's declared
  // dims (its ONNX type) with 0 inserted at `axis`, or nullopt when it declares none.
  std::optional<ir::ValueId> EmptyStack(ir::ValueId body_output, int64_t axis, const std::string& name);

  // control_flow/runtime_loop.cc: a Loop or Scan whose iterations are known only when it runs,
  // its body compiled once between kiln.LoopBegin and kiln.LoopEnd.
  struct ScanSlice {  // a Scan input, read one slice per iteration
    ir::ValueId input;
    int64_t axis;
    bool reverse;
  };
  // A scan output, stacked along `axis` (ONNX's: negative counts from the end), from the last
  // iteration if `reverse`.
  struct ScanStack {
    int64_t axis = 0;
    bool reverse = false;
  };
  Status RuntimeLoop(const ir::Node& node, const ir::Block& body, ir::ValueId m, ir::ValueId cond,
                     const std::vector<ir::ValueId>& initials, const std::vector<ScanSlice>& slices,
                     const std::vector<ScanStack>& stacks, std::vector<ir::Node>& out);
  // A Scan of `axes` (resolved scan_input_axes) whose length is symbolic.
  Status RuntimeScan(const ir::Node& node, const ir::Block& body, const std::vector<int64_t>& axes,
                     const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                     const std::vector<int64_t>& out_dirs, std::vector<ir::Node>& out);

  ir::Trace& trace_;
  const std::vector<Assumption>& assumptions_;
  const CanonicalizeOptions& options_;
  std::vector<ir::Predicate> when_;  // inside a run-time If's branches: their conditions, outermost first
  std::vector<ir::ValueId> remap_;
  std::string iteration_;  // inside an unrolled body: "3", or "3.1" in a nested one; else ""
  std::optional<ir::Sym> undecided_;
  std::vector<ir::Guard> guards_;        // the checks of output extents (CheckOutputDims)
  std::vector<ir::Sym> derived_;         // the derived symbols made so far (Derive)
  std::vector<ir::Guard> entry_guards_;  // the If assumptions this entry was compiled for
  // Run-time If outputs it could not carry (shapes that differ in rank or in two dims), with
  // the reason, refused when something reads them.
  std::unordered_map<ir::ValueId, std::string> unmerged_;
  std::unordered_map<ir::ValueId, ir::ValueId> cast_from_int_;  // a float Cast's output -> its integer input
};

}  // namespace kiln::passes
