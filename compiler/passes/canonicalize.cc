// The canonical stage (canonicalize.h): the walk over the imported trace (canonicalizer.h and
// control_flow/), then the guards gathered, BatchNormalization folded, and dead code removed.
#include "compiler/passes/canonicalize.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "compiler/passes/canonicalizer.h"
#include "compiler/passes/fold_batchnorm.h"

namespace kiln::passes {
namespace {

// Keeps only the values the trace refers to, renumbered in order of first use.
void Compact(ir::Trace& trace) {
  std::vector<ir::ValueId> renum(trace.values.size(), ir::kNoValue);
  std::vector<ir::Value> kept;
  auto use = [&](ir::ValueId& id) {
    if (id == ir::kNoValue) return;
    if (renum[id] == ir::kNoValue) {
      renum[id] = static_cast<ir::ValueId>(kept.size());
      kept.push_back(trace.values[id]);
    }
    id = renum[id];
  };
  for (ir::ValueId& id : trace.inputs) use(id);
  for (ir::Node& n : trace.body.nodes) {
    for (ir::ValueId& id : n.inputs) use(id);
    for (ir::Predicate& p : n.when) use(p.cond);
    for (ir::ValueId& id : n.outputs) use(id);
  }
  for (ir::ValueId& id : trace.outputs) use(id);
  trace.values = std::move(kept);
}

// Folding an Identity or inlining an If can leave a model output pointing at a value with
// another name (an input, a branch value). Outputs keep the model's names: an intermediate
// is renamed; an input or an output listed twice gets an Identity copy.
void KeepOutputNames(const ir::Trace& imported, ir::Trace& trace) {
  for (size_t i = 0; i < trace.outputs.size(); ++i) {
    const std::string& want = imported.value(imported.outputs[i]).name;
    ir::ValueId id = trace.outputs[i];
    if (trace.value(id).name == want) continue;
    bool is_input = std::find(trace.inputs.begin(), trace.inputs.end(), id) != trace.inputs.end();
    bool repeated = std::count(trace.outputs.begin(), trace.outputs.end(), id) > 1;
    if (!is_input && !repeated) {
      trace.value(id).name = want;
      continue;
    }
    ir::Value copy = trace.value(id);
    copy.name = want;
    copy.data = nullptr;
    copy.sym.reset();
    ir::Node node;
    node.op = "Identity";
    node.name = "output_" + want;
    node.inputs = {id};
    node.outputs = {trace.AddValue(std::move(copy))};
    trace.outputs[i] = node.outputs[0];
    trace.body.nodes.push_back(std::move(node));
  }
}



void AddVars(const ir::Sym& s, std::unordered_set<std::string>& to) {
  for (const std::string& v : s.Vars()) to.insert(v);
}

// The symbols that every guard, and the shape or symbolic elements of every value but
// `node`'s outputs, read.
std::unordered_set<std::string> ReadElsewhere(const ir::Trace& trace, const ir::Node& node) {
  std::unordered_set<std::string> read;
  for (const ir::Guard& g : trace.guards) AddVars(g.condition, read);
  for (size_t id = 0; id < trace.values.size(); ++id) {
    if (std::find(node.outputs.begin(), node.outputs.end(), static_cast<ir::ValueId>(id)) != node.outputs.end())
      continue;
    const ir::Value& v = trace.values[id];
    for (const ir::Sym& d : v.shape) AddVars(d, read);
    if (v.sym)
      for (const ir::Sym& e : *v.sym) AddVars(e, read);
  }
  return read;
}

// True when `node` sets a run-time dim (ir::RuntimeDimsSetBy: NonZero's count) that a guard
// or another value reads. Such a node stays even when
// nothing reads its data, since a shape may read its count (Shape or Size of its output,
// folded to the dim itself); one whose count nothing reads (the branch a run-time If takes,
// once the profile's ranges decide the guard that read it) goes.
bool SetsReadRuntimeDim(const ir::Trace& trace, const ir::Node& node) {
  const std::vector<std::string> made = ir::RuntimeDimsSetBy(trace, node);
  if (made.empty()) return false;
  const std::unordered_set<std::string> read = ReadElsewhere(trace, node);
  for (const std::string& v : made)
    if (read.count(v)) return true;
  return false;
}

}  // namespace

void EliminateDeadCode(ir::Trace& trace) {
  std::unordered_set<ir::ValueId> live(trace.outputs.begin(), trace.outputs.end());
  std::vector<ir::Node> kept;
  for (auto it = trace.body.nodes.rbegin(); it != trace.body.nodes.rend(); ++it) {
    bool used = SetsReadRuntimeDim(trace, *it);
    for (ir::ValueId id : it->outputs) used = used || (id != ir::kNoValue && live.count(id));
    if (!used) continue;
    // Outputs nobody reads become absent, so the plan gives them no memory... except that
    // kernels may still need somewhere to write; keep them.
    for (ir::ValueId id : it->inputs)
      if (id != ir::kNoValue) live.insert(id);
    for (const ir::Predicate& p : it->when) live.insert(p.cond);
    kept.push_back(std::move(*it));
  }
  trace.body.nodes.assign(std::make_move_iterator(kept.rbegin()), std::make_move_iterator(kept.rend()));
  Compact(trace);
  // The run-time dims of removed nodes, which no value has any more.
  const std::unordered_set<std::string> read = ReadElsewhere(trace, ir::Node{});
  std::erase_if(trace.runtime_dims, [&](const ir::RuntimeDim& d) { return !read.count(d.symbol); });
}

Result<CanonicalizeResult> Canonicalize(const ir::Trace& imported, const std::vector<Assumption>& assumptions,
                                        const CanonicalizeOptions& options) {
  CanonicalizeResult result;
  ir::Trace& trace = result.trace;
  trace = imported;
  trace.stage = "canonical";
  trace.provenance =
      "shape inference, constant and shape folding, If resolution, BatchNormalization folded into Conv, "
      "dead-code elimination";
  trace.body = ir::Block{};
  Canonicalizer canon(trace, assumptions, options);
  KILN_RETURN_IF_ERROR(canon.Run(imported.body, trace.body.nodes));
  if (canon.undecided()) {
    result.undecided_condition = canon.undecided();
    return result;
  }
  for (ir::ValueId& id : trace.outputs) {
    id = canon.Map(id);
    KILN_RETURN_IF_ERROR(canon.Usable(id, "model output '" + trace.value(id).name + "'"));
  }
  KeepOutputNames(imported, trace);
  // The meta functions appended their guards to trace.guards while inferring; add the
  // If assumptions and output-extent checks, and drop repeats.
  std::vector<ir::Guard> guards = canon.TakeGuards(std::move(trace.guards));
  trace.guards.clear();
  for (ir::Guard& g : guards) {
    if (g.condition.is_const() && *g.condition.value() != 0) continue;
    if (g.condition.is_const())
      return InvalidArgument("the model's shapes contradict each other: " + g.origin +
                             " needs a condition that can never hold");
    bool seen = false;
    for (const ir::Guard& k : trace.guards) seen = seen || k.condition.Same(g.condition);
    if (!seen) trace.guards.push_back(std::move(g));
  }
  FoldBatchNormIntoConv(trace);
  EliminateDeadCode(trace);
  return result;
}

}  // namespace kiln::passes
