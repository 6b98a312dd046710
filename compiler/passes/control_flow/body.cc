// A Loop's or Scan's body run once, as unrolling does for each iteration and a run-time loop
// does once (canonicalizer.h): its parameters bound to values of the enclosing trace (each of
// the dtype the body declares), its nodes processed with fresh values per iteration ("h@3",
// "h@3.1" in a nested body).
#include "compiler/passes/canonicalizer.h"

namespace kiln::passes {

const ir::Block* Canonicalizer::Body(const ir::Node& node) {
  for (const auto& [name, block] : node.blocks)
    if (name == "body") return block.get();
  return nullptr;
}

Status Canonicalizer::BindParameter(const ir::Node& node, ir::ValueId param, ir::ValueId to) {
  const ir::Value &declared = trace_.value(param), &given = trace_.value(to);
  if (declared.dtype != DType::kUndefined && given.dtype != DType::kUndefined && declared.dtype != given.dtype)
    return InvalidArgument("node '" + node.name + "' (" + node.op + "): its body's input '" + declared.name +
                           "' is declared " + std::string(DTypeName(declared.dtype)) + ", and the " + node.op +
                           " gives it " + std::string(DTypeName(given.dtype)));
  SetMap(param, to);
  return Status::Ok();
}

Result<std::vector<ir::ValueId>> Canonicalizer::Iterate(const ir::Node& node, const ir::Block& body,
                                                        const std::vector<ir::ValueId>& params, int64_t i,
                                                        std::vector<ir::Node>& out) {
  if (i >= kMaxUnrolledIterations)
    return ResourceExhausted("node '" + node.name + "' (" + node.op + "): more than " +
                             std::to_string(kMaxUnrolledIterations) + " iterations to unroll");
  for (size_t k = 0; k < params.size(); ++k) KILN_RETURN_IF_ERROR(BindParameter(node, body.inputs[k], params[k]));
  const std::string outer = iteration_;
  iteration_ = (outer.empty() ? "" : outer + ".") + std::to_string(i);
  Status st = Run(body, out);
  iteration_ = outer;
  KILN_RETURN_IF_ERROR(st);
  std::vector<ir::ValueId> results;
  for (ir::ValueId id : body.outputs) results.push_back(Map(id));
  return results;
}

}  // namespace kiln::passes
