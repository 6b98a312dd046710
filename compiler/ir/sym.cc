#include "compiler/ir/sym.h"

#include <algorithm>
#include <set>

#include "runtime/shape_text.h"

namespace kiln::ir {
namespace {

std::optional<int64_t> Apply(SymOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case SymOp::kAdd: if (__builtin_add_overflow(a, b, &r)) return std::nullopt; return r;
    case SymOp::kSub: if (__builtin_sub_overflow(a, b, &r)) return std::nullopt; return r;
    case SymOp::kMul: if (__builtin_mul_overflow(a, b, &r)) return std::nullopt; return r;
    case SymOp::kFloorDiv: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    }
    case SymOp::kCeilDiv: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
      return q;
    }
    case SymOp::kMod: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return m;
    }
    case SymOp::kMax: return std::max(a, b);
    case SymOp::kMin: return std::min(a, b);
    case SymOp::kEq: return a == b ? 1 : 0;
    case SymOp::kLt: return a < b ? 1 : 0;
    default: return std::nullopt;
  }
}

const char* OpText(SymOp op) {
  switch (op) {
    case SymOp::kAdd: return "+";
    case SymOp::kSub: return "-";
    case SymOp::kMul: return "*";
    case SymOp::kFloorDiv: return " floordiv ";
    case SymOp::kCeilDiv: return " ceildiv ";
    case SymOp::kMod: return " mod ";
    case SymOp::kMax: return "max";
    case SymOp::kMin: return "min";
    case SymOp::kEq: return " == ";
    case SymOp::kLt: return " < ";
    default: return "?";
  }
}

}  // namespace

Sym::Sym(int64_t v) : node_(std::make_shared<Node>(Node{SymOp::kConst, v, {}, nullptr, nullptr})) {}

Sym Sym::Var(std::string name) {
  return Sym(std::make_shared<Node>(Node{SymOp::kVar, 0, std::move(name), nullptr, nullptr}));
}

Sym Sym::ValueVar(std::string name) {
  return Sym(std::make_shared<Node>(Node{SymOp::kVar, 1, std::move(name), nullptr, nullptr}));  // value: the flag
}

Sym Sym::RuntimeVar(std::string name) {
  return Sym(std::make_shared<Node>(Node{SymOp::kVar, 2, std::move(name), nullptr, nullptr}));  // value: the flag
}

Sym Sym::Make(SymOp op, const Sym& a, const Sym& b) {
  if (a.is_const() && b.is_const()) {
    // Folding that would overflow or divide by zero stays symbolic, so the runtime's
    // checked evaluation reports it instead of the compiler inventing a value.
    if (auto r = Apply(op, *a.value(), *b.value())) return Sym(*r);
  }
  auto is = [](const Sym& s, int64_t v) { return s.is_const() && *s.value() == v; };
  switch (op) {
    case SymOp::kAdd:
      if (is(a, 0)) return b;
      if (is(b, 0)) return a;
      // a + (c - a) and (c - a) + a are c (Pad back to a length: count + (N - count)).
      if (b.op() == SymOp::kSub && b.rhs().Same(a)) return b.lhs();
      if (a.op() == SymOp::kSub && a.rhs().Same(b)) return a.lhs();
      break;
    case SymOp::kSub:
      if (is(b, 0)) return a;
      if (a.Same(b)) return Sym(0);
      // (c + b) - b is c, (b + c) - b too.
      if (a.op() == SymOp::kAdd && a.rhs().Same(b)) return a.lhs();
      if (a.op() == SymOp::kAdd && a.lhs().Same(b)) return a.rhs();
      break;
    case SymOp::kMul:
      if (is(a, 1)) return b;
      if (is(b, 1)) return a;
      if (is(a, 0) || is(b, 0)) return Sym(0);
      break;
    case SymOp::kFloorDiv:
    case SymOp::kCeilDiv:
      if (is(b, 1)) return a;
      break;
    case SymOp::kMax:
    case SymOp::kMin:
      if (a.Same(b)) return a;
      break;
    case SymOp::kEq:
      if (a.Same(b)) return Sym(1);
      break;
    default:
      break;
  }
  auto n = std::make_shared<Node>(Node{op, 0, {}, std::make_shared<const Sym>(a), std::make_shared<const Sym>(b)});
  if (__builtin_add_overflow(a.tree_size(), b.tree_size(), &n->size) || __builtin_add_overflow(n->size, 1, &n->size))
    n->size = INT64_MAX;
  return Sym(std::move(n));
}

Sym operator+(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kAdd, a, b); }
Sym operator-(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kSub, a, b); }
Sym operator*(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kMul, a, b); }
Sym FloorDiv(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kFloorDiv, a, b); }
Sym CeilDiv(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kCeilDiv, a, b); }
Sym Mod(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kMod, a, b); }
Sym Max(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kMax, a, b); }
Sym Min(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kMin, a, b); }
Sym Eq(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kEq, a, b); }
Sym Lt(const Sym& a, const Sym& b) { return Sym::Make(SymOp::kLt, a, b); }

std::string Sym::ToString() const {
  switch (op()) {
    case SymOp::kConst: return std::to_string(node_->value);
    case SymOp::kVar: return node_->name;
    case SymOp::kMax:
    case SymOp::kMin:
      return std::string(OpText(op())) + "(" + lhs().ToString() + ", " + rhs().ToString() + ")";
    default:
      return "(" + lhs().ToString() + OpText(op()) + rhs().ToString() + ")";
  }
}

bool Sym::Same(const Sym& other) const {
  if (node_ == other.node_) return true;
  if (op() != other.op()) return false;
  switch (op()) {
    case SymOp::kConst: return node_->value == other.node_->value;
    case SymOp::kVar: return node_->name == other.node_->name;
    default: return lhs().Same(other.lhs()) && rhs().Same(other.rhs());
  }
}

std::vector<std::string> Sym::Vars() const {
  std::set<std::string> out;
  std::vector<const Sym*> stack{this};
  while (!stack.empty()) {
    const Sym* s = stack.back();
    stack.pop_back();
    if (s->op() == SymOp::kVar) out.insert(s->name());
    else if (s->op() != SymOp::kConst) { stack.push_back(&s->lhs()); stack.push_back(&s->rhs()); }
  }
  return {out.begin(), out.end()};
}

std::optional<int64_t> Sym::Eval(const std::vector<std::pair<std::string, int64_t>>& bindings) const {
  switch (op()) {
    case SymOp::kConst: return node_->value;
    case SymOp::kVar:
      for (const auto& [n, v] : bindings)
        if (n == node_->name) return v;
      return std::nullopt;
    default: {
      auto a = lhs().Eval(bindings);
      auto b = rhs().Eval(bindings);
      if (!a || !b) return std::nullopt;
      return Apply(op(), *a, *b);
    }
  }
}

Sym Substitute(const Sym& s, const std::vector<std::pair<std::string, Sym>>& with) {
  switch (s.op()) {
    case SymOp::kConst: return s;
    case SymOp::kVar:
      for (const auto& [name, value] : with)
        if (name == s.name()) return value;
      return s;
    default: break;
  }
  const Sym a = Substitute(s.lhs(), with), b = Substitute(s.rhs(), with);
  switch (s.op()) {
    case SymOp::kAdd: return a + b;
    case SymOp::kSub: return a - b;
    case SymOp::kMul: return a * b;
    case SymOp::kFloorDiv: return FloorDiv(a, b);
    case SymOp::kCeilDiv: return CeilDiv(a, b);
    case SymOp::kMod: return Mod(a, b);
    case SymOp::kMax: return Max(a, b);
    case SymOp::kMin: return Min(a, b);
    case SymOp::kEq: return Eq(a, b);
    default: return Lt(a, b);
  }
}

Sym NumElements(const SymShape& shape) {
  Sym n(1);
  for (const Sym& d : shape) n = n * d;
  return n;
}

std::string ShapeToString(const SymShape& shape) {
  return ShapeText(shape.size(), [&](size_t i) { return shape[i].ToString(); });
}

bool IsStatic(const SymShape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Sym& d) { return d.is_const(); });
}

std::vector<int64_t> StaticDims(const SymShape& shape) {
  std::vector<int64_t> d;
  for (const Sym& s : shape) d.push_back(s.value().value_or(-1));
  return d;
}

}  // namespace kiln::ir
