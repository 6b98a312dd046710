#include "compiler/ops/meta_util.h"

#include <limits>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "runtime/shape_text.h"

namespace kiln::ir::meta {

// ---- element access --------------------------------------------------------------------

std::optional<int64_t> StaticCount(const Value& v) {
  return NumElements(v.shape).value();
}

std::optional<std::vector<Sym>> Elements(const Value& v) {
  if (v.sym) {
    if (!IsInteger(v.dtype) && v.dtype != DType::kBool) return std::nullopt;  // a float's bits: Float32Bits
    if (auto n = StaticCount(v); n && *n == static_cast<int64_t>(v.sym->size())) return v.sym;
    return std::nullopt;
  }
  if (!v.data) return std::nullopt;
  DType t = v.data->dtype;
  // int64 Syms hold every value of these dtypes; uint64's upper half would turn negative.
  if ((!IsInteger(t) && t != DType::kBool) || t == DType::kUInt64) return std::nullopt;
  int64_t n = v.data->num_elements();
  if (n > kMaxSymElements) return std::nullopt;
  std::vector<Sym> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) out.emplace_back(v.data->IntAt(i));
  return out;
}

std::optional<std::vector<Sym>> Float32Bits(const Value& v) {
  if (v.dtype != DType::kFloat32 || !v.sym) return std::nullopt;
  if (auto n = StaticCount(v); n && *n == static_cast<int64_t>(v.sym->size())) return v.sym;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> ConstInts(const Value& v) {
  auto e = Elements(v);
  if (!e) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(e->size());
  for (const Sym& s : *e) {
    if (!s.is_const()) return std::nullopt;
    out.push_back(*s.value());
  }
  return out;
}

std::optional<std::vector<double>> FloatElements(const Value& v) {
  if (!v.data) {
    if (auto ints = ConstInts(v)) return std::vector<double>(ints->begin(), ints->end());
    return std::nullopt;
  }
  if (!IsNumeric(v.data->dtype) && v.data->dtype != DType::kBool) return std::nullopt;
  int64_t n = v.data->num_elements();
  if (n > kMaxSymElements) return std::nullopt;
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = v.data->FloatAt(i);
  return out;
}

void SetSym(MetaContext& ctx, int i, std::vector<Sym> elems) {
  Value* v = ctx.output(i);
  if (!v || static_cast<int64_t>(elems.size()) > kMaxSymElements) return;
  v->sym = std::move(elems);
}

// ---- dtypes ------------------------------------------------------------------------------

bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64 ||
         t == DType::kBFloat16;
}
bool IsSignedInt(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}
bool IsInteger(DType t) {
  return IsSignedInt(t) || t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 ||
         t == DType::kUInt64;
}
bool IsNumeric(DType t) { return IsFloat(t) || IsInteger(t); }
std::string DTypeStr(DType t) { return std::string(DTypeName(t)); }

bool InSet(DType t, unsigned set) {
  if (IsFloat(t)) return set & kFloats;
  if (IsSignedInt(t)) return set & kSignedInts;
  if (IsInteger(t)) return set & kUnsignedInts;
  if (t == DType::kBool) return set & kBools;
  return false;
}

static std::string SetStr(unsigned set) {
  std::vector<std::string> parts;
  if (set & kFloats) parts.push_back("float");
  if ((set & kInts) == kInts) parts.push_back("integer");
  else if (set & kSignedInts) parts.push_back("signed integer");
  else if (set & kUnsignedInts) parts.push_back("unsigned integer");
  if (set & kBools) parts.push_back("bool");
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? (i + 1 == parts.size() ? " or " : ", ") : "") + parts[i];
  return s;
}

Status CheckDType(const Value& v, std::string_view what, unsigned set) {
  if (InSet(v.dtype, set)) return Status::Ok();
  return InvalidArgument("input " + std::string(what) + ": expected a " + SetStr(set) +
                         " tensor, found " + DTypeStr(v.dtype));
}

Status CheckSameDType(const Value& a, std::string_view an, const Value& b, std::string_view bn) {
  if (a.dtype == b.dtype) return Status::Ok();
  return InvalidArgument("inputs " + std::string(an) + " and " + std::string(bn) +
                         ": expected the same dtype, found " + DTypeStr(a.dtype) + " and " +
                         DTypeStr(b.dtype));
}

// ---- inputs and attributes ----------------------------------------------------------------

Result<const Value*> Need(MetaContext& ctx, int i, std::string_view what) {
  const Value* v = ctx.input(i);
  if (!v)
    return InvalidArgument("expected input " + std::to_string(i) + " (" + std::string(what) +
                           "), found it absent (" + std::to_string(ctx.num_inputs()) +
                           " inputs)");
  return v;
}

const Value* Optional(MetaContext& ctx, int i) {
  const Value* v = ctx.input(i);
  if (!v) return nullptr;
  if (auto n = StaticCount(*v); n && *n == 0 && v->rank() == 1) return nullptr;
  return v;
}

Status CheckRank(const Value& v, std::string_view what, int lo, int hi) {
  if (v.rank() >= lo && v.rank() <= hi) return Status::Ok();
  std::string exp = lo == hi ? "rank " + std::to_string(lo)
                   : hi >= 1000 ? "rank >= " + std::to_string(lo)
                               : "rank " + std::to_string(lo) + ".." + std::to_string(hi);
  return InvalidArgument(std::string(what) + ": expected " + exp + ", found rank " +
                         std::to_string(v.rank()) + " " + Str(v.shape));
}

Result<int> NormAxis(int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument(std::string(what) + ": expected a value in [" + std::to_string(-rank) +
                           ", " + std::to_string(rank - 1) + "], found " + std::to_string(axis));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Result<std::vector<int>> NormAxes(const std::vector<int64_t>& axes, int rank, std::string_view what) {
  std::vector<int> out;
  std::vector<bool> seen(rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int n, NormAxis(a, rank, what));
    if (seen[n])
      return InvalidArgument(std::string(what) + ": expected distinct axes, found " + Str(axes));
    seen[n] = true;
    out.push_back(n);
  }
  return out;
}

Result<std::vector<int64_t>> NeedConstInts(const Value& v, std::string_view what) {
  if (auto c = ConstInts(v)) return *c;
  return Unimplemented("data-dependent output shape: " + std::string(what) + " (" + v.name +
                       ") is not known at compile time");
}

Result<std::vector<Sym>> NeedElements(const Value& v, std::string_view what) {
  if (auto c = Elements(v)) return *c;
  return Unimplemented("data-dependent output shape: " + std::string(what) + " (" + v.name +
                       ") is not known at compile time");
}

Result<std::vector<int64_t>> IntsAttr(const AttrMap& attrs, std::string_view name, size_t n,
                                      int64_t def) {
  if (!attrs.Has(name)) return std::vector<int64_t>(n, def);
  const auto& v = attrs.GetInts(name);
  if (v.size() != n)
    return InvalidArgument("attribute " + std::string(name) + ": expected " + std::to_string(n) +
                           " values, found " + std::to_string(v.size()) + " " + Str(v));
  return v;
}

// ---- symbolic dims ----------------------------------------------------------------------

namespace {

// x = base + off. An offset that would overflow int64 is left inside the base.
std::pair<Sym, int64_t> SplitOffset(const Sym& x) {
  if (x.is_const()) return {Sym(0), *x.value()};
  const bool add = x.op() == SymOp::kAdd, sub = x.op() == SymOp::kSub;
  if ((add || sub) && x.rhs().is_const()) {
    auto [b, o] = SplitOffset(x.lhs());
    int64_t r;
    if (!(add ? __builtin_add_overflow(o, *x.rhs().value(), &r) : __builtin_sub_overflow(o, *x.rhs().value(), &r)))
      return {b, r};
  } else if (add && x.lhs().is_const()) {
    auto [b, o] = SplitOffset(x.rhs());
    int64_t r;
    if (!__builtin_add_overflow(o, *x.lhs().value(), &r)) return {b, r};
  }
  return {x, 0};
}

Sym WithOffset(const Sym& base, int64_t off) {
  if (off == 0) return base;
  if (base.is_const()) return base + Sym(off);  // folds, or stays symbolic when it would overflow
  if (off > 0) return base + Sym(off);
  if (off == INT64_MIN) return base + Sym(off);
  return base - Sym(-off);
}

// x = coef * product(factors); a constant that would overflow coef stays a factor.
void Factor(const Sym& x, int64_t* coef, std::vector<Sym>* factors) {
  int64_t product;
  if (x.is_const() && !__builtin_mul_overflow(*coef, *x.value(), &product)) {
    *coef = product;
    return;
  }
  if (x.op() == SymOp::kMul) {
    Factor(x.lhs(), coef, factors);
    Factor(x.rhs(), coef, factors);
    return;
  }
  factors->push_back(x);
}

Sym Product(int64_t coef, const std::vector<Sym>& f) {
  Sym r(coef);
  for (const Sym& s : f) r = r * s;
  // Constant first reads badly ("(64*N)"); put factors first when coef != 1.
  if (coef != 1 && !f.empty()) {
    Sym p = f[0];
    for (size_t i = 1; i < f.size(); ++i) p = p * f[i];
    return p * Sym(coef);
  }
  return r;
}

}  // namespace

Sym AddC(const Sym& x, int64_t c) {
  auto [b, o] = SplitOffset(x);
  int64_t n;
  if (__builtin_add_overflow(o, c, &n)) return x + Sym(c);
  return WithOffset(b, n);
}

Sym SubS(const Sym& a, const Sym& b) {
  auto [ba, oa] = SplitOffset(a);
  auto [bb, ob] = SplitOffset(b);
  int64_t d;
  if (__builtin_sub_overflow(oa, ob, &d)) return a - b;
  if (ba.Same(bb)) return Sym(d);
  if (bb.is_const()) return WithOffset(ba, d);  // bb is 0
  return WithOffset(ba - bb, d);
}

Sym AddS(const Sym& a, const Sym& b) {
  auto [ba, oa] = SplitOffset(a);
  auto [bb, ob] = SplitOffset(b);
  int64_t d;
  if (__builtin_add_overflow(oa, ob, &d)) return a + b;
  if (ba.is_const()) return WithOffset(bb, d);
  if (bb.is_const()) return WithOffset(ba, d);
  return WithOffset(ba + bb, d);
}

bool HasValueVar(const Sym& s) { return s.reads_value_var(); }

bool HasRuntimeVar(const Sym& s) { return s.reads_runtime_var(); }

Result<Sym> SliceBound(const Sym& d, const Sym& k, int64_t step, bool is_end) {
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  if (!k.is_const()) {
    const Sym from_start = Min(k, step > 0 ? d : AddC(d, -1));
    if (k.lo() >= 0) return from_start;
    // Sign unknown (a value symbol): a negative k counts from the end, chosen at run time. Both
    // forms are evaluated, so d + min(k, 0) keeps the unused one from overflowing for huge k.
    const Sym negative = Lt(k, Sym(0));
    const Sym from_end = Max(Sym(step < 0 && is_end ? -1 : 0), d + Min(k, Sym(0)));
    return negative * from_end + (Sym(1) - negative) * from_start;
  }
  const int64_t v = *k.value();
  if (step > 0) {
    if (v >= kBig) return d;
    if (v <= -kBig) return Sym(0);
    return v >= 0 ? Min(Sym(v), d) : Max(Sym(0), AddC(d, v));
  }
  const Sym last = AddC(d, -1);
  if (v >= kBig) return last;
  if (v <= -kBig) return Sym(is_end ? -1 : 0);
  return v >= 0 ? Min(Sym(v), last) : Max(Sym(is_end ? -1 : 0), AddC(d, v));
}

Sym DivExact(const Sym& a, const Sym& b, bool* exact) {
  if (exact) *exact = true;
  int64_t ca = 1, cb = 1;
  std::vector<Sym> fa, fb;
  Factor(a, &ca, &fa);
  Factor(b, &cb, &fb);
  std::vector<Sym> rest_b;
  for (const Sym& f : fb) {
    auto it = std::find_if(fa.begin(), fa.end(), [&](const Sym& x) { return x.Same(f); });
    if (it != fa.end()) fa.erase(it);
    else rest_b.push_back(f);
  }
  if (ca == INT64_MIN || cb == INT64_MIN) {  // no magnitude to reduce or negate
    if (exact) *exact = false;
    return FloorDiv(a, b);
  }
  if (cb != 0) {
    int64_t g = std::gcd(ca, cb);
    if (g != 0) { ca /= g; cb /= g; }
    if (cb < 0) { ca = -ca; cb = -cb; }
  }
  if (rest_b.empty() && cb == 1) return Product(ca, fa);
  if (exact) *exact = false;
  return FloorDiv(Product(ca, fa), Product(cb, rest_b));
}

Status Require(MetaContext& ctx, const Sym& holds, std::string_view error, std::string_view why) {
  if (holds.is_const() && *holds.value() == 0) return InvalidArgument(std::string(error));
  AddGuard(ctx, holds, why);
  return Status::Ok();
}

void AddGuard(MetaContext& ctx, const Sym& g, std::string_view why) {
  if (g.is_const() && *g.value() != 0) return;
  for (const Guard& x : ctx.trace().guards)
    if (x.condition.Same(g)) return;
  std::string origin = "node '" + ctx.node().name + "' (" + ctx.node().op + ")";
  if (!why.empty()) origin += ", " + std::string(why);
  ctx.trace().guards.push_back({g, std::move(origin)});
}

bool AllConst(const std::vector<Sym>& v) {
  return std::all_of(v.begin(), v.end(), [](const Sym& s) { return s.is_const(); });
}

std::vector<int64_t> ConstValues(const std::vector<Sym>& v) {
  std::vector<int64_t> out;
  for (const Sym& s : v) out.push_back(*s.value());
  return out;
}

Sym NamesDim(const Sym& a, int64_t i, int64_t rank) { return Eq(a, Sym(i)) + Eq(a, Sym(i - rank)); }

std::vector<Sym> ValueAxesHits(MetaContext& ctx, const std::vector<Sym>& axes, int64_t rank) {
  for (const Sym& a : axes)
    AddGuard(ctx, Lt(Sym(-rank - 1), a) * Lt(a, Sym(rank)), "whose axes must be in [-rank, rank-1]");
  std::vector<Sym> hits(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    Sym h(0);
    for (const Sym& a : axes) h = h + NamesDim(a, i, rank);
    AddGuard(ctx, Lt(h, Sym(2)), "whose axes must be distinct");
    hits[static_cast<size_t>(i)] = h;
  }
  return hits;
}

SymShape DimsNotHit(const SymShape& shape, const std::vector<Sym>& hits, int64_t count) {
  const size_t r = shape.size();
  std::vector<Sym> position(r);  // of dim i among the dims not hit
  Sym before(0);
  for (size_t i = 0; i < r; ++i) {
    position[i] = before;
    before = before + (Sym(1) - hits[i]);
  }
  SymShape out;
  for (int64_t k = 0; k < count; ++k) {
    Sym d(0);
    for (size_t i = 0; i < r; ++i) d = d + (Sym(1) - hits[i]) * Eq(position[i], Sym(k)) * shape[i];
    out.push_back(d);
  }
  return out;
}

Sym NewRuntimeDim(MetaContext& ctx, int output, const Sym& bound, std::string_view what) {
  const Value* out = ctx.output(output);
  const std::string name = (out ? out->name : ctx.node().name) + ".count";
  std::vector<std::pair<std::string, Sym>> earlier;
  for (const ir::RuntimeDim& d : ctx.trace().runtime_dims) earlier.emplace_back(d.symbol, d.bound);
  const Sym b = Substitute(bound, earlier);
  ir::RuntimeDim dim{name, Max(Sym(0), b),
                     "node '" + ctx.node().name + "' (" + ctx.node().op + ")'s " + std::string(what)};
  auto& dims = ctx.trace().runtime_dims;
  auto it = std::find_if(dims.begin(), dims.end(), [&](const ir::RuntimeDim& d) { return d.symbol == name; });
  if (it == dims.end()) dims.push_back(std::move(dim));
  else *it = std::move(dim);
  return Sym::RuntimeVar(name);
}

Sym NewGrowingRuntimeDim(MetaContext& ctx, int output, int64_t initial_room, std::string_view what) {
  const Value* out = ctx.output(output);
  const Sym dim = NewRuntimeDim(ctx, output, Sym::Var((out ? out->name : ctx.node().name) + ".rows"), what);
  for (ir::RuntimeDim& d : ctx.trace().runtime_dims)
    if (d.symbol == dim.name()) d.initial_room = initial_room;
  return dim;
}

Status Unify(MetaContext& ctx, const Sym& expected, const Sym& found, std::string_view what) {
  if (expected.Same(found)) return Status::Ok();
  if (expected.is_const() && found.is_const())
    return InvalidArgument(std::string(what) + ": expected " + expected.ToString() + ", found " +
                           found.ToString());
  AddGuard(ctx, Eq(expected, found));
  return Status::Ok();
}

namespace {

// Whether tensor dim `d` is at least `lo` (0 or 1) for every call an entry accepts. Dim
// symbols are >= 1; a dim whose range reaches below 0 (a size read from a value input) is
// guarded >= 0 by the canonical stage (CheckOutputDims), so it may be 0.
bool DimAtLeast(const Sym& d, int64_t lo) {
  if (d.is_const()) return *d.value() >= lo;
  return lo <= 0 || d.lo() >= lo;
}

}  // namespace

Result<SymShape> Broadcast(MetaContext& ctx, const SymShape& a, const SymShape& b, BroadcastDims mode) {
  size_t r = std::max(a.size(), b.size());
  SymShape out(r);
  for (size_t i = 0; i < r; ++i) {
    bool ha = i < a.size(), hb = i < b.size();
    const Sym one(1);
    const Sym& x = ha ? a[a.size() - 1 - i] : one;
    const Sym& y = hb ? b[b.size() - 1 - i] : one;
    Sym& o = out[r - 1 - i];
    auto is1 = [](const Sym& s) { return s.is_const() && *s.value() == 1; };
    if (x.Same(y) || is1(y)) o = x;
    else if (is1(x)) o = y;
    else if (x.is_const() && y.is_const())
      return InvalidArgument("shapes " + Str(a) + " and " + Str(b) +
                             " do not broadcast: expected equal dims or 1, found " +
                             x.ToString() + " vs " + y.ToString());
    else if (mode == BroadcastDims::kAtRunTime && DimAtLeast(x, 0) && DimAtLeast(y, 0)) {
      // Either may be 1 at run time, and the guard keeps only what numpy requires. A constant
      // side (0 included: the symbol then must be 1) is the output dim. Of two symbols >= 1
      // the larger is; where one may be 0 (a run-time dim), the larger unless the smaller is 0.
      if (x.is_const() || y.is_const()) o = x.is_const() ? x : y;
      else if (DimAtLeast(x, 1) && DimAtLeast(y, 1)) o = Max(x, y);
      else o = Max(x, y) * Min(Min(x, y), 1);
      AddGuard(ctx, Lt(0, Eq(x, y) + Eq(x, 1) + Eq(y, 1)));
    } else {
      // Prefer a constant; of two symbols take the first. Either way assume equality.
      o = y.is_const() ? y : x;
      AddGuard(ctx, Eq(x, y));
    }
  }
  return out;
}

std::vector<Sym> BroadcastElements(const std::vector<Sym>& v, const std::vector<int64_t>& from,
                                   const std::vector<int64_t>& to) {
  // No elements: none to broadcast, and the other dims' product may pass int64 ([2^32, 2^32, 0]).
  if (std::find(to.begin(), to.end(), 0) != to.end()) return {};
  int64_t n = 1;
  for (int64_t d : to) n *= d;
  std::vector<Sym> out;
  out.reserve(n);
  size_t r = to.size();
  std::vector<int64_t> f(r, 1);
  for (size_t i = 0; i < from.size(); ++i) f[r - from.size() + i] = from[i];
  std::vector<int64_t> fstride(r, 0);
  int64_t s = 1;
  for (size_t i = r; i-- > 0;) {
    fstride[i] = f[i] == 1 ? 0 : s;
    s *= f[i];
  }
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t i = 0; i < r; ++i) src += idx[i] * fstride[i];
    out.push_back(v[src]);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < to[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

Result<Window> ReadWindow(const AttrMap& attrs, const std::vector<int64_t>& kernel,
                          bool has_dilations) {
  Window w;
  w.n = static_cast<int>(kernel.size());
  w.kernel = kernel;
  for (size_t i = 0; i < kernel.size(); ++i)
    if (kernel[i] < 1)
      return InvalidArgument("kernel_shape: expected positive dims, found " + Str(kernel));
  KILN_ASSIGN_OR_RETURN(w.strides, IntsAttr(attrs, "strides", w.n, 1));
  if (has_dilations) {
    KILN_ASSIGN_OR_RETURN(w.dilations, IntsAttr(attrs, "dilations", w.n, 1));
  } else {
    w.dilations.assign(w.n, 1);
  }
  KILN_ASSIGN_OR_RETURN(w.pads, IntsAttr(attrs, "pads", 2 * w.n, 0));
  for (int i = 0; i < w.n; ++i) {
    if (w.strides[i] < 1)
      return InvalidArgument("strides: expected positive values, found " + Str(w.strides));
    if (w.dilations[i] < 1)
      return InvalidArgument("dilations: expected positive values, found " + Str(w.dilations));
  }
  for (int64_t p : w.pads)
    if (p < 0) return InvalidArgument("pads: expected values >= 0, found " + Str(w.pads));
  w.auto_pad = std::string(attrs.GetString("auto_pad", "NOTSET"));
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" &&
      w.auto_pad != "VALID")
    return InvalidArgument("auto_pad: expected NOTSET, SAME_UPPER, SAME_LOWER or VALID, found \"" +
                           w.auto_pad + "\"");
  if (w.auto_pad != "NOTSET" && attrs.Has("pads")) {
    bool any = false;
    for (int64_t p : w.pads) any |= p != 0;
    if (any)
      return InvalidArgument("pads: expected none with auto_pad " + w.auto_pad + ", found " +
                             Str(w.pads));
  }
  int64_t cm = attrs.GetInt("ceil_mode", 0);
  if (cm != 0 && cm != 1)
    return InvalidArgument("ceil_mode: expected 0 or 1, found " + std::to_string(cm));
  w.ceil_mode = cm == 1;
  return w;
}

Result<SymShape> WindowOutput(MetaContext& ctx, const SymShape& in, const Window& w) {
  SymShape out;
  for (int i = 0; i < w.n; ++i) {
    const Sym& x = in[i];
    int64_t s = w.strides[i];
    // keff = dilation * (kernel - 1) + 1 and c = pads - keff (output = (x + c) / s + 1), with
    // c + s also in range (kernel, dilation, stride >= 1 and pads >= 0 were checked).
    int64_t keff, c, c_s;
    const bool valid = w.auto_pad == "VALID";
    const int64_t pb = valid ? 0 : w.pads[i], pe = valid ? 0 : w.pads[i + w.n];
    if (__builtin_mul_overflow(w.dilations[i], w.kernel[i] - 1, &keff) || __builtin_add_overflow(keff, 1, &keff) ||
        __builtin_add_overflow(pb, pe, &c) || __builtin_sub_overflow(c, keff, &c) || __builtin_add_overflow(c, s, &c_s))
      return InvalidArgument("spatial dim " + std::to_string(i) + ": kernel_shape " + std::to_string(w.kernel[i]) +
                             ", dilation " + std::to_string(w.dilations[i]) + ", stride " + std::to_string(s) +
                             " and pads " + Str(w.pads) + " overflow int64 in the output size");
    Sym o;
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      o = CeilDiv(x, s);
    } else {
      if (s == 1) {
        o = AddC(x, c_s);  // s == 1
      } else if (w.ceil_mode && !valid) {
        o = CeilDiv(AddC(x, c_s), s);  // ceil((x + c) / s) + 1
        // Drop a last window that would start in the end padding: (o-1)*s >= x + pb.
        if (s > keff - pe) {
          Sym start = SubS(o, 1) * Sym(s);
          Sym drop = Sym(1) - Lt(start, AddC(x, pb));
          o = SubS(o, drop);
        }
      } else {
        o = FloorDiv(AddC(x, c_s), s);  // floor((x + c) / s) + 1
      }
    }
    if (auto v = o.value(); v && *v < 1)
      return InvalidArgument("spatial dim " + std::to_string(i) + ": expected an output size >= 1, found " +
                             std::to_string(*v) + " (input " + x.ToString() + ", kernel " +
                             std::to_string(w.kernel[i]) + ", stride " + std::to_string(s) +
                             ", dilation " + std::to_string(w.dilations[i]) + ", pads " +
                             Str(w.pads) + ")");
    // A window needs an output of at least 1 (the canonical stage would take 0). Every caller's
    // output is [N, C, spatial...].
    if (!o.is_const() && o.lo() < 1) {
      const Value* y = ctx.output(0);
      const std::string name = y ? y->name : std::string("0");
      AddGuard(ctx, Lt(0, o), "whose output '" + name + "' dim " + std::to_string(i + 2) + " must be >= 1");
    }
    out.push_back(o);
  }
  return out;
}

Status CheckMaxOutputs(MetaContext& ctx, int max) {
  if (ctx.num_outputs() <= max) return Status::Ok();
  return InvalidArgument("expected at most " + std::to_string(max) + " outputs, found " +
                         std::to_string(ctx.num_outputs()));
}

std::string Str(const SymShape& s) { return ShapeToString(s); }
std::string Str(const std::vector<int64_t>& v) { return ShapeText(v); }

std::string FloatStr(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

}  // namespace kiln::ir::meta
