#include "compiler/codegen/cpu/index_simplify.h"

#include <map>
#include <optional>
#include <vector>

namespace kiln::codegen::cpu {
namespace {

using fused::Node;
using fused::Op;
using fused::ScalarType;

// sum of coef * node, plus a constant; int64 arithmetic wraps (as the programs' does).
struct Linear {
  std::map<int32_t, uint64_t> terms;  // node index in the new program -> coefficient
  uint64_t constant = 0;
};

class Simplifier {
 public:
  explicit Simplifier(const fused::Program& p) : p_(p) { q_ = p; q_.nodes.clear(); }

  fused::Program Run() {
    remap_.resize(p_.nodes.size());
    forms_.resize(p_.nodes.size());
    for (size_t k = 0; k < p_.nodes.size(); ++k) {
      Node n = p_.nodes[k];
      for (int32_t* operand : {&n.a, &n.b, &n.c})
        if (*operand >= 0) *operand = remap_[static_cast<size_t>(*operand)];
      const bool linear_op = n.type == ScalarType::kI64 &&
                             (n.op == Op::kAdd || n.op == Op::kSub || n.op == Op::kMul || n.op == Op::kNeg);
      std::optional<Linear> form = linear_op ? Combine(n, k) : std::nullopt;
      if (!form) {
        remap_[k] = Append(n);
        forms_[k] = Atom(remap_[k], n);
        continue;
      }
      Reduce(*form);
      forms_[k] = *form;
      remap_[k] = Build(*form);
    }
    for (fused::Output& o : q_.outputs) o.value = remap_[static_cast<size_t>(o.value)];
    for (fused::Reduction& r : q_.reductions) r.value = remap_[static_cast<size_t>(r.value)];
    return q_;
  }

 private:
  int32_t Append(const Node& n) {
    q_.nodes.push_back(n);
    return static_cast<int32_t>(q_.nodes.size() - 1);
  }
  int32_t Const(uint64_t v) { return Append({Op::kConst, ScalarType::kI64, -1, -1, -1, static_cast<int64_t>(v)}); }

  // The form of a new-program node that is no sum: itself, or its value for a constant.
  Linear Atom(int32_t node, const Node& n) const {
    Linear f;
    if (n.type != ScalarType::kI64) return f;
    if (n.op == Op::kConst) f.constant = static_cast<uint64_t>(n.i);
    else f.terms[node] = 1;
    return f;
  }

  static void AddScaled(Linear& into, const Linear& f, uint64_t scale) {
    into.constant += f.constant * scale;
    for (const auto& [node, coef] : f.terms) into.terms[node] += coef * scale;
  }

  // The form of an add, sub, neg or mul of original node k (operands already in forms_), or
  // nullopt for a product of two non-constants.
  std::optional<Linear> Combine(const Node& n, size_t k) {
    const Node& orig = p_.nodes[k];
    const Linear& x = forms_[static_cast<size_t>(orig.a)];
    Linear f;
    switch (n.op) {
      case Op::kNeg: AddScaled(f, x, ~uint64_t{0}); return f;
      case Op::kAdd: AddScaled(f, x, 1); AddScaled(f, forms_[static_cast<size_t>(orig.b)], 1); return f;
      case Op::kSub: AddScaled(f, x, 1); AddScaled(f, forms_[static_cast<size_t>(orig.b)], ~uint64_t{0}); return f;
      default: {  // kMul
        const Linear& y = forms_[static_cast<size_t>(orig.b)];
        if (y.terms.empty()) AddScaled(f, x, y.constant);
        else if (x.terms.empty()) AddScaled(f, y, x.constant);
        else return std::nullopt;
        return f;
      }
    }
  }

  // The constant divisor of a kFloorDiv or kMod node of the new program, when it has one.
  std::optional<uint64_t> ConstDivisor(const Node& n) const {
    const Node& d = q_.nodes[static_cast<size_t>(n.b)];
    if (d.op != Op::kConst || d.type != ScalarType::kI64 || d.i == 0) return std::nullopt;
    return static_cast<uint64_t>(d.i);
  }

  // Replaces every k*d * floordiv(x, d) + k * mod(x, d) by k * x, until none is left.
  void Reduce(Linear& f) const {
    for (;;) {
      std::erase_if(f.terms, [](const auto& t) { return t.second == 0; });
      int32_t div = -1, mod = -1;
      for (const auto& [m_node, k] : f.terms) {
        const Node& m = q_.nodes[static_cast<size_t>(m_node)];
        const std::optional<uint64_t> d = m.op == Op::kMod && m.type == ScalarType::kI64 ? ConstDivisor(m) : std::nullopt;
        if (!d) continue;
        for (const auto& [q_node, coef] : f.terms) {
          const Node& q = q_.nodes[static_cast<size_t>(q_node)];
          if (q.op == Op::kFloorDiv && q.type == ScalarType::kI64 && q.a == m.a && ConstDivisor(q) == d &&
              coef == k * *d) {
            div = q_node;
            mod = m_node;
            break;
          }
        }
        if (div >= 0) break;
      }
      if (div < 0) return;
      const uint64_t k = f.terms[mod];
      const int32_t x = q_.nodes[static_cast<size_t>(mod)].a;
      f.terms.erase(div);
      f.terms.erase(mod);
      AddScaled(f, FormOf(x), k);
    }
  }

  // The form of a new-program node (an atom unless it was built from a form).
  Linear FormOf(int32_t node) const {
    if (auto it = built_.find(node); it != built_.end()) return it->second;
    return Atom(node, q_.nodes[static_cast<size_t>(node)]);
  }

  int32_t Build(const Linear& f) {
    int32_t sum = -1;
    for (const auto& [node, coef] : f.terms) {
      const int32_t term = coef == 1 ? node : Append({Op::kMul, ScalarType::kI64, node, Const(coef)});
      sum = sum < 0 ? term : Append({Op::kAdd, ScalarType::kI64, sum, term});
    }
    if (sum < 0) sum = Const(f.constant);
    else if (f.constant != 0) sum = Append({Op::kAdd, ScalarType::kI64, sum, Const(f.constant)});
    built_[sum] = f;
    return sum;
  }

  const fused::Program& p_;
  fused::Program q_;
  std::vector<int32_t> remap_;    // original node -> new node
  std::vector<Linear> forms_;     // original node -> its linear form over new nodes
  std::map<int32_t, Linear> built_;  // new node built from a form -> that form
};

}  // namespace

fused::Program SimplifyIndices(const fused::Program& p) { return Simplifier(p).Run(); }

namespace {

// `p` with its last two axes (constant extents H, W) merged: coordinates along them become
// floordiv(J, W) and mod(J, W) of the new last coordinate J.
fused::Program MergeLastTwo(const fused::Program& p) {
  const int rank = static_cast<int>(p.domain.size());
  const int64_t w = p.domain[rank - 1];
  fused::Program q = p;
  q.domain.pop_back();
  q.domain.back() *= w;
  q.nodes.clear();
  // Leading nodes: J and W; then p's nodes, shifted, with the two coordinates rewritten.
  q.nodes.push_back({Op::kCoord, ScalarType::kI64, -1, -1, -1, rank - 2});
  q.nodes.push_back({Op::kConst, ScalarType::kI64, -1, -1, -1, w});
  constexpr int32_t kJ = 0, kW = 1;
  std::vector<int32_t> remap(p.nodes.size());
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    Node n = p.nodes[k];
    for (int32_t* operand : {&n.a, &n.b, &n.c})
      if (*operand >= 0) *operand = remap[static_cast<size_t>(*operand)];
    if (n.op == Op::kCoord && n.i >= rank - 2) n = {n.i == rank - 2 ? Op::kFloorDiv : Op::kMod, ScalarType::kI64, kJ, kW};
    q.nodes.push_back(n);
    remap[k] = static_cast<int32_t>(q.nodes.size() - 1);
  }
  for (fused::Output& o : q.outputs) o.value = remap[static_cast<size_t>(o.value)];
  return q;
}

// Whether a node the outputs depend on divides the last coordinate (a kFloorDiv or kMod of it).
bool DividesLastCoord(const fused::Program& p) {
  const int last = static_cast<int>(p.domain.size()) - 1;
  std::vector<bool> live(p.nodes.size(), false);
  for (const fused::Output& o : p.outputs) live[static_cast<size_t>(o.value)] = true;
  for (size_t k = p.nodes.size(); k-- > 0;) {
    if (!live[k]) continue;
    const Node& n = p.nodes[k];
    if ((n.op == Op::kFloorDiv || n.op == Op::kMod) && p.nodes[static_cast<size_t>(n.a)].op == Op::kCoord &&
        p.nodes[static_cast<size_t>(n.a)].i == last)
      return true;
    for (int32_t operand : {n.a, n.b, n.c})
      if (operand >= 0) live[static_cast<size_t>(operand)] = true;
  }
  return false;
}

}  // namespace

fused::Program SimplifyAndMergeAxes(const fused::Program& p, int64_t min_extent) {
  fused::Program best = SimplifyIndices(p);
  if (p.reduce_axes != 0) return best;
  fused::Program merged = p;
  while (merged.domain.size() >= 2 && merged.domain.back() >= 1 && merged.domain.back() < min_extent &&
         merged.domain[merged.domain.size() - 2] >= 1) {
    merged = MergeLastTwo(merged);
    fused::Program simplified = SimplifyIndices(merged);
    if (DividesLastCoord(simplified)) break;
    best = std::move(simplified);
  }
  return best;
}

}  // namespace kiln::codegen::cpu
