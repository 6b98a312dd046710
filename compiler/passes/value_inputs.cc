#include "compiler/passes/value_inputs.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_map>

namespace kiln::passes {
namespace {

// Every node of `block` and of the blocks nested in its nodes.
void Collect(const ir::Block& block, std::vector<const ir::Node*>& nodes) {
  for (const ir::Node& n : block.nodes) {
    nodes.push_back(&n);
    for (const auto& [name, sub] : n.blocks)
      if (sub) Collect(*sub, nodes);
  }
}

// An identifier made of `name`: other characters become '_', a leading digit gets a '_'.
std::string Identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
  return out;
}

}  // namespace

std::vector<std::string> MarkValueInputs(ir::Trace& trace) {
  std::vector<const ir::Node*> nodes;
  Collect(trace.body, nodes);
  std::unordered_map<ir::ValueId, const ir::Node*> producer;
  for (const ir::Node* n : nodes)
    for (ir::ValueId o : n->outputs)
      if (o != ir::kNoValue) producer[o] = n;

  // Back from the If conditions, through the ops whose outputs depend on their inputs' values.
  std::vector<ir::ValueId> work;
  for (const ir::Node* n : nodes)
    if (n->op == "If" && !n->inputs.empty()) work.push_back(n->inputs[0]);
  std::set<ir::ValueId> seen;
  while (!work.empty()) {
    const ir::ValueId id = work.back();
    work.pop_back();
    if (id == ir::kNoValue || !seen.insert(id).second) continue;
    auto p = producer.find(id);
    if (p == producer.end()) continue;
    const ir::Node& n = *p->second;
    if (n.op == "Shape" || n.op == "Size") continue;
    for (ir::ValueId in : n.inputs) work.push_back(in);
    if (n.op == "If")  // a branch's output is its value
      for (const auto& [name, sub] : n.blocks)
        if (sub)
          for (ir::ValueId o : sub->outputs) work.push_back(o);
  }

  // Symbol names must not collide with the dims' (or another value input's).
  std::set<std::string> names;
  for (ir::ValueId id : trace.inputs)
    for (const ir::Sym& d : trace.value(id).shape)
      for (const std::string& v : d.Vars()) names.insert(v);
  std::vector<std::string> marked;
  for (ir::ValueId id : trace.inputs) {
    ir::Value& v = trace.value(id);
    if (!seen.count(id) || v.sym || v.is_const()) continue;
    if (v.dtype != DType::kInt32 && v.dtype != DType::kInt64 && v.dtype != DType::kBool) continue;
    if (!std::all_of(v.shape.begin(), v.shape.end(), [](const ir::Sym& d) { return d.is_const(); })) continue;
    int64_t elements = 1;  // stops growing past the limit, so it cannot overflow
    for (const ir::Sym& d : v.shape) elements = std::min(elements * std::min(*d.value(), kMaxValueElements + 1),
                                                         kMaxValueElements + 1);
    if (elements < 1 || elements > kMaxValueElements) continue;
    std::string base = Identifier(v.name);
    while (names.count(base) || names.count(base + "_0")) base += "_value";
    std::vector<ir::Sym> elems;
    for (int64_t e = 0; e < elements; ++e) {
      const std::string name = v.shape.empty() ? base : base + "_" + std::to_string(e);
      names.insert(name);
      elems.push_back(ir::Sym::Var(name));
      marked.push_back(name + " (input '" + v.name + "' element " + std::to_string(e) + ")");
    }
    v.sym = std::move(elems);
  }
  return marked;
}

}  // namespace kiln::passes
