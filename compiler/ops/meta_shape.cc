// Meta functions of the shape ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
// ConstantOfShape, Range, Expand and Tile.
//
// These carry the shape arithmetic of exported models: Shape and Size produce their
// elements as Syms, the reshaping ops pass elements through, and the ops whose output
// shape is given by a tensor (Reshape, ConstantOfShape, Expand, Tile, Range) read that
// tensor's elements (constant or symbolic). A shape that depends on data not known at
// compile time is Unimplemented("data-dependent output shape: ...").
//
// A symbolic element of a shape tensor is taken to be a dim (> 0); only the constants 0
// and -1 get Reshape's special meanings.
#include <algorithm>
#include <cmath>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// A 1-D integer tensor that describes a shape; its elements (symbolic allowed).
Result<std::vector<Sym>> ShapeInput(MetaContext& ctx, int i, std::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, i, what));
  KILN_RETURN_IF_ERROR(CheckDType(*v, what, kSignedInts));
  KILN_RETURN_IF_ERROR(CheckRank(*v, "input " + std::string(what), 1, 1));
  return NeedElements(*v, what);
}

void PassElements(MetaContext& ctx, const Value& in) {
  if (auto e = Elements(in)) SetSym(ctx, 0, std::move(*e));
}

Status ShapeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  int64_t r = x->rank();
  auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
  int64_t start = clamp(ctx.attrs().GetInt("start", 0));
  int64_t end = clamp(ctx.attrs().GetInt("end", r));
  std::vector<Sym> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x->shape[i]);
  ctx.SetOutput(0, DType::kInt64, {Sym(static_cast<int64_t>(dims.size()))});
  SetSym(ctx, 0, std::move(dims));
  return Status::Ok();
}

Status SizeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  ctx.SetOutput(0, DType::kInt64, {});
  SetSym(ctx, 0, {NumElements(x->shape)});
  return Status::Ok();
}

// Requires NumElements(a) == NumElements(b); `what` describes the reshape.
Status SameCount(MetaContext& ctx, const SymShape& a, const SymShape& b, const std::string& what) {
  Sym na = NumElements(a), nb = NumElements(b);
  if (na.Same(nb)) return Status::Ok();
  if (na.is_const() && nb.is_const())
    return InvalidArgument(what + ": expected " + na.ToString() + " elements, found " + nb.ToString());
  bool exact = false;
  Sym q = DivExact(na, nb, &exact);
  if (exact && q.is_const() && *q.value() == 1) return Status::Ok();
  AddGuard(ctx, Eq(na, nb));
  return Status::Ok();
}

// Reshape's guard that the dims besides a -1 do not multiply to 0: ONNX infers the -1 by dividing
// by that product.
constexpr std::string_view kMinusOneOverZero = "the dims besides the -1 must not multiply to 0";

// Reshape to a shape that holds value symbols (passes/value_inputs.h), whose elements may turn
// out to be 0 (copy the input dim, unless allowzero) or -1 (inferred) at each call: every output
// dim is the exact expression of all three cases, and guards check what the spec requires (each
// element >= -1, at most one -1, the element count kept).
Status ReshapeFromValues(MetaContext& ctx, const Value& x, const std::vector<Sym>& shape, bool allowzero) {
  const Sym total = NumElements(x.shape);
  const size_t n = shape.size();
  std::vector<Sym> minus_one(n), dim(n);  // dim: the element's dim unless it is the -1
  Sym count_minus_one(0), known(1);
  for (size_t i = 0; i < n; ++i) {
    const Sym& e = shape[i];
    const bool copies = !allowzero && i < x.shape.size();
    if (!copies) AddGuard(ctx, Sym(1) - Eq(e, 0) * Sym(allowzero ? 0 : 1));  // a 0 past the input rank
    AddGuard(ctx, Lt(Sym(-2), e));
    minus_one[i] = Eq(e, -1);
    const Sym zero = copies ? Eq(e, 0) : Sym(0);
    dim[i] = zero * (copies ? x.shape[i] : Sym(0)) + (Sym(1) - zero) * e;
    count_minus_one = count_minus_one + minus_one[i];
    known = known * (minus_one[i] + (Sym(1) - minus_one[i]) * dim[i]);
  }
  AddGuard(ctx, Lt(count_minus_one, 2));
  // With a -1, the other dims' product may not be 0.
  AddGuard(ctx, Lt(Sym(0), known + Sym(1) - count_minus_one), kMinusOneOverZero);
  // Every term is evaluated at each call: max(known, 1) keeps a 0 dim (allowzero) from dividing
  // by zero where no element is -1.
  const Sym inferred = FloorDiv(total, Max(known, Sym(1)));
  SymShape out(n);
  for (size_t i = 0; i < n; ++i) out[i] = minus_one[i] * inferred + (Sym(1) - minus_one[i]) * dim[i];
  AddGuard(ctx, Eq(NumElements(out), total));
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

// True when `dim` is 0 on every call where `e` is: the same expression, or `e` a product of
// symbols and positive constants each of which, at 0, makes `dim` 0 (batch and batch * seq).
bool ZeroWhenZero(const Sym& dim, const Sym& e) {
  if (dim.Same(e)) return true;
  std::vector<Sym> factors = {e}, vars;
  while (!factors.empty()) {
    const Sym f = factors.back();
    factors.pop_back();
    if (f.op() == ir::SymOp::kMul) {
      factors.push_back(f.lhs());
      factors.push_back(f.rhs());
    } else if (f.op() == ir::SymOp::kVar && !f.is_derived() && !f.is_value_var()) {
      vars.push_back(f);
    } else if (!f.is_const() || *f.value() <= 0) {
      return false;
    }
  }
  return std::all_of(vars.begin(), vars.end(), [&](const Sym& v) {
    const Sym at_zero = ir::Substitute(dim, {{v.name(), Sym(0)}});
    return at_zero.is_const() && *at_zero.value() == 0;
  });
}

Status ReshapeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> shape, ShapeInput(ctx, 1, "shape"));
  bool allowzero = ctx.attrs().GetInt("allowzero", 0) != 0;
  if (std::any_of(shape.begin(), shape.end(), HasValueVar)) return ReshapeFromValues(ctx, *x, shape, allowzero);
  SymShape out;
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const Sym& e = shape[i];
    auto v = e.value();
    if (v && *v == -1) {
      if (infer >= 0)
        return InvalidArgument("shape: expected at most one -1, found " + Str(shape));
      infer = static_cast<int>(i);
      out.push_back(Sym(1));
    } else if (v && *v == 0 && !allowzero) {
      if (i >= x->shape.size())
        return InvalidArgument("shape: a 0 at index " + std::to_string(i) +
                               " copies an input dim, expected an index below the input rank " +
                               std::to_string(x->rank()) + ", found shape " + Str(shape));
      out.push_back(x->shape[i]);
    } else if (v && *v < -1) {
      return InvalidArgument("shape: expected dims >= -1, found " + Str(shape));
    } else if (!v && e.lo() <= 0 && !allowzero) {
      // A dim computed from the input's dims that may be 0 at run time (an empty batch). A 0 there
      // copies the input's dim, as a constant 0 does: where that dim is then 0 as well (the
      // input's dim is batch * seq, the element batch), the result is the element; elsewhere a
      // guard refuses the 0, since following the copy would make every dim after it an
      // expression in both (a Reshape per layer of a decoder).
      if (i >= x->shape.size())
        AddGuard(ctx, Lt(Sym(0), e), "a 0 at index " + std::to_string(i) + " is past the input rank");
      else if (!ZeroWhenZero(x->shape[i], e))
        AddGuard(ctx, Lt(Sym(0), Lt(Sym(0), e) + Eq(x->shape[i], e)),
                 "a 0 at index " + std::to_string(i) + " copies input dim " + std::to_string(i) + " (" +
                     x->shape[i].ToString() + ") under allowzero=0, which Kiln refuses in a shape computed from dims");
      out.push_back(e);
    } else {
      has_zero |= v && *v == 0;
      out.push_back(e);
    }
  }
  std::string what = "cannot reshape " + Str(x->shape) + " to " + Str(shape);
  if (infer >= 0) {
    if (has_zero)
      return InvalidArgument("shape: with allowzero=1, expected no 0 together with -1, found " + Str(shape));
    int64_t known_const = 1;  // the constant dims besides the -1: their product must fit
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i) != infer && out[i].is_const() &&
          __builtin_mul_overflow(known_const, *out[i].value(), &known_const))
        return InvalidArgument(what + ": the product of the dims besides the -1 overflows int64");
    Sym total = NumElements(x->shape), known = NumElements(out);
    if (total.is_const() && known.is_const()) {
      int64_t t = *total.value(), k = *known.value();
      if (k == 0 || t % k != 0)
        return InvalidArgument(what + ": expected an element count divisible by " +
                               std::to_string(k) + ", found " + std::to_string(t));
      out[infer] = Sym(t / k);
    } else {
      if (known.lo() <= 0) AddGuard(ctx, Lt(Sym(0), known), kMinusOneOverZero);
      bool exact = false;
      out[infer] = DivExact(total, known, &exact);
      if (!exact && out[infer].is_const())  // e.g. N*3136 / (N*5)
        return InvalidArgument(what + ": expected an element count divisible by " +
                               known.ToString() + ", found " + total.ToString());
      if (!exact) AddGuard(ctx, Eq(Mod(total, known), 0));
    }
  } else {
    KILN_RETURN_IF_ERROR(SameCount(ctx, x->shape, out, what));
  }
  ctx.SetOutput(0, x->dtype, out);
  PassElements(ctx, *x);
  return Status::Ok();
}

Status FlattenMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  int r = x->rank();
  int64_t axis = ctx.attrs().GetInt("axis", 1);
  if (axis < -r || axis > r)
    return InvalidArgument("axis: expected a value in [" + std::to_string(-r) + ", " +
                           std::to_string(r) + "], found " + std::to_string(axis));
  if (axis < 0) axis += r;
  SymShape a(x->shape.begin(), x->shape.begin() + axis), b(x->shape.begin() + axis, x->shape.end());
  ctx.SetOutput(0, x->dtype, {NumElements(a), NumElements(b)});
  PassElements(ctx, *x);
  return Status::Ok();
}

// Squeeze's and Unsqueeze's axes: constants, or value symbols (passes/value_inputs.h) whose
// count (the rank change) is known.
Result<std::vector<Sym>> AxesInput(const Value& v) {
  KILN_RETURN_IF_ERROR(CheckDType(v, "axes", kSignedInts));
  KILN_RETURN_IF_ERROR(CheckRank(v, "input axes", 0, 1));
  return NeedElements(v, "axes");
}

Status SqueezeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  if (ctx.attrs().Has("axes"))
    return InvalidArgument("axes: expected the opset-13 form (axes as input 1), found an attribute");
  std::vector<bool> drop(x->rank(), false);
  if (const Value* a = ctx.input(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<Sym> sym_axes, AxesInput(*a));
    if (!AllConst(sym_axes)) {
      // Axes read at each call: each named dim must be 1; the others keep their order.
      const int64_t r = x->rank(), n = static_cast<int64_t>(sym_axes.size());
      if (n > r)
        return InvalidArgument("axes: expected at most " + std::to_string(r) + " axes for rank " + std::to_string(r) +
                               " data, found " + std::to_string(n));
      const std::vector<Sym> hits = ValueAxesHits(ctx, sym_axes, r);
      for (int64_t i = 0; i < r; ++i)
        AddGuard(ctx, Lt(0, (Sym(1) - hits[i]) + Eq(x->shape[i], 1)), "whose axes must name dims of size 1");
      ctx.SetOutput(0, x->dtype, DimsNotHit(x->shape, hits, r - n));
      PassElements(ctx, *x);
      return Status::Ok();
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormAxes(ConstValues(sym_axes), x->rank()));
    for (int i : norm) {
      const Sym& d = x->shape[i];
      if (d.is_const() && *d.value() != 1)
        return InvalidArgument("axes: expected dims of size 1, found dim " + std::to_string(i) +
                               " = " + d.ToString() + " in " + Str(x->shape));
      if (!d.is_const()) AddGuard(ctx, Eq(d, 1));
      drop[i] = true;
    }
  } else {
    for (int i = 0; i < x->rank(); ++i) {
      const Sym& d = x->shape[i];
      // A dim computed from a value input's elements stays, guarded not to be 1 (the output's rank
      // must be known; a value profile compiles the call where it is 1). A dim symbol stays an error.
      if (!d.is_const() && HasValueVar(d)) {
        AddGuard(ctx, Sym(1) - Eq(d, Sym(1)), "whose input dim " + std::to_string(i) +
                                                  " must not be 1 (Squeeze without axes keeps it)");
        continue;
      }
      if (!d.is_const())
        return Unimplemented("Squeeze without axes on symbolic dim " + std::to_string(i) + " of " +
                             Str(x->shape) + ": whether it is 1 is not known at compile time");
      drop[i] = *d.value() == 1;
    }
  }
  SymShape out;
  for (int i = 0; i < x->rank(); ++i)
    if (!drop[i]) out.push_back(x->shape[i]);
  ctx.SetOutput(0, x->dtype, out);
  PassElements(ctx, *x);
  return Status::Ok();
}

Status UnsqueezeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  if (ctx.attrs().Has("axes"))
    return InvalidArgument("axes: expected the opset-13 form (axes as input 1), found an attribute");
  KILN_ASSIGN_OR_RETURN(const Value* a, Need(ctx, 1, "axes"));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> sym_axes, AxesInput(*a));
  int r = x->rank() + static_cast<int>(sym_axes.size());
  if (!AllConst(sym_axes)) {
    // Axes read at each call, over the output's rank: a named dim is 1, the others are x's in
    // order (output dim k is x's dim k - (named dims before k)).
    const std::vector<Sym> hits = ValueAxesHits(ctx, sym_axes, r);
    SymShape out;
    Sym before(0);
    for (int k = 0; k < r; ++k) {
      Sym d(0);
      for (int i = 0; i < x->rank(); ++i) d = d + Eq(Sym(k) - before, Sym(i)) * x->shape[i];
      out.push_back(hits[k] + (Sym(1) - hits[k]) * d);
      before = before + hits[k];
    }
    ctx.SetOutput(0, x->dtype, out);
    PassElements(ctx, *x);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormAxes(ConstValues(sym_axes), r));
  std::vector<bool> ins(r, false);
  for (int i : norm) ins[i] = true;
  SymShape out;
  size_t k = 0;
  for (int i = 0; i < r; ++i) out.push_back(ins[i] ? Sym(1) : x->shape[k++]);
  ctx.SetOutput(0, x->dtype, out);
  PassElements(ctx, *x);
  return Status::Ok();
}

Status ConstantOfShapeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> shape, ShapeInput(ctx, 0, "input"));
  for (const Sym& d : shape)
    if (d.is_const() && *d.value() < 0)
      return InvalidArgument("input: expected dims >= 0, found " + Str(shape));
  int64_t dt = ctx.attrs().GetInt("dtype", static_cast<int64_t>(DType::kFloat32));
  if (!IsValidDType(static_cast<int32_t>(dt)))
    return InvalidArgument("dtype: expected a DType value, found " + std::to_string(dt));
  DType t = static_cast<DType>(dt);
  ctx.SetOutput(0, t, shape);
  if ((IsInteger(t) || t == DType::kBool) && IsStatic(shape)) {
    int64_t n = *NumElements(shape).value();
    if (n <= kMaxSymElements) {
      int64_t v = ctx.attrs().Has("value_int")
                      ? ctx.attrs().GetInt("value_int", 0)
                      : static_cast<int64_t>(ctx.attrs().GetFloat("value_float", 0.0f));
      if (t == DType::kBool) v = v != 0;
      SetSym(ctx, 0, std::vector<Sym>(n, Sym(v)));
    }
  }
  return Status::Ok();
}

Status RangeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  const char* names[] = {"start", "limit", "delta"};
  const Value* in[3];
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(in[i], Need(ctx, i, names[i]));
    KILN_RETURN_IF_ERROR(CheckDType(*in[i], names[i], kFloats | kSignedInts));
    if (i) KILN_RETURN_IF_ERROR(CheckSameDType(*in[0], "start", *in[i], names[i]));
    auto n = StaticCount(*in[i]);
    if (in[i]->rank() > 1 || (n && *n != 1))
      return InvalidArgument(std::string("input ") + names[i] + ": expected a scalar, found shape " +
                             Str(in[i]->shape));
  }
  DType t = in[0]->dtype;
  if (t == DType::kFloat16 || t == DType::kBFloat16) {
    // Range-27 computes low-precision ranges in stash_type; other dtypes ignore it.
    int64_t stash = ctx.attrs().GetInt("stash_type", static_cast<int64_t>(DType::kFloat32));
    if (stash != static_cast<int64_t>(DType::kFloat32) && stash != static_cast<int64_t>(DType::kFloat64))
      return InvalidArgument("stash_type: expected 1 (float) or 11 (double), found " + std::to_string(stash));
  }
  // An unknown delta is named first: it divides the size, which a float Range needs to know.
  constexpr int kOrder[] = {2, 0, 1};
  if (IsFloat(t)) {
    auto s = FloatElements(*in[0]), l = FloatElements(*in[1]), d = FloatElements(*in[2]);
    for (int i : kOrder)
      if (!(i == 0 ? s : i == 1 ? l : d))
        return Unimplemented(std::string("data-dependent output shape: Range ") + names[i] + " (" + in[i]->name +
                             ") is not known at compile time (a floating-point Range's size needs start, limit "
                             "and delta known)");
    if (s->size() != 1 || l->size() != 1 || d->size() != 1) return InvalidArgument("expected scalar inputs");
    if ((*d)[0] == 0) return InvalidArgument("delta: expected nonzero, found 0");
    double diff = t == DType::kFloat32 ? static_cast<double>(static_cast<float>((*l)[0] - (*s)[0]))
                                       : (*l)[0] - (*s)[0];
    double c = std::ceil(diff / (*d)[0]);
    if (!(c < 9e15)) return InvalidArgument("expected a finite element count, found " + FloatStr(c));
    ctx.SetOutput(0, t, {Sym(std::max<int64_t>(0, static_cast<int64_t>(c)))});
    return Status::Ok();
  }
  auto s = Elements(*in[0]), l = Elements(*in[1]), d = Elements(*in[2]);
  for (int i : kOrder)
    if (!(i == 0 ? s : i == 1 ? l : d))
      return Unimplemented(std::string("data-dependent output shape: Range ") + names[i] + " (" + in[i]->name +
                           ") is not known at compile time");
  if (s->size() != 1 || l->size() != 1 || d->size() != 1) return InvalidArgument("expected scalar inputs");
  const Sym &start = (*s)[0], &limit = (*l)[0], &delta = (*d)[0];
  // max(0, ceil((limit - start) / delta)), divided as CeilDiv needs, by a positive divisor: for a
  // constant delta, the span toward it over |delta|; for a symbolic one (a value symbol, of
  // either sign) the same with its sign, 1 or -1, decided at each call, where it must not be 0.
  Sym n;
  if (auto dv = delta.value()) {
    if (*dv == 0) return InvalidArgument("delta: expected nonzero, found 0");
    n = CeilDiv(*dv > 0 ? SubS(limit, start) : SubS(start, limit), Sym(*dv > 0 ? *dv : -*dv));
  } else {
    AddGuard(ctx, Sym(1) - Eq(delta, Sym(0)), "whose delta must be nonzero");
    const Sym sign = Lt(Sym(0), delta) * Sym(2) - Sym(1);
    n = CeilDiv(SubS(limit, start) * sign, delta * sign);
  }
  if (n.lo() < 0) n = Max(n, 0);
  ctx.SetOutput(0, t, {n});
  if (auto nv = n.value(); nv && *nv <= kMaxSymElements) {
    std::vector<Sym> e;
    for (int64_t i = 0; i < *nv; ++i) e.push_back(AddS(start, delta * Sym(i)));
    SetSym(ctx, 0, std::move(e));
  }
  return Status::Ok();
}

Status ExpandMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> shape, ShapeInput(ctx, 1, "shape"));
  // An element from a value input (passes/value_inputs.h) may be 1 where the input's dim is
  // larger, and Expand then keeps the input's dim: such an element takes the input's dim (unless
  // that is 1, where the element is the dim), guarded to be 1 or equal to it.
  std::vector<Sym> target = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t from_end = shape.size() - 1 - i;
    if (!HasValueVar(shape[i]) || from_end >= x->shape.size()) continue;
    const Sym& a = x->shape[x->shape.size() - 1 - from_end];
    if (a.is_const() && *a.value() == 1) continue;
    AddGuard(ctx, Lt(Sym(0), Eq(shape[i], Sym(1)) + Eq(shape[i], a)));
    target[i] = a;
  }
  KILN_ASSIGN_OR_RETURN(SymShape out, Broadcast(ctx, x->shape, target, BroadcastDims::kAtRunTime));
  ctx.SetOutput(0, x->dtype, out);
  if (IsStatic(x->shape) && IsStatic(out) && *NumElements(out).value() <= kMaxSymElements)
    if (auto e = Elements(*x)) SetSym(ctx, 0, BroadcastElements(*e, StaticDims(x->shape), StaticDims(out)));
  return Status::Ok();
}

Status TileMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> reps, ShapeInput(ctx, 1, "repeats"));
  if (static_cast<int>(reps.size()) != x->rank())
    return InvalidArgument("repeats: expected " + std::to_string(x->rank()) +
                           " values (the input rank), found " + std::to_string(reps.size()));
  SymShape out;
  for (int i = 0; i < x->rank(); ++i) {
    if (reps[i].is_const() && *reps[i].value() < 0)
      return InvalidArgument("repeats: expected values >= 0, found " + Str(reps));
    out.push_back(x->shape[i] * reps[i]);
  }
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterShapeOps(std::vector<OpDef>& ops) {
  Def(ops, "Shape", ShapeMeta);
  Def(ops, "Size", SizeMeta);
  Def(ops, "Reshape", ReshapeMeta);
  Def(ops, "Flatten", FlattenMeta);
  Def(ops, "Squeeze", SqueezeMeta);
  Def(ops, "Unsqueeze", UnsqueezeMeta);
  Def(ops, "ConstantOfShape", ConstantOfShapeMeta);
  Def(ops, "Range", RangeMeta);
  Def(ops, "Expand", ExpandMeta);
  Def(ops, "Tile", TileMeta);
}

}  // namespace kiln::ir
