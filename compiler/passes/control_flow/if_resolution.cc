// An If resolved at compile time (canonicalizer.h): a condition that is a constant, or a
// symbolic one an assumption of this entry decides, inlines the branch it takes (the assumption
// becomes a prologue guard of the entry). A condition on symbols no assumption covers stops
// the walk with undecided() set, and the driver compiles one entry for each outcome. A
// condition on tensor data runs both branches under predicates (control_flow/runtime_if.cc).
#include "compiler/passes/canonicalizer.h"

namespace kiln::passes {

Status Canonicalizer::InlineIf(const ir::Node& node, std::vector<ir::Node>& out) {
  if (node.inputs.empty() || node.inputs[0] == ir::kNoValue)
    return InvalidArgument("node '" + node.name + "' (If): missing condition input");
  if (node.inputs.size() != 1 || node.outputs.empty())
    return InvalidArgument("node '" + node.name + "' (If): expected 1 input (cond) and at least 1 output, found " +
                           std::to_string(node.inputs.size()) + " and " + std::to_string(node.outputs.size()));
  const ir::Value& cond = trace_.value(node.inputs[0]);
  std::optional<bool> taken;
  if (cond.is_const() && cond.data->num_elements() >= 1) {
    taken = cond.data->IntAt(0) != 0;
  } else if (cond.sym && !cond.sym->empty()) {
    const ir::Sym& c = (*cond.sym)[0];
    if (c.is_const()) taken = *c.value() != 0;
    for (const Assumption& a : assumptions_)
      if (!taken && a.condition.Same(c)) {
        taken = a.holds;
        entry_guards_.push_back({a.holds ? c : ir::Eq(c, 0),
                           "node '" + node.name + "' (If), whose " + (a.holds ? "then" : "else") +
                               " branch this entry was compiled for"});
      }
    if (!taken) {
      undecided_ = c;
      return Status::Ok();
    }
  } else {
    return RuntimeIf(node, out);
  }
  const char* branch = *taken ? "then_branch" : "else_branch";
  const ir::Block* chosen = nullptr;
  for (const auto& [name, block] : node.blocks)
    if (name == branch) chosen = block.get();
  if (!chosen) return InvalidArgument("node '" + node.name + "' (If): no " + branch);
  if (chosen->outputs.size() != node.outputs.size())
    return InvalidArgument("node '" + node.name + "' (If): " + branch + " has " +
                           std::to_string(chosen->outputs.size()) + " outputs, the node " +
                           std::to_string(node.outputs.size()));
  KILN_RETURN_IF_ERROR(Run(*chosen, out));
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (node.outputs[i] != ir::kNoValue) SetMap(node.outputs[i], Map(chosen->outputs[i]));
  return Status::Ok();
}

}  // namespace kiln::passes
