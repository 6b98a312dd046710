#include "compiler/passes/prune_guards.h"

#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace kiln::passes {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();  // an unbounded upper end

// Every value a Sym takes over the ranges lies in [lo, hi]; hi == kInf: no upper bound.
struct Interval {
  int64_t lo = 0, hi = 0;
};

std::optional<int64_t> Add(int64_t a, int64_t b) {
  if (a == kInf || b == kInf) return kInf;
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || r == kInf) return std::nullopt;
  return r;
}

std::optional<int64_t> Mul(int64_t a, int64_t b) {  // a, b >= 0
  if (a == 0 || b == 0) return 0;
  if (a == kInf || b == kInf) return kInf;
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r == kInf) return std::nullopt;
  return r;
}

int64_t FloorDivide(int64_t a, int64_t b) {  // b > 0
  int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

// nullopt: no bound known (subtraction of an unbounded value, a negative factor, division by a
// symbol, or overflow).
// `derived`: each derived symbol's bounds, computed once (a chain of them may read each twice).
std::optional<Interval> Bounds(const ir::Sym& s, const std::map<std::string, compiler::DimRange>& ranges,
                               std::map<std::string, std::optional<Interval>>& derived) {
  using ir::SymOp;
  switch (s.op()) {
    case SymOp::kConst: return Interval{*s.value(), *s.value()};
    case SymOp::kVar: {
      if (s.is_derived()) {
        if (auto it = derived.find(s.name()); it != derived.end()) return it->second;
        return derived[s.name()] = Bounds(s.definition(), ranges, derived);
      }
      auto it = ranges.find(s.name());
      if (it != ranges.end()) return Interval{it->second.min, it->second.max == kInf ? kInf : it->second.max};
      // Without a range: a dim is >= its lo() (1, or 0 where it may be empty), a run-time dim
      // >= 0, a value symbol any int64.
      if (s.is_value_var()) return std::nullopt;
      return Interval{s.lo(), kInf};
    }
    default: break;
  }
  const auto a = Bounds(s.lhs(), ranges, derived), b = Bounds(s.rhs(), ranges, derived);
  if (!a || !b) return std::nullopt;
  switch (s.op()) {
    case SymOp::kAdd: {
      auto lo = Add(a->lo, b->lo), hi = Add(a->hi, b->hi);
      if (!lo || !hi || *lo == kInf) return std::nullopt;
      return Interval{*lo, *hi};
    }
    case SymOp::kSub: {
      if (b->hi == kInf || b->lo == std::numeric_limits<int64_t>::min()) return std::nullopt;
      auto lo = Add(a->lo, -b->hi), hi = a->hi == kInf ? std::optional<int64_t>(kInf) : Add(a->hi, -b->lo);
      if (!lo || !hi) return std::nullopt;
      return Interval{*lo, *hi};
    }
    case SymOp::kMul: {
      if (a->lo < 0 || b->lo < 0) return std::nullopt;
      auto lo = Mul(a->lo, b->lo), hi = Mul(a->hi, b->hi);
      if (!lo || !hi || *lo == kInf) return std::nullopt;
      return Interval{*lo, *hi};
    }
    case SymOp::kFloorDiv:
    case SymOp::kCeilDiv: {
      // Monotone in the dividend for a positive constant divisor.
      if (b->lo != b->hi || b->lo <= 0) return std::nullopt;
      const int64_t c = b->lo;
      auto div = [&](int64_t v) {
        if (v == kInf) return kInf;
        return s.op() == SymOp::kFloorDiv ? FloorDivide(v, c) : -FloorDivide(-v, c);
      };
      if (a->lo == std::numeric_limits<int64_t>::min()) return std::nullopt;
      return Interval{div(a->lo), div(a->hi)};
    }
    case SymOp::kMax: return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    case SymOp::kMin: return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
    case SymOp::kLt:
      if (a->hi != kInf && a->hi < b->lo) return Interval{1, 1};
      if (b->hi != kInf && a->lo >= b->hi) return Interval{0, 0};
      return Interval{0, 1};
    case SymOp::kEq:
      if (a->lo == a->hi && b->lo == b->hi && a->lo == b->lo) return Interval{1, 1};
      if ((a->hi != kInf && a->hi < b->lo) || (b->hi != kInf && b->hi < a->lo)) return Interval{0, 0};
      return Interval{0, 1};
    default: return std::nullopt;
  }
}

enum class Verdict { kAlways, kNever, kSometimes, kUnknown };

// Evaluates `c` at every binding of its symbols when they are bounded and few.
Verdict Enumerate(const ir::Sym& c, const std::map<std::string, compiler::DimRange>& ranges) {
  const std::vector<std::string> vars = c.Vars();
  std::vector<compiler::DimRange> rs;
  int64_t total = 1;
  for (const std::string& v : vars) {
    auto it = ranges.find(v);
    if (it == ranges.end() || it->second.max == kInf) return Verdict::kUnknown;
    rs.push_back(it->second);
    total *= (it->second.max - it->second.min) / it->second.divisor + 1;
    if (total > kMaxEnumerated) return Verdict::kUnknown;
  }
  std::vector<std::pair<std::string, int64_t>> binding;
  for (size_t i = 0; i < vars.size(); ++i) binding.emplace_back(vars[i], rs[i].min);
  bool some_true = false, some_false = false;
  for (;;) {
    const std::optional<int64_t> v = c.Eval(binding);
    if (!v) return Verdict::kUnknown;  // overflow or division by zero at some binding: keep it checked
    (*v != 0 ? some_true : some_false) = true;
    size_t i = 0;  // next binding, odometer-style
    for (; i < vars.size(); ++i) {
      binding[i].second += rs[i].divisor;
      if (binding[i].second <= rs[i].max) break;
      binding[i].second = rs[i].min;
    }
    if (i == vars.size()) break;
  }
  return some_true && some_false ? Verdict::kSometimes : some_true ? Verdict::kAlways : Verdict::kNever;
}

Verdict Decide(const ir::Sym& c, const std::map<std::string, compiler::DimRange>& ranges) {
  std::map<std::string, std::optional<Interval>> derived;
  if (auto b = Bounds(c, ranges, derived)) {
    if (b->lo >= 1 || (b->hi != kInf && b->hi <= -1)) return Verdict::kAlways;
    if (b->lo == 0 && b->hi == 0) return Verdict::kNever;
  }
  return Enumerate(c, ranges);
}

// The variables' ranges, e.g. "N in 1..64, k any int64"; a run-time dim's or value symbol's
// name has the kind of its Sym in `c`.
void VarKinds(const ir::Sym& c, std::map<std::string, const char*>& kinds) {
  if (c.op() == ir::SymOp::kConst) return;
  if (c.is_derived()) {
    if (kinds.emplace(c.name(), nullptr).second) VarKinds(c.definition(), kinds);  // once: marked by a null kind
    return;
  }
  if (c.op() == ir::SymOp::kVar) {
    kinds[c.name()] = c.is_value_var() ? " any int64" : c.lo() == 0 ? " >= 0" : " >= 1";
    return;
  }
  VarKinds(c.lhs(), kinds);
  VarKinds(c.rhs(), kinds);
}

std::string RangesText(const ir::Sym& c, const std::map<std::string, compiler::DimRange>& ranges) {
  std::map<std::string, const char*> kinds;
  VarKinds(c, kinds);
  std::string s;
  for (const auto& [v, kind] : kinds) {
    if (!kind) continue;  // a derived symbol: its definition's symbols are listed
    auto it = ranges.find(v);
    s += (s.empty() ? "" : ", ") + (it == ranges.end() ? v + kind : it->second.Describe(v));
  }
  return s;
}

}  // namespace

Status PruneGuards(ir::Trace& trace, const std::map<std::string, compiler::DimRange>& ranges,
                   std::vector<std::string>* log) {
  std::vector<ir::Guard> kept;
  for (ir::Guard& g : trace.guards) {
    switch (Decide(g.condition, ranges)) {
      case Verdict::kAlways:
        if (log) log->push_back(fmt::format("guard {} holds for every {}: dropped", g.condition.ToString(),
                                            RangesText(g.condition, ranges)));
        break;
      case Verdict::kNever:
        if (g.condition.is_const())  // decided when it was built, from the ranges of its symbols' kinds
          return InvalidArgument(fmt::format("no input shape can run this entry: {} needs a condition that fails for "
                                             "every input shape (a dim's symbol is >= 1, a run-time dim >= 0)",
                                             g.origin));
        return InvalidArgument(fmt::format("no input shape in the ranges can run this entry: {} needs {}, which fails "
                                           "for every {}",
                                           g.origin, g.condition.ToString(), RangesText(g.condition, ranges)));
      default: kept.push_back(std::move(g)); break;
    }
  }
  trace.guards = std::move(kept);
  return Status::Ok();
}

}  // namespace kiln::passes
