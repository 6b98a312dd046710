// The plan stage of one entry (pipeline.h, passes/memory_plan.h): the memory plan, printed as
// the final instruction list with the arena's size and each arena tensor's slot and lifetime.
#include <fmt/format.h>

#include "compiler/passes/memory_plan.h"
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {
namespace {

// The arena size for the compile log: a number, or which symbols it depends on (the full
// expression is in the plan trace and `kiln inspect`).
std::string ArenaText(const ir::Sym& bytes) {
  if (bytes.is_const()) return std::to_string(*bytes.value()) + " bytes";
  std::string vars;
  for (const std::string& v : bytes.Vars()) vars += (vars.empty() ? "" : ", ") + v;
  return "symbolic in " + vars + ", evaluated per input shape";
}

std::string PlanText(const passes::MemoryPlan& plan) {
  std::string s = plan.trace.Print();
  // Symbolic offsets are sums of slot sizes and print as long expressions: name the slot
  // instead, and leave the full arithmetic to the expression table.
  s += "# arena: " + ArenaText(plan.arena_bytes);
  if (plan.lower_bound_bytes) s += fmt::format(" (lower bound {} bytes)", *plan.lower_bound_bytes);
  s += "\n";
  for (size_t id = 0; id < plan.tensors.size(); ++id) {
    const passes::TensorPlan& p = plan.tensors[id];
    if (p.storage != passes::StorageKind::kArena) continue;
    const std::string where = p.slot >= 0 ? fmt::format("slot {}", p.slot) : "offset " + p.offset.ToString();
    s += fmt::format("#   {} @ {}: {} bytes, live [{}, {}]\n", plan.trace.values[id].name, where, p.bytes.ToString(),
                     p.first, p.last);
  }
  return s;
}

}  // namespace

Status RunPlan(StageWork& work, StageOutput& out) {
  EntryWork& e = *work.entry;
  KILN_ASSIGN_OR_RETURN(passes::MemoryPlan plan, passes::PlanMemory(e.trace));
  out.ops = static_cast<int>(plan.trace.body.nodes.size());
  e.arena_text = ArenaText(plan.arena_bytes);
  e.record.plan = std::move(plan);
  out.print = [&e] { return PlanText(e.record.plan); };
  return Status::Ok();
}

}  // namespace kiln::compiler
