// Interval analysis over a fused program's kI64 nodes, in SSA order (operands come first,
// so one pass suffices). Every rule is sound for wrapping int64 semantics: a result interval
// is computed from the operands' exact bounds and replaced by the full range whenever a
// bound overflows int64 (then the node may wrap and `exact` is false).
#include "compiler/codegen/index_ranges.h"

#include <algorithm>
#include <initializer_list>

namespace kiln::codegen {
namespace {

using fused::Node;
using fused::Op;
using fused::ScalarType;

constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
constexpr IntRange kFull{};

IntRange Union(const IntRange& a, const IntRange& b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

// The range of an integer dtype's values as loaded (bool: 0 or 1); the full range otherwise.
IntRange DTypeRange(DType dt) {
  switch (dt) {
    case DType::kBool: return {0, 1};
    case DType::kInt8: return {-128, 127};
    case DType::kUInt8: return {0, 255};
    case DType::kInt16: return {-32768, 32767};
    case DType::kUInt16: return {0, 65535};
    case DType::kInt32: return {INT32_MIN, INT32_MAX};
    case DType::kUInt32: return {0, 4294967295LL};
    default: return kFull;  // int64, uint64 (held as its bits in a long long)
  }
}

bool Within(const IntRange& a, const IntRange& b) { return b.lo <= a.lo && a.hi <= b.hi; }

// min/max of f over the four corners; false when f overflows at one of them. Sound for
// functions monotone in each argument while the other is fixed (+, -, *, and division by a
// divisor range of one sign).
template <typename F>
bool Corners(const IntRange& a, const IntRange& b, F f, IntRange* out) {
  int64_t lo = kMax, hi = kMin;
  for (int64_t x : {a.lo, a.hi}) {
    for (int64_t y : {b.lo, b.hi}) {
      int64_t r = 0;
      if (!f(x, y, &r)) return false;
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
  }
  *out = {lo, hi};
  return true;
}

// Truncating (floor = false) or flooring division of x by y != 0; false for INT64_MIN / -1.
bool Divide(int64_t x, int64_t y, bool floor, int64_t* r) {
  if (y == -1 && x == kMin) return false;
  int64_t q = x / y;
  if (floor && x % y != 0 && ((x < 0) != (y < 0))) --q;
  *r = q;
  return true;
}

// kDiv / kFloorDiv: x / 0 = 0; each sign part of the divisor separately (monotone there).
// Sets *exact = false when INT64_MIN / -1 may occur (it wraps to INT64_MIN).
IntRange DivRange(const IntRange& x, const IntRange& y, bool floor, bool* exact) {
  bool any = false;
  IntRange r{kMax, kMin};
  auto add = [&](const IntRange& part) {
    IntRange q;
    if (!Corners(x, part, [&](int64_t a, int64_t b, int64_t* o) { return Divide(a, b, floor, o); }, &q)) {
      *exact = false;
      q = kFull;
    }
    r = any ? Union(r, q) : q;
    any = true;
  };
  if (y.lo <= -1) add({y.lo, std::min<int64_t>(y.hi, -1)});
  if (y.hi >= 1) add({std::max<int64_t>(y.lo, 1), y.hi});
  if (y.Contains(0)) r = any ? Union(r, {0, 0}) : IntRange{0, 0};
  return r;
}

// |v| saturated at INT64_MAX.
int64_t Magnitude(int64_t v) { return v == kMin ? kMax : (v < 0 ? -v : v); }

IntRange ModRange(const IntRange& x, const IntRange& y) {  // result has y's sign; x % 0 = 0
  if (x.lo >= 0 && y.lo >= 1) {
    if (x.hi < y.lo) return x;  // x % y = x
    return {0, std::min(x.hi, y.hi - 1)};
  }
  IntRange r{0, 0};
  if (y.hi >= 1) r.hi = y.hi - 1;
  if (y.lo <= -1) r.lo = y.lo + 1;
  return r;
}

IntRange FmodRange(const IntRange& x, const IntRange& y) {  // result has x's sign; x % 0 = 0
  if (x.lo >= 0 && y.lo >= 1 && x.hi < y.lo) return x;
  // |r| < |y|, so |r| <= max |y| - 1 (INT64_MAX when y may be INT64_MIN, whose magnitude
  // 2^63 does not fit).
  const int64_t m = std::max(Magnitude(y.lo), Magnitude(y.hi));
  const int64_t bound = y.lo == kMin ? kMax : (m == 0 ? 0 : m - 1);
  return {std::max(std::min<int64_t>(x.lo, 0), -bound), std::min(std::max<int64_t>(x.hi, 0), bound)};
}

}  // namespace

IntRep RepOf(const IntRange& r) {
  if (r.lo >= 0 && r.hi <= INT32_MAX) return IntRep::kU32;
  if (r.lo >= INT32_MIN && r.hi <= INT32_MAX) return IntRep::kS32;
  return IntRep::kS64;
}

IndexRanges AnalyseRanges(const fused::Program& p, uint32_t nonempty_axes,
                          const std::vector<bool>& sizes_checked, const std::vector<IntRange>& coords) {
  const size_t n = p.nodes.size();
  IndexRanges out;
  out.range.assign(n, kFull);
  out.exact.assign(n, true);
  out.data.assign(n, false);
  out.rep.assign(n, IntRep::kS64);

  // Per size argument: the lowest value it can have where nodes are evaluated.
  std::vector<int64_t> size_lo(static_cast<size_t>(std::max(p.num_sizes, 0)), kMin);
  for (size_t k = 0; k < size_lo.size(); ++k) {
    if (k < sizes_checked.size() && sizes_checked[k]) size_lo[k] = 0;
  }
  for (size_t a = 0; a < p.domain.size(); ++a) {
    const int64_t d = p.domain[a];
    if (d < 0 && ((nonempty_axes >> a) & 1u) && size_lo[-(d + 1)] >= 0) size_lo[-(d + 1)] = 1;
  }
  // The domain's element count when constant (and representable).
  int64_t count = 1;
  bool count_known = true;
  for (int64_t d : p.domain) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) count_known = false;
  }

  for (size_t id = 0; id < n; ++id) {
    const Node& node = p.nodes[id];
    const bool has_a = node.a >= 0, has_b = node.b >= 0, has_c = node.c >= 0;
    bool data = (has_a && out.data[node.a]) || (has_b && out.data[node.b]) || (has_c && out.data[node.c]);
    if (node.op == Op::kLoad || node.op == Op::kAcc) data = true;
    if (node.op == Op::kCheckIndex) data = out.data[node.b];
    out.data[id] = data;
    if (node.type != ScalarType::kI64) continue;

    const IntRange x = has_a ? out.range[node.a] : kFull;
    const IntRange y = has_b ? out.range[node.b] : kFull;
    IntRange r = kFull;
    bool exact = true;
    auto checked = [&](bool ok, IntRange v) {
      if (ok) return v;
      exact = false;
      return kFull;
    };
    switch (node.op) {
      case Op::kConst: r = {node.i, node.i}; break;
      case Op::kCoord: {
        const int64_t d = p.domain[node.i];
        r = d >= 0 ? IntRange{0, std::max<int64_t>(d - 1, 0)} : IntRange{0, kMax - 1};
        if (static_cast<size_t>(node.i) < coords.size()) r = coords[static_cast<size_t>(node.i)];
        break;
      }
      case Op::kLinear:
        r = count_known ? IntRange{0, std::max<int64_t>(count - 1, 0)} : IntRange{0, kMax - 1};
        break;
      case Op::kSize: r = {size_lo[node.i], kMax}; break;
      case Op::kAcc: r = kFull; break;
      case Op::kLoad: r = DTypeRange(p.inputs[node.i].dtype); break;
      case Op::kCast: {
        const DType to = static_cast<DType>(node.i);
        if (p.nodes[node.a].type == ScalarType::kI64) {  // integer casts wrap: x when it fits
          r = Within(x, DTypeRange(to)) ? x : DTypeRange(to);
          if (to == DType::kBool) r = {x.Contains(0) ? 0 : 1, (x.lo == 0 && x.hi == 0) ? 0 : 1};
        } else {
          r = DTypeRange(to);  // float -> integer saturates (uint64: held as its bits)
        }
        break;
      }
      case Op::kNeg:  // -INT64_MIN wraps
        r = x.lo == kMin ? checked(false, kFull) : IntRange{-x.hi, -x.lo};
        break;
      case Op::kAbs:
        if (x.lo >= 0) {
          r = x;
        } else {
          r = x.lo == kMin ? checked(false, kFull) : IntRange{x.hi >= 0 ? 0 : -x.hi, std::max(-x.lo, x.hi)};
        }
        break;
      case Op::kSign: r = {x.lo < 0 ? -1 : (x.lo > 0 ? 1 : 0), x.hi > 0 ? 1 : (x.hi < 0 ? -1 : 0)}; break;
      case Op::kLt:
      case Op::kLe:
      case Op::kEq: {
        r = {0, 1};
        if (p.nodes[node.a].type != ScalarType::kI64) break;  // a float comparison: undecided
        const bool lt = node.op == Op::kLt;
        if (node.op == Op::kEq) {
          if (x.hi < y.lo || y.hi < x.lo) r = {0, 0};
          else if (x.lo == x.hi && y.lo == y.hi) r = {1, 1};
        } else if (lt ? x.hi < y.lo : x.hi <= y.lo) {
          r = {1, 1};
        } else if (lt ? x.lo >= y.hi : x.lo > y.hi) {
          r = {0, 0};
        }
        break;
      }
      case Op::kNot: case Op::kIsNaN: case Op::kAnd: case Op::kOr: case Op::kXor:
        r = {0, 1};
        break;
      case Op::kAdd: {
        IntRange v;
        const bool ok = !__builtin_add_overflow(x.lo, y.lo, &v.lo) &&
                        !__builtin_add_overflow(x.hi, y.hi, &v.hi);
        r = checked(ok, v);
        break;
      }
      case Op::kSub: {
        IntRange v;
        const bool ok = !__builtin_sub_overflow(x.lo, y.hi, &v.lo) &&
                        !__builtin_sub_overflow(x.hi, y.lo, &v.hi);
        r = checked(ok, v);
        break;
      }
      case Op::kMul: {
        IntRange v;
        auto mul = [](int64_t a, int64_t b, int64_t* o) { return !__builtin_mul_overflow(a, b, o); };
        const bool ok = Corners(x, y, mul, &v);
        r = checked(ok, v);
        break;
      }
      case Op::kDiv: r = DivRange(x, y, false, &exact); break;
      case Op::kFloorDiv: r = DivRange(x, y, true, &exact); break;
      case Op::kMod: r = ModRange(x, y); break;
      case Op::kFmod: r = FmodRange(x, y); break;
      case Op::kMin: r = {std::min(x.lo, y.lo), std::min(x.hi, y.hi)}; break;
      case Op::kMax: r = {std::max(x.lo, y.lo), std::max(x.hi, y.hi)}; break;
      case Op::kSelect: {
        const IntRange& c = out.range[node.a];  // the condition: x != 0
        const bool taken = c.lo > 0 || c.hi < 0, not_taken = c.lo == 0 && c.hi == 0;
        r = taken ? y : not_taken ? out.range[node.c] : Union(y, out.range[node.c]);
        break;
      }
      case Op::kCheckIndex: {
        // x when 0 <= x < bound, else 0.
        const int64_t below = y.hi == kMin ? kMin : y.hi - 1;
        r = {0, std::max<int64_t>(0, std::min(below, x.hi))};
        break;
      }
      default: r = kFull; break;  // float-only ops never have a kI64 type
    }
    out.range[id] = r;
    out.exact[id] = exact;
    out.rep[id] = data ? IntRep::kS64 : RepOf(r);
  }
  return out;
}

}  // namespace kiln::codegen
