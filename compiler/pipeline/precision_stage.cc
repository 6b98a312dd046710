// The precision stage of one entry (pipeline.h, passes/precision.h): the canonical trace
// lowered to fp16 or bf16 before fusion, so that its Casts fuse; and the check of its
// --keep-fp32 names against the model.
#include <fmt/format.h>

#include "compiler/passes/precision.h"
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {
namespace {

// Whether a node of `block` (If branches included) has node name or op type `name`.
bool HasNodeOrOp(const ir::Block& block, const std::string& name) {
  for (const ir::Node& n : block.nodes) {
    if (n.name == name || n.op == name) return true;
    for (const auto& [attr, sub] : n.blocks)
      if (sub && HasNodeOrOp(*sub, name)) return true;
  }
  return false;
}

// The precision options of one entry: the --keep-fp32 names its canonical trace still has. A
// node the canonical stage folded away, or one in the other branch of a shape-dependent If,
// leaves nothing to keep there.
passes::PrecisionOptions EntryPrecision(const passes::PrecisionOptions& options, const ir::Trace& canonical) {
  passes::PrecisionOptions entry = options;
  std::erase_if(entry.keep_fp32, [&](const std::string& k) { return !HasNodeOrOp(canonical.body, k); });
  return entry;
}

}  // namespace

Status CheckKeepFp32(const ir::Trace& model, const std::vector<std::string>& names) {
  for (const std::string& k : names)
    if (!HasNodeOrOp(model.body, k))
      return InvalidArgument(fmt::format("--keep-fp32 '{}': no node and no op type of that name in the model "
                                         "(names are ONNX node names or op types such as Softmax)",
                                         k));
  return Status::Ok();
}

Status RunPrecision(StageWork& work, StageOutput& out) {
  EntryWork& e = *work.entry;
  std::vector<std::string> lines;
  auto lowered = passes::LowerPrecision(e.trace, EntryPrecision(work.options.precision, e.trace), &lines);
  // Not an error an entry's assumption causes: the driver never drops an entry for it.
  if (!lowered.ok()) return lowered.status().WithContext(fmt::format("entry '{}'", e.record.name));
  e.trace = std::move(*lowered);
  e.ops_before_fusion = e.ops_after_fusion = static_cast<int>(e.trace.body.nodes.size());
  out.print = [&e] { return e.trace.Print(); };
  for (const std::string& line : lines)
    out.log.push_back(fmt::format("entry '{}': precision: {}", e.record.name, line));
  out.notes = std::move(lines);
  out.ops = e.ops_before_fusion;
  return Status::Ok();
}

}  // namespace kiln::compiler
