// The import stage of one profile (pipeline.h): the model with the profile's fixed dims (the
// frontend imports it again; fixed dims become constants, so every stage sees static shapes
// there) and fixed values bound (passes::BindInputValues), and the symbols' ranges its entries
// share. A symbol whose range admits 0 gets the lower bound 0 (Sym::Var's lo) in every shape and
// shape value of the trace, so every stage treats its dims as ones that may be empty.
#include <limits>

#include "compiler/passes/value_inputs.h"
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {

Status RunImport(StageWork& work, StageOutput& out) {
  ProfileWork& p = *work.profile;
  const ResolvedProfile& profile = *p.profile;
  if (profile.input_shapes.empty()) {
    p.trace = *p.model;
    out.shared_ns = p.model_ns;  // the one import of the model that these profiles share
  } else {
    std::map<std::string, std::vector<int64_t>> shapes = work.options.input_shapes;
    for (const auto& [name, dims] : profile.input_shapes) {
      auto [it, added] = shapes.emplace(name, dims);
      if (!added)
        for (size_t d = 0; d < dims.size(); ++d)
          if (dims[d] >= 0) it->second[d] = dims[d];
    }
    KILN_ASSIGN_OR_RETURN(p.trace, work.import(shapes));
  }
  KILN_RETURN_IF_ERROR(passes::BindInputValues(p.trace, profile.values));
  if (!profile.input_shapes.empty() && p.value_inputs) passes::MarkValueInputs(p.trace);
  p.ranges = profile.ranges;
  // A symbol whose range admits 0 is a dim that may be empty in every stage (Sym::Var's lo).
  std::vector<std::pair<std::string, ir::Sym>> may_be_empty;
  for (const auto& [sym, range] : profile.ranges)
    if (range.min == 0) may_be_empty.emplace_back(sym, ir::Sym::Var(sym, 0));
  if (!may_be_empty.empty())
    for (ir::Value& v : p.trace.values) {
      for (ir::Sym& d : v.shape) d = ir::Substitute(d, may_be_empty);
      if (v.sym)
        for (ir::Sym& e : *v.sym) e = ir::Substitute(e, may_be_empty);
    }
  for (ir::ValueId id : p.trace.inputs)
    if (const ir::Value& v = p.trace.value(id); v.sym)
      for (const ir::Sym& s : *v.sym)
        if (s.op() == ir::SymOp::kVar) {
          p.ranges.emplace(s.name(),
                           DimRange{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 1});
          p.value_symbols.emplace(s.name(), v.name);
        }
  out.print = [&p] { return p.trace.Print(); };
  out.ops = static_cast<int>(p.trace.body.nodes.size());
  return Status::Ok();
}

}  // namespace kiln::compiler
