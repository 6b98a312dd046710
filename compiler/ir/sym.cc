#include "compiler/ir/sym.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
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
    case SymOp::kFloorMulF32: {  // b's low 32 bits, as the runtime reads them (runtime/expr_eval.h)
      const double f = std::bit_cast<float>(static_cast<uint32_t>(b));
      const double p = std::floor(static_cast<double>(a) * f);
      if (!(p >= -9223372036854775808.0 && p < 9223372036854775808.0)) return std::nullopt;  // NaN, inf, > int64
      return static_cast<int64_t>(p);
    }
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

// Range arithmetic: INT64_MIN and INT64_MAX are -inf and +inf, and any bound that would
// overflow becomes the infinity on its side, so a range only ever widens.
constexpr int64_t kNegInf = INT64_MIN, kPosInf = INT64_MAX;
struct Range {
  int64_t lo = kNegInf, hi = kPosInf;
};

int64_t AddLo(int64_t a, int64_t b) {
  int64_t r;
  return a == kNegInf || b == kNegInf || __builtin_add_overflow(a, b, &r) ? kNegInf : r;
}
int64_t AddHi(int64_t a, int64_t b) {
  int64_t r;
  return a == kPosInf || b == kPosInf || __builtin_add_overflow(a, b, &r) ? kPosInf : r;
}
// a - b for a lower bound (b an upper one) and for an upper bound (b a lower one).
int64_t SubLo(int64_t a, int64_t b) {
  int64_t r;
  return a == kNegInf || b == kPosInf || __builtin_sub_overflow(a, b, &r) ? kNegInf : r;
}
int64_t SubHi(int64_t a, int64_t b) {
  int64_t r;
  return a == kPosInf || b == kNegInf || __builtin_sub_overflow(a, b, &r) ? kPosInf : r;
}

Range MulRange(Range a, Range b) {
  if (a.lo >= 0 && b.lo >= 0) {  // the common case: dims times dims
    int64_t lo, hi;
    if (__builtin_mul_overflow(a.lo, b.lo, &lo)) lo = 0;
    if (a.hi == kPosInf || b.hi == kPosInf || __builtin_mul_overflow(a.hi, b.hi, &hi)) hi = kPosInf;
    if (a.hi == 0 || b.hi == 0) hi = 0;
    return {lo, hi};
  }
  const int64_t ends[4][2] = {{a.lo, b.lo}, {a.lo, b.hi}, {a.hi, b.lo}, {a.hi, b.hi}};
  Range r{kPosInf, kNegInf};
  for (const auto& e : ends) {
    int64_t p;
    const bool inf = e[0] == kNegInf || e[0] == kPosInf || e[1] == kNegInf || e[1] == kPosInf;
    if (inf || __builtin_mul_overflow(e[0], e[1], &p)) return {};
    r.lo = std::min(r.lo, p);
    r.hi = std::max(r.hi, p);
  }
  return r;
}

// The range of `op` on operands in ranges a and b. The divisor of floordiv, ceildiv and mod is
// positive on every call that evaluates (zero is a run-time error), which the ranges use.
Range OpRange(SymOp op, Range a, Range b) {
  switch (op) {
    case SymOp::kAdd: return {AddLo(a.lo, b.lo), AddHi(a.hi, b.hi)};
    case SymOp::kSub: return {SubLo(a.lo, b.hi), SubHi(a.hi, b.lo)};
    case SymOp::kMul: return MulRange(a, b);
    case SymOp::kFloorDiv:
    case SymOp::kCeilDiv: {
      if (a.lo < 0 || b.lo < 0) return {};
      const bool ceil = op == SymOp::kCeilDiv;
      const int64_t d_lo = std::max<int64_t>(b.lo, 1);
      Range r;
      if (b.hi == kPosInf) r.lo = ceil && a.lo > 0 ? 1 : 0;
      else r.lo = *Apply(op, a.lo, std::max<int64_t>(b.hi, 1));
      r.hi = a.hi == kPosInf ? kPosInf : *Apply(op, a.hi, d_lo);
      return r;
    }
    case SymOp::kMod: {
      if (b.lo < 0) return {};
      Range r{0, b.hi == kPosInf ? kPosInf : std::max<int64_t>(b.hi - 1, 0)};
      if (a.lo >= 0) r.hi = std::min(r.hi, a.hi);
      return r;
    }
    case SymOp::kMax: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    case SymOp::kMin: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    case SymOp::kEq:
    case SymOp::kLt: return {0, 1};
    case SymOp::kFloorMulF32:
      if (a.lo >= 0 && b.lo >= 0 && b.hi <= kF32MaxFinite) return {0, kPosInf};
      return {};
    default: return {};
  }
}

// a >= b by structure, `depth` levels deep at most (the walk is cheap on shared nodes, but a
// tree can be exponential).
bool DominatesAt(const Sym& a, const Sym& b, int depth) {
  if (a.Same(b) || a.lo() >= b.hi()) return true;
  if (depth == 0) return false;
  --depth;
  switch (a.op()) {
    case SymOp::kAdd:  // x + y >= b when x >= b and y >= 0
      if ((a.rhs().lo() >= 0 && DominatesAt(a.lhs(), b, depth)) ||
          (a.lhs().lo() >= 0 && DominatesAt(a.rhs(), b, depth)))
        return true;
      break;
    case SymOp::kSub:  // x - y >= b when x >= b and y <= 0
      if (a.rhs().hi() <= 0 && DominatesAt(a.lhs(), b, depth)) return true;
      break;
    case SymOp::kMul:  // x * y >= b when x >= b, x >= 0 and y >= 1
      if ((a.rhs().lo() >= 1 && a.lhs().lo() >= 0 && DominatesAt(a.lhs(), b, depth)) ||
          (a.lhs().lo() >= 1 && a.rhs().lo() >= 0 && DominatesAt(a.rhs(), b, depth)))
        return true;
      break;
    case SymOp::kMax:
      if (DominatesAt(a.lhs(), b, depth) || DominatesAt(a.rhs(), b, depth)) return true;
      break;
    case SymOp::kMin:
      if (DominatesAt(a.lhs(), b, depth) && DominatesAt(a.rhs(), b, depth)) return true;
      break;
    default: break;
  }
  switch (b.op()) {
    case SymOp::kMin: return DominatesAt(a, b.lhs(), depth) || DominatesAt(a, b.rhs(), depth);
    case SymOp::kMax: return DominatesAt(a, b.lhs(), depth) && DominatesAt(a, b.rhs(), depth);
    case SymOp::kSub:  // a >= x - y when a >= x and y >= 0
      return b.rhs().lo() >= 0 && DominatesAt(a, b.lhs(), depth);
    default: return false;
  }
}

constexpr int kDominatesDepth = 6;

}  // namespace

Sym::Sym(int64_t v) : node_(std::make_shared<Node>(Node{SymOp::kConst, v, {}, nullptr, nullptr, 1, v, v})) {}

Sym Sym::Var(std::string name, int64_t lo) {
  return Sym(std::make_shared<Node>(Node{SymOp::kVar, 0, std::move(name), nullptr, nullptr, 1, lo, kPosInf}));
}

Sym Sym::ValueVar(std::string name) {  // value: the flag
  return Sym(std::make_shared<Node>(
      Node{SymOp::kVar, 1, std::move(name), nullptr, nullptr, 1, kNegInf, kPosInf, true, false}));
}

Sym Sym::RuntimeVar(std::string name) {  // value: the flag
  return Sym(
      std::make_shared<Node>(Node{SymOp::kVar, 2, std::move(name), nullptr, nullptr, 1, 0, kPosInf, false, true}));
}

Sym Sym::Derived(std::string name, const Sym& definition) {  // value: the flag
  return Sym(std::make_shared<Node>(Node{SymOp::kVar, 3, std::move(name), std::make_shared<const Sym>(definition),
                                         nullptr, 1, definition.lo(), definition.hi(), definition.reads_value_var(),
                                         definition.reads_runtime_var()}));
}

bool Sym::Dominates(const Sym& a, const Sym& b) { return DominatesAt(a, b, kDominatesDepth); }

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
      if (Dominates(a, b)) return a;
      if (Dominates(b, a)) return b;
      break;
    case SymOp::kMin:
      if (Dominates(b, a)) return a;
      if (Dominates(a, b)) return b;
      break;
    case SymOp::kEq:
      if (a.Same(b)) return Sym(1);
      if (a.hi() < b.lo() || b.hi() < a.lo()) return Sym(0);
      break;
    case SymOp::kLt:
      if (a.hi() < b.lo()) return Sym(1);
      if (Dominates(a, b)) return Sym(0);
      break;
    case SymOp::kFloorMulF32:
      if (is(b, kF32One)) return a;
      break;
    default:
      break;
  }
  const Range r = OpRange(op, {a.lo(), a.hi()}, {b.lo(), b.hi()});
  if (op == SymOp::kMod && a.lo() >= 0 && a.hi() < b.lo()) return a;        // x mod d, 0 <= x < d
  if (op == SymOp::kFloorDiv && a.lo() >= 0 && a.hi() < b.lo()) return Sym(0);
  if (r.lo == r.hi && r.lo != kNegInf && r.hi != kPosInf) return Sym(r.lo);  // only one value
  auto n = std::make_shared<Node>(Node{op, 0, {}, std::make_shared<const Sym>(a), std::make_shared<const Sym>(b)});
  if (__builtin_add_overflow(a.tree_size(), b.tree_size(), &n->size) || __builtin_add_overflow(n->size, 1, &n->size))
    n->size = INT64_MAX;
  n->lo = r.lo;
  n->hi = r.hi;
  n->reads_value_var = a.reads_value_var() || b.reads_value_var();
  n->reads_runtime_var = a.reads_runtime_var() || b.reads_runtime_var();
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
Sym FloorMulF32(const Sym& a, const Sym& bits) { return Sym::Make(SymOp::kFloorMulF32, a, bits); }

std::string Sym::ToString() const {
  switch (op()) {
    case SymOp::kConst: return std::to_string(node_->value);
    case SymOp::kVar: return node_->name;
    case SymOp::kMax:
    case SymOp::kMin:
      return std::string(OpText(op())) + "(" + lhs().ToString() + ", " + rhs().ToString() + ")";
    case SymOp::kFloorMulF32: return "floor_mul_f32(" + lhs().ToString() + ", " + rhs().ToString() + ")";
    default:
      return "(" + lhs().ToString() + OpText(op()) + rhs().ToString() + ")";
  }
}

bool Sym::Same(const Sym& other) const {
  if (node_ == other.node_) return true;
  // A derived symbol is its definition: a pass that infers a shape again gets the expression.
  if (is_derived() || other.is_derived()) {
    if (is_derived() && other.is_derived() && name() == other.name()) return true;
    return (is_derived() ? definition() : *this).Same(other.is_derived() ? other.definition() : other);
  }
  if (op() != other.op()) return false;
  switch (op()) {
    case SymOp::kConst: return node_->value == other.node_->value;
    case SymOp::kVar: return node_->name == other.node_->name;
    default: return lhs().Same(other.lhs()) && rhs().Same(other.rhs());
  }
}

std::vector<std::string> Sym::Vars() const {
  std::set<std::string> out;
  std::set<const Node*> seen;  // shared nodes once: a chain of derived symbols may read each twice
  std::vector<const Sym*> stack{this};
  while (!stack.empty()) {
    const Sym* s = stack.back();
    stack.pop_back();
    if (!seen.insert(s->node_.get()).second) continue;
    if (s->is_derived()) stack.push_back(&s->definition());
    else if (s->op() == SymOp::kVar) out.insert(s->name());
    else if (s->op() != SymOp::kConst) { stack.push_back(&s->lhs()); stack.push_back(&s->rhs()); }
  }
  return {out.begin(), out.end()};
}

std::optional<int64_t> Sym::Eval(const std::vector<std::pair<std::string, int64_t>>& bindings) const {
  std::vector<std::pair<const Node*, std::optional<int64_t>>> derived;
  return EvalWith(bindings, derived);
}

std::optional<int64_t> Sym::EvalWith(const std::vector<std::pair<std::string, int64_t>>& bindings,
                                     std::vector<std::pair<const Node*, std::optional<int64_t>>>& derived) const {
  switch (op()) {
    case SymOp::kConst: return node_->value;
    case SymOp::kVar: {
      for (const auto& [n, v] : bindings)
        if (n == node_->name) return v;
      if (!is_derived()) return std::nullopt;
      for (const auto& [d, v] : derived)
        if (d == node_.get()) return v;
      const std::optional<int64_t> v = definition().EvalWith(bindings, derived);
      derived.emplace_back(node_.get(), v);
      return v;
    }
    default: {
      auto a = lhs().EvalWith(bindings, derived);
      auto b = rhs().EvalWith(bindings, derived);
      if (!a || !b) return std::nullopt;
      return Apply(op(), *a, *b);
    }
  }
}

namespace {

// Substitute with each derived symbol's result computed once, by name.
Sym SubstituteWith(const Sym& s, const std::vector<std::pair<std::string, Sym>>& with,
                   std::vector<std::pair<std::string, Sym>>& derived) {
  switch (s.op()) {
    case SymOp::kConst: return s;
    case SymOp::kVar: {
      for (const auto& [name, value] : with)
        if (name == s.name()) return value;
      if (!s.is_derived()) return s;
      for (const auto& [name, value] : derived)
        if (name == s.name()) return value;
      Sym out = s;  // kept as the name where nothing it reads changes
      const std::vector<std::string> reads = s.Vars();
      for (const auto& w : with)
        if (std::find(reads.begin(), reads.end(), w.first) != reads.end()) {
          out = SubstituteWith(s.definition(), with, derived);
          break;
        }
      derived.emplace_back(s.name(), out);
      return out;
    }
    default: break;
  }
  const Sym a = SubstituteWith(s.lhs(), with, derived), b = SubstituteWith(s.rhs(), with, derived);
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
    case SymOp::kFloorMulF32: return FloorMulF32(a, b);
    default: return Lt(a, b);
  }
}

}  // namespace

Sym Substitute(const Sym& s, const std::vector<std::pair<std::string, Sym>>& with) {
  std::vector<std::pair<std::string, Sym>> derived;
  return SubstituteWith(s, with, derived);
}

void DerivedSymbols(const Sym& s, std::vector<Sym>& out) {
  switch (s.op()) {
    case SymOp::kConst: return;
    case SymOp::kVar:
      if (!s.is_derived() || std::any_of(out.begin(), out.end(), [&](const Sym& d) { return d.Same(s); })) return;
      DerivedSymbols(s.definition(), out);
      out.push_back(s);
      return;
    default:
      DerivedSymbols(s.lhs(), out);
      DerivedSymbols(s.rhs(), out);
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
