// The canonical stage of one entry (pipeline.h, passes/canonicalize.h): the profile's trace
// canonicalised under the entry's assumptions, then the guards the profile's ranges decide
// dropped (passes/prune_guards.h).
#include <set>

#include <fmt/format.h>

#include "compiler/passes/prune_guards.h"
#include "compiler/passes/value_inputs.h"
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {
namespace {

// Value symbols decide If outcomes and the shapes of the value shape operands
// (passes/value_inputs.h), whose meta functions are exact for any value. Every meta function
// that reads elements into a shape is one of those; a shape that another op computes from a
// value symbol (rather than passing on its input's) would break that invariant, and is an
// internal error, after which the model compiles without value symbols.
Status CheckShapesFromValues(const ir::Trace& t, const std::map<std::string, std::string>& value_symbols) {
  if (value_symbols.empty()) return Status::Ok();
  for (const ir::Node& n : t.body.nodes) {
    if (passes::HasValueShapeOperand(n.op)) continue;
    std::set<std::string> passed_on;
    for (ir::ValueId id : n.inputs)
      if (id != ir::kNoValue)
        for (const ir::Sym& d : t.value(id).shape)
          for (const std::string& var : d.Vars()) passed_on.insert(var);
    for (ir::ValueId id : n.outputs) {
      if (id == ir::kNoValue) continue;
      for (const ir::Sym& d : t.value(id).shape)
        for (const std::string& var : d.Vars())
          if (auto it = value_symbols.find(var); it != value_symbols.end() && !passed_on.count(var))
            return Internal(fmt::format(
                "node '{}' ({}): output '{}' has shape {}, computed from the values of input '{}', but {} has no "
                "value shape operand (passes/value_inputs.h)",
                n.name, n.op, t.value(id).name, ir::ShapeToString(t.value(id).shape), it->second, n.op));
    }
  }
  return Status::Ok();
}

}  // namespace

Status RunCanonical(StageWork& work, StageOutput& out) {
  EntryWork& e = *work.entry;
  const ProfileWork& p = *work.profile;
  KILN_ASSIGN_OR_RETURN(passes::CanonicalizeResult canonical,
                        passes::Canonicalize(p.trace, e.assumptions, {work.options.loop_scan_bound}));
  if (canonical.undecided_condition) {
    e.undecided = std::move(canonical.undecided_condition);
    return Status::Ok();
  }
  // The profile's ranges decide some guards at compile time; one that no shape in them passes
  // makes the entry useless.
  std::vector<std::string> dropped_guards;
  KILN_RETURN_IF_ERROR(passes::PruneGuards(canonical.trace, p.ranges, &dropped_guards));
  // A dropped guard may have been all that read a run-time dim (which branch a run-time If
  // takes): the instruction that sets it goes too.
  if (!dropped_guards.empty()) passes::EliminateDeadCode(canonical.trace);
  KILN_RETURN_IF_ERROR(CheckShapesFromValues(canonical.trace, p.value_symbols));
  e.trace = std::move(canonical.trace);
  e.ops_before_fusion = e.ops_after_fusion = static_cast<int>(e.trace.body.nodes.size());
  out.print = [&e] { return e.trace.Print(); };
  out.notes = dropped_guards;
  out.ops = e.ops_before_fusion;
  if (!dropped_guards.empty())
    out.log.push_back(fmt::format("entry '{}': {} guards implied by the symbol ranges, dropped", e.record.name,
                                  dropped_guards.size()));
  return Status::Ok();
}

}  // namespace kiln::compiler
