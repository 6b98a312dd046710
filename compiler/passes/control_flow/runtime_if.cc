// An If whose condition is tensor data (canonicalizer.h): both branches are compiled, each node
// under its predicate (ir::Predicate: the then-branch's run when the condition holds, the
// else-branch's when it does not), and each output is Where(condition, then value, else value),
// which reads only what the branch that ran wrote (the other's tensors hold what their memory
// last held, and Where selects none of it). An output whose shapes differ in one dim between
// the branches is kiln.IfOutput(condition, then value, else value) instead, a run-time dim
// there. A branch may set run-time dims (a NonZero in it): they are set only when it runs, as
// are the guards that read them checked; so is a shape guard that only one branch needs.
// Outputs whose shapes differ in rank or in more than one dim are refused when something reads
// them.
#include "compiler/passes/canonicalizer.h"

namespace kiln::passes {

Status Canonicalizer::RuntimeIf(const ir::Node& node, std::vector<ir::Node>& out) {
  const std::string what = "node '" + node.name + "' (If)";
  const ir::ValueId cond_id = node.inputs[0];
  const ir::Value& cond = trace_.value(cond_id);
  if (cond.dtype != DType::kBool)
    return InvalidArgument(what + ": input cond: expected a bool tensor, found " + std::string(DTypeName(cond.dtype)));
  if (auto n = ir::NumElements(cond.shape).value(); !n || *n != 1)
    return InvalidArgument(what + ": input cond: expected one element, found shape " + ir::ShapeToString(cond.shape));
  const bool cond_is_scalar = cond.shape.empty();  // `cond` dangles once values are added
  const ir::Block* branches[2] = {nullptr, nullptr};
  const char* names[2] = {"then_branch", "else_branch"};
  for (const auto& [name, block] : node.blocks)
    for (int b = 0; b < 2; ++b)
      if (name == names[b]) branches[b] = block.get();
  for (int b = 0; b < 2; ++b) {
    if (!branches[b]) return InvalidArgument(what + ": no " + names[b]);
    if (branches[b]->outputs.size() != node.outputs.size())
      return InvalidArgument(what + ": " + names[b] + " has " + std::to_string(branches[b]->outputs.size()) +
                             " outputs, the node " + std::to_string(node.outputs.size()));
  }
  // The guards each branch adds (apart from the entry's own If assumptions, which hold for
  // every call the entry takes): one that both branches need is kept once, for the prologue;
  // one that only one branch needs is checked when that branch runs (below).
  std::vector<ir::Guard> added[2];
  const size_t dims = trace_.runtime_dims.size(), first_branch_node = out.size();
  std::vector<ir::ValueId> results[2];
  for (int b = 0; b < 2; ++b) {
    const size_t guards = guards_.size(), meta_guards = trace_.guards.size();
    when_.push_back({cond_id, b == 0});
    Status st = Run(*branches[b], out);
    when_.pop_back();
    KILN_RETURN_IF_ERROR(st);
    if (undecided_) return Status::Ok();
    for (ir::ValueId o : branches[b]->outputs) {
      results[b].push_back(Map(o));
      KILN_RETURN_IF_ERROR(Usable(results[b].back(), what + "'s " + names[b]));
    }
    // Taken out while the other branch runs, so that it records the guards it needs itself
    // (meta::AddGuard records a guard once); put back below.
    added[b].assign(guards_.begin() + static_cast<std::ptrdiff_t>(guards), guards_.end());
    added[b].insert(added[b].end(), trace_.guards.begin() + static_cast<std::ptrdiff_t>(meta_guards),
                    trace_.guards.end());
    guards_.resize(guards);
    trace_.guards.resize(meta_guards);
  }
  // A run-time dim set inside a branch (a NonZero there) is set only when the branch runs,
  // and a guard that reads one is checked when it is set (Entry.runtime_guards): such a
  // guard is the branch's own.
  const size_t branch_dims = trace_.runtime_dims.size();
  auto own = [&](const ir::Guard& g) {
    for (const std::string& v : g.condition.Vars())
      for (size_t d = dims; d < branch_dims; ++d)
        if (trace_.runtime_dims[d].symbol == v) return true;
    return false;
  };
  // A shape guard that only one branch needs is checked only when that branch runs: it is
  // rewritten to read a run-time dim that records the branch, `taken` (the count of
  // NonZero(condition): 1 when it holds, else 0), which an instruction before both branches
  // sets, and to hold when its branch does not run.
  std::optional<ir::Sym> taken;
  auto lone = [&](const ir::Guard& g, int b) -> Result<ir::Guard> {
    if (!taken) {
      ir::Node nz;
      nz.op = "NonZero";
      nz.name = node.name + "_taken";
      nz.inputs = {cond_id};
      ir::Value v;
      v.name = trace_.value(cond_id).name + "_taken";
      nz.outputs = {trace_.AddValue(std::move(v))};
      const ir::ValueId id = nz.outputs[0];
      std::vector<ir::Node> made;
      KILN_RETURN_IF_ERROR(Process(std::move(nz), made));
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(first_branch_node), std::make_move_iterator(made.begin()),
                 std::make_move_iterator(made.end()));
      taken = trace_.value(Map(id)).shape.at(1);
    }
    const ir::Sym not_run = b == 0 ? ir::Sym(1) - *taken : *taken;
    const ir::Sym& c = g.condition;  // holds when not 0; a comparison is 1 or 0
    const ir::Sym holds = c.op() == ir::SymOp::kEq || c.op() == ir::SymOp::kLt ? c : ir::Sym(1) - ir::Eq(c, 0);
    return ir::Guard{ir::Lt(0, holds + not_run),
                     g.origin + ", in " + names[b] + ", checked when it runs"};
  };
  for (int b = 0; b < 2; ++b)
    for (const ir::Guard& g : added[b]) {
      bool both = false;
      for (const ir::Guard& h : added[1 - b]) both = both || h.condition.Same(g.condition);
      if (own(g) || (both && b == 0)) guards_.push_back(g);  // a guard both branches need: once
      else if (!both) {
        KILN_ASSIGN_OR_RETURN(ir::Guard checked, lone(g, b));
        guards_.push_back(std::move(checked));
      }
    }
  // Where takes the condition as a scalar, so that it broadcasts to any output.
  ir::ValueId scalar = cond_id;
  if (!cond_is_scalar) {
    ir::Node reshape;
    reshape.op = "Reshape";
    reshape.name = node.name + "_cond_scalar";
    reshape.inputs = {cond_id, Constant(node.name + "_cond_shape", DType::kInt64, {0}, {})};
    ir::Value v;
    v.name = trace_.value(cond_id).name + "_scalar";
    reshape.outputs = {trace_.AddValue(std::move(v))};
    scalar = reshape.outputs[0];
    KILN_RETURN_IF_ERROR(Process(std::move(reshape), out));
    scalar = Map(scalar);
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == ir::kNoValue) continue;
    const ir::ValueId a = results[0][i], b = results[1][i];
    if (a == b) {
      SetMap(node.outputs[i], a);
      continue;
    }
    const ir::Value &va = trace_.value(a), &vb = trace_.value(b);
    if (va.dtype != vb.dtype)
      return InvalidArgument(what + ": output " + std::to_string(i) + " is " + std::string(DTypeName(va.dtype)) +
                             " in then_branch and " + std::string(DTypeName(vb.dtype)) + " in else_branch");
    // The dims in which the branches' shapes differ, compared as written: (A+A) and (A*2)
    // differ (Sym has no canonical form for them).
    std::vector<int> differ;
    if (va.shape.size() == vb.shape.size())
      for (size_t d = 0; d < va.shape.size(); ++d)
        if (!va.shape[d].Same(vb.shape[d])) differ.push_back(static_cast<int>(d));
    if (va.shape.size() != vb.shape.size() || differ.size() > 1) {
      unmerged_[node.outputs[i]] = what + ": output " + std::to_string(i) + " has shape " +
                                   ir::ShapeToString(va.shape) + " in then_branch and " + ir::ShapeToString(vb.shape) +
                                   " in else_branch; a run-time If carries outputs whose shapes differ in one dim "
                                   "at most";
      continue;
    }
    // One shape: Where. Shapes that differ in one dim: kiln.IfOutput, whose dim there is a
    // run-time dim, set to the size of the branch that ran.
    ir::Node merge;
    merge.op = differ.empty() ? "Where" : "kiln.IfOutput";
    merge.name = node.name + "_output_" + std::to_string(i);
    merge.inputs = {scalar, a, b};
    merge.outputs = {node.outputs[i]};
    if (!differ.empty()) merge.attrs.SetInt("axis", differ[0]);
    KILN_RETURN_IF_ERROR(Process(std::move(merge), out));
  }
  return Status::Ok();
}

}  // namespace kiln::passes
