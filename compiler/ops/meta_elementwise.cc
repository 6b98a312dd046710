// Meta functions of the elementwise ops: binary and variadic arithmetic with numpy
// broadcasting, comparisons and logic, unary math and activations, Clip, Identity, Cast,
// CastLike and Where.
//
// Shape arithmetic: for integer/bool tensors whose elements are known (constant data or
// `sym`), the outputs' elements are set as Syms. Integer Div truncates toward zero in
// ONNX while Sym divides (FloorDiv, Mod) by positive divisors only: where both operands
// are provably >= 0 a Div is a FloorDiv; otherwise (a value symbol's sign is not known
// until the call) Div and Mod divide magnitudes and put the sign back, each sign an
// expression that the call decides (Sign).
#include <cmath>
#include <limits>
#include <functional>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

using SymFn = std::function<std::optional<Sym>(const std::vector<Sym>&)>;

// Sets output 0's elements from the inputs' elements, broadcast to `out`.
void Propagate(MetaContext& ctx, const std::vector<const Value*>& ins, const SymShape& out,
               const SymFn& fn) {
  if (!fn || !IsStatic(out) || !ctx.output(0)) return;
  std::vector<int64_t> to = StaticDims(out);
  // A count that overflows int64 ([2^32, 2^32, 0] has none, but its partial product does)
  // stays symbolic: no value.
  auto count = NumElements(out).value();
  if (!count || *count > kMaxSymElements) return;
  const int64_t n = *count;
  std::vector<std::vector<Sym>> elems;
  for (const Value* v : ins) {
    if (!v || !IsStatic(v->shape)) return;
    auto e = Elements(*v);
    if (!e) return;
    elems.push_back(BroadcastElements(*e, StaticDims(v->shape), to));
  }
  std::vector<Sym> res;
  res.reserve(n);
  std::vector<Sym> args(ins.size());
  for (int64_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < ins.size(); ++j) args[j] = elems[j][k];
    auto r = fn(args);
    if (!r) return;
    res.push_back(*r);
  }
  SetSym(ctx, 0, std::move(res));
}

bool IntLike(DType t) { return IsInteger(t) || t == DType::kBool; }

// A binary op with broadcasting. `out` kUndefined means "the dtype of A".
MetaFn Binary(unsigned set, bool same_dtype, DType out, std::function<std::optional<Sym>(const Sym&, const Sym&)> fn = nullptr) {
  return [=](MetaContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
    KILN_ASSIGN_OR_RETURN(const Value* a, Need(ctx, 0, "A"));
    KILN_ASSIGN_OR_RETURN(const Value* b, Need(ctx, 1, "B"));
    KILN_RETURN_IF_ERROR(CheckDType(*a, "A", set));
    KILN_RETURN_IF_ERROR(CheckDType(*b, "B", set));
    if (same_dtype) KILN_RETURN_IF_ERROR(CheckSameDType(*a, "A", *b, "B"));
    KILN_ASSIGN_OR_RETURN(SymShape shape, Broadcast(ctx, a->shape, b->shape, BroadcastDims::kAtRunTime));
    DType dt = out == DType::kUndefined ? a->dtype : out;
    ctx.SetOutput(0, dt, shape);
    if (fn && IntLike(a->dtype) && IntLike(b->dtype))
      Propagate(ctx, {a, b}, shape,
                [&](const std::vector<Sym>& v) { return fn(v[0], v[1]); });
    return Status::Ok();
  };
}

// Max, Min, Sum, Mean: one or more inputs of one dtype, broadcast together.
MetaFn Variadic(unsigned set, std::function<Sym(const Sym&, const Sym&)> fn = nullptr) {
  return [=](MetaContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
    if (ctx.num_inputs() < 1) return InvalidArgument("expected at least 1 input, found 0");
    std::vector<const Value*> ins;
    SymShape shape;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, i, "data_" + std::to_string(i)));
      KILN_RETURN_IF_ERROR(CheckDType(*v, "data_" + std::to_string(i), set));
      if (i > 0) {
        KILN_RETURN_IF_ERROR(CheckSameDType(*ins[0], "data_0", *v, "data_" + std::to_string(i)));
        KILN_ASSIGN_OR_RETURN(shape, Broadcast(ctx, shape, v->shape, BroadcastDims::kAtRunTime));
      } else {
        shape = v->shape;
      }
      ins.push_back(v);
    }
    ctx.SetOutput(0, ins[0]->dtype, shape);
    if (fn && IntLike(ins[0]->dtype))
      Propagate(ctx, ins, shape, [&](const std::vector<Sym>& v) -> std::optional<Sym> {
        Sym r = v[0];
        for (size_t i = 1; i < v.size(); ++i) r = fn(r, v[i]);
        return r;
      });
    return Status::Ok();
  };
}

MetaFn Unary(unsigned set, std::function<std::optional<Sym>(const Sym&)> fn = nullptr,
             std::function<Status(const AttrMap&)> check_attrs = nullptr) {
  return [=](MetaContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
    KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
    KILN_RETURN_IF_ERROR(CheckDType(*x, "X", set));
    if (check_attrs) KILN_RETURN_IF_ERROR(check_attrs(ctx.attrs()));
    ctx.SetOutput(0, x->dtype, x->shape);
    if (fn && IntLike(x->dtype))
      Propagate(ctx, {x}, x->shape, [&](const std::vector<Sym>& v) { return fn(v[0]); });
    return Status::Ok();
  };
}

// 1 where x >= 0, -1 where x < 0 (a constant where x's range decides it): x * Sign(x) is |x|.
Sym Sign(const Sym& x) { return Sym(1) - Sym(2) * Lt(x, Sym(0)); }

std::optional<Sym> DivSym(const Sym& a, const Sym& b) {
  if (a.is_const() && b.is_const()) {
    int64_t x = *a.value(), y = *b.value();
    if (y == 0 || (x == INT64_MIN && y == -1)) return std::nullopt;
    return Sym(x / y);  // truncation, as ONNX integer Div
  }
  if (a.lo() >= 0 && b.lo() >= 0) return DivExact(a, b);
  // Truncation: |a| floordiv |b|, negated where exactly one of them is negative.
  const Sym sa = Sign(a), sb = Sign(b);
  return sa * sb * FloorDiv(a * sa, b * sb);
}

std::optional<Sym> ModSym(const Sym& a, const Sym& b, bool fmod) {
  if (a.is_const() && b.is_const()) {
    int64_t x = *a.value(), y = *b.value();
    if (y == 0 || (x == INT64_MIN && y == -1)) return std::nullopt;
    int64_t m = x % y;  // sign of the dividend (fmod)
    if (!fmod && m != 0 && ((m < 0) != (y < 0))) m += y;  // sign of the divisor
    return Sym(m);
  }
  if (b.lo() >= 0 && (!fmod || a.lo() >= 0)) return Mod(a, b);
  // fmod takes the dividend's sign: |a| mod |b|, negated for a negative a. Mod takes the
  // divisor's: for a negative b, -((-a) mod (-b)).
  const Sym sb = Sign(b);
  if (fmod) {
    const Sym sa = Sign(a);
    return sa * Mod(a * sa, b * sb);
  }
  return sb * Mod(a * sb, b * sb);
}

Status ModMeta(MetaContext& ctx) {
  int64_t fmod = ctx.attrs().GetInt("fmod", 0);
  if (fmod != 0 && fmod != 1)
    return InvalidArgument("attribute fmod: expected 0 or 1, found " + std::to_string(fmod));
  const Value* a = ctx.input(0);
  if (a && IsFloat(a->dtype) && fmod != 1)
    return InvalidArgument("attribute fmod: expected 1 for float inputs, found 0 (dtype " +
                           DTypeStr(a->dtype) + ")");
  return Binary(kNumeric, true, DType::kUndefined,
                [fmod](const Sym& x, const Sym& y) { return ModSym(x, y, fmod == 1); })(ctx);
}

// Wraps a constant to the range of an integer dtype (two's complement), as a cast does.
int64_t WrapTo(int64_t v, DType to) {
  switch (to) {
    case DType::kInt8: return static_cast<int8_t>(v);
    case DType::kUInt8: return static_cast<uint8_t>(v);
    case DType::kInt16: return static_cast<int16_t>(v);
    case DType::kUInt16: return static_cast<uint16_t>(v);
    case DType::kInt32: return static_cast<int32_t>(v);
    case DType::kUInt32: return static_cast<uint32_t>(v);
    default: return v;  // int64; uint64 values above INT64_MAX are not tracked exactly
  }
}

// Elements of `in` cast to `to`, when `to` is an integer or bool type.
std::optional<std::vector<Sym>> CastElements(const Value& in, DType to) {
  if (!IntLike(to)) return std::nullopt;
  std::vector<Sym> out;
  if (IntLike(in.dtype)) {
    auto e = Elements(in);
    if (!e) return std::nullopt;
    for (const Sym& s : *e) {
      if (to == DType::kBool) out.push_back(s.is_const() ? Sym(*s.value() != 0 ? 1 : 0) : Sym(1) - Eq(s, 0));
      else if (s.is_const()) out.push_back(Sym(WrapTo(*s.value(), to)));
      else out.push_back(s);  // narrowing a symbolic value is assumed not to overflow
    }
    return out;
  }
  if (IsFloat(in.dtype) && in.data) {
    auto f = FloatElements(in);
    if (!f) return std::nullopt;
    // Float to integer saturates at the target's range and NaN gives 0 (docs/semantics.md),
    // as the Cast kernel does; uint64 values of 2^63 and above are left to the kernel.
    const int bits = static_cast<int>(DTypeSize(to)) * 8;
    const bool is_signed = IsSignedInt(to);
    const double lo = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;            // exact in a double
    const double above = is_signed || bits == 64 ? std::ldexp(1.0, 63 < bits - 1 ? 63 : bits - 1)
                                                 : std::ldexp(1.0, bits);      // max + 1
    for (double d : *f) {
      if (to == DType::kBool) { out.push_back(Sym(d != 0.0 ? 1 : 0)); continue; }
      if (std::isnan(d)) { out.push_back(Sym(0)); continue; }
      const double t = std::trunc(d);
      if (t >= above) {
        if (to == DType::kUInt64) return std::nullopt;
        out.push_back(Sym(to == DType::kInt64 ? std::numeric_limits<int64_t>::max()
                                              : static_cast<int64_t>(above) - 1));
      } else {
        out.push_back(Sym(static_cast<int64_t>(t <= lo ? lo : t)));
      }
    }
    return out;
  }
  return std::nullopt;
}

Status CastTo(MetaContext& ctx, const Value& x, DType to) {
  ctx.SetOutput(0, to, x.shape);
  if (auto e = CastElements(x, to)) SetSym(ctx, 0, std::move(*e));
  return Status::Ok();
}

Status CastMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  const Attr* to = ctx.attrs().Find("to");
  if (!to || to->kind != Attr::Kind::kInt)
    return InvalidArgument("attribute to: expected an int (a dtype), found it missing");
  if (!IsValidDType(static_cast<int32_t>(to->i)))
    return Unimplemented("attribute to: expected a supported dtype, found " + std::to_string(to->i) +
                         " (" + DTypeStr(static_cast<DType>(to->i)) + ")");
  KILN_RETURN_IF_ERROR(CheckDType(*x, "input", kAll));
  return CastTo(ctx, *x, static_cast<DType>(to->i));
}

Status CastLikeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Value* like, Need(ctx, 1, "target_type"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "input", kAll));
  KILN_RETURN_IF_ERROR(CheckDType(*like, "target_type", kAll));
  return CastTo(ctx, *x, like->dtype);
}

Status IdentityMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  ctx.SetOutput(0, x->dtype, x->shape);
  if (auto e = Elements(*x)) SetSym(ctx, 0, std::move(*e));
  return Status::Ok();
}

Status ClipMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "input", kNumeric));
  const char* names[] = {"", "min", "max"};
  for (int i = 1; i <= 2; ++i) {
    const Value* b = ctx.input(i);
    if (!b) continue;
    KILN_RETURN_IF_ERROR(CheckSameDType(*x, "input", *b, names[i]));
    auto n = StaticCount(*b);
    if (b->rank() > 1 || (n && *n != 1))
      return InvalidArgument(std::string("input ") + names[i] + ": expected a scalar, found shape " +
                             Str(b->shape));
  }
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

Status WhereMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* c, Need(ctx, 0, "condition"));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 1, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* y, Need(ctx, 2, "Y"));
  if (c->dtype != DType::kBool)
    return InvalidArgument("input condition: expected a bool tensor, found " + DTypeStr(c->dtype));
  KILN_RETURN_IF_ERROR(CheckSameDType(*x, "X", *y, "Y"));
  KILN_ASSIGN_OR_RETURN(SymShape s, Broadcast(ctx, c->shape, x->shape, BroadcastDims::kAtRunTime));
  KILN_ASSIGN_OR_RETURN(s, Broadcast(ctx, s, y->shape, BroadcastDims::kAtRunTime));
  ctx.SetOutput(0, x->dtype, s);
  if (IntLike(x->dtype))
    Propagate(ctx, {c, x, y}, s, [](const std::vector<Sym>& v) -> std::optional<Sym> {
      if (v[0].is_const()) return *v[0].value() != 0 ? v[1] : v[2];
      return v[0] * v[1] + (Sym(1) - v[0]) * v[2];  // the condition is 0 or 1
    });
  return Status::Ok();
}

// PRelu: slope broadcasts (unidirectionally) to X; the output has X's shape.
Status PReluMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* slope, Need(ctx, 1, "slope"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kFloats | kSignedInts));
  KILN_RETURN_IF_ERROR(CheckSameDType(*x, "X", *slope, "slope"));
  // Unidirectional: slope's dims, aligned at the end, are X's or 1, decided at each call where
  // either is a symbol (the kernels broadcast from the run-time shapes).
  bool to_x = slope->shape.size() <= x->shape.size();
  for (size_t i = 0; to_x && i < slope->shape.size(); ++i) {
    const Sym& s = slope->shape[slope->shape.size() - 1 - i];
    const Sym& d = x->shape[x->shape.size() - 1 - i];
    if (s.Same(d) || (s.is_const() && *s.value() == 1)) continue;
    if (s.is_const() && d.is_const()) to_x = false;
    else AddGuard(ctx, Lt(0, Eq(s, d) + Eq(s, 1)));
  }
  if (!to_x)
    return InvalidArgument("input slope: expected a shape that broadcasts to X's " + Str(x->shape) +
                           " (unidirectionally: the output has X's shape), found " + Str(slope->shape));
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

// Dropout in inference: the output is the input; the optional mask is all true.
Status DropoutMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "data", kFloats));
  if (const Value* t = ctx.input(2)) {
    auto e = Elements(*t);
    if (!e || e->size() != 1 || !(*e)[0].is_const())
      return Unimplemented("training_mode input not known at compile time (inference only)");
    if (*(*e)[0].value() != 0)
      return Unimplemented("training_mode=true: expected inference mode, found training");
  }
  ctx.SetOutput(0, x->dtype, x->shape);
  ctx.SetOutput(1, DType::kBool, x->shape);
  if (auto e = Elements(*x)) SetSym(ctx, 0, std::move(*e));
  return Status::Ok();
}

Status CheckGelu(const AttrMap& a) {
  std::string_view m = a.GetString("approximate", "none");
  if (m != "none" && m != "tanh")
    return InvalidArgument("attribute approximate: expected \"none\" or \"tanh\", found \"" +
                           std::string(m) + "\"");
  return Status::Ok();
}

}  // namespace

void RegisterElementwiseOps(std::vector<OpDef>& ops) {
  const DType same = DType::kUndefined;
  Def(ops, "Add", Binary(kNumeric, true, same, [](const Sym& a, const Sym& b) { return AddS(a, b); }));
  Def(ops, "Sub", Binary(kNumeric, true, same, [](const Sym& a, const Sym& b) { return SubS(a, b); }));
  Def(ops, "Mul", Binary(kNumeric, true, same, [](const Sym& a, const Sym& b) { return a * b; }));
  Def(ops, "Div", Binary(kNumeric, true, same, DivSym));
  Def(ops, "Pow", Binary(kNumeric, false, same));
  Def(ops, "Mod", ModMeta);
  Def(ops, "Max", Variadic(kNumeric, [](const Sym& a, const Sym& b) { return Max(a, b); }));
  Def(ops, "Min", Variadic(kNumeric, [](const Sym& a, const Sym& b) { return Min(a, b); }));
  Def(ops, "Sum", Variadic(kFloats));
  Def(ops, "Mean", Variadic(kFloats));

  const DType b = DType::kBool;
  Def(ops, "Equal", Binary(kAll, true, b, [](const Sym& x, const Sym& y) { return Eq(x, y); }));
  Def(ops, "Less", Binary(kNumeric, true, b, [](const Sym& x, const Sym& y) { return Lt(x, y); }));
  Def(ops, "Greater", Binary(kNumeric, true, b, [](const Sym& x, const Sym& y) { return Lt(y, x); }));
  Def(ops, "LessOrEqual", Binary(kNumeric, true, b, [](const Sym& x, const Sym& y) { return Sym(1) - Lt(y, x); }));
  Def(ops, "GreaterOrEqual", Binary(kNumeric, true, b, [](const Sym& x, const Sym& y) { return Sym(1) - Lt(x, y); }));
  Def(ops, "And", Binary(kBools, true, b, [](const Sym& x, const Sym& y) { return x * y; }));
  Def(ops, "Or", Binary(kBools, true, b, [](const Sym& x, const Sym& y) { return Max(x, y); }));
  Def(ops, "Xor", Binary(kBools, true, b, [](const Sym& x, const Sym& y) { return Sym(1) - Eq(x, y); }));
  Def(ops, "Not", Unary(kBools, [](const Sym& x) { return Sym(1) - x; }));

  Def(ops, "Relu", Unary(kFloats | kSignedInts, [](const Sym& x) { return Max(x, 0); }));
  Def(ops, "Neg", Unary(kFloats | kSignedInts, [](const Sym& x) { return Sym(0) - x; }));
  Def(ops, "Abs", Unary(kNumeric));
  Def(ops, "Sign", Unary(kNumeric));
  for (const char* op : {"LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal",
                         "Floor", "Ceil", "Round", "Erf", "Sin", "Cos", "Softplus", "Elu", "Selu",
                         "HardSigmoid", "HardSwish", "Acos", "Asin", "Atan", "Cosh", "Sinh", "Tan",
                         "Softsign", "Mish", "ThresholdedRelu", "Celu"})
    Def(ops, op, Unary(kFloats));
  Def(ops, "Gelu", Unary(kFloats, nullptr, CheckGelu));
  Def(ops, "Clip", ClipMeta);
  Def(ops, "PRelu", PReluMeta);
  Def(ops, "Dropout", DropoutMeta);
  Def(ops, "Identity", IdentityMeta);
  Def(ops, "Cast", CastMeta);
  Def(ops, "CastLike", CastLikeMeta);
  Def(ops, "Where", WhereMeta);
}

}  // namespace kiln::ir
