#include "compiler/trace/import_traced.h"

#include <fmt/format.h>

#include "compiler/ops/registry.h"

namespace kiln::trace {

Result<ir::Trace> ImportTraced(const ir::Trace& recorded,
                               const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  ir::Trace t = recorded;
  t.guards.clear();
  if (input_shapes.empty()) return t;
  for (const auto& [name, dims] : input_shapes) {
    ir::Value* input = nullptr;
    std::string names;
    for (ir::ValueId id : t.inputs) {
      if (t.value(id).name == name) input = &t.value(id);
      names += (names.empty() ? "'" : ", '") + t.value(id).name + "'";
    }
    if (!input) return InvalidArgument(fmt::format("input shapes name '{}', which is not an input (inputs: {})", name, names));
    if (dims.size() != input->shape.size())
      return InvalidArgument(fmt::format("input '{}': {} dims given, the input has rank {} ({})", name, dims.size(),
                                         input->shape.size(), ir::ShapeToString(input->shape)));
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] < 0) continue;
      if (input->shape[d].is_const() && *input->shape[d].value() != dims[d])
        return InvalidArgument(fmt::format("input '{}' dim {}: declared {}, fixed to {}", name, d,
                                           input->shape[d].ToString(), dims[d]));
      input->shape[d] = ir::Sym(dims[d]);
    }
  }
  for (ir::Node& n : t.body.nodes) KILN_RETURN_IF_ERROR(ir::InferNode(t, n));
  t.guards.clear();
  return t;
}

}  // namespace kiln::trace
