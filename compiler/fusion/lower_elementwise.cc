// Lowerings of the elementwise ops: arithmetic, comparisons and logic with broadcasting,
// the activations, Cast, Where, Clip, inference BatchNormalization, QuantizeLinear and
// DequantizeLinear (one scale and zero point, or one per index along the axis), and the generators
// ConstantOfShape and Range. Formulas follow the CPU kernels in runtime/kernels/unary.cc and
// elementwise.cc, so a fused region computes what the unfused ops compute.
#include <cmath>
#include <string>

#include "compiler/fusion/rules.h"

namespace kiln::fusion {
namespace {

using fused::Op;
using fused::ScalarType;

// Integer results narrower than int64 wrap at every op in the unfused graph; computing in
// int64 would keep the carries, so the result is narrowed back after each op that can
// overflow.
int32_t Wrap(ProgramBuilder& b, int32_t x, DType dtype) {
  if (b.TypeOf(x) != ScalarType::kI64 || dtype == DType::kInt64 || dtype == DType::kBool) return x;
  return b.Cast(x, dtype);
}

DType OutDType(LowerContext& ctx, const ir::Node& n) { return ctx.trace().value(n.outputs[0]).dtype; }

int32_t F(ProgramBuilder& b, double v, int32_t like) { return b.ConstF(v, b.TypeOf(like)); }

Result<int32_t> Arg(LowerContext& ctx, const ir::Node& n, int i, std::span<const int32_t> c) {
  return BroadcastInput(ctx, n, i, c);
}

template <Op kOp>
Result<int32_t> BinaryOp(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, 0, c));
  KILN_ASSIGN_OR_RETURN(int32_t y, Arg(ctx, n, 1, c));
  return Wrap(b, b.Binary(kOp, x, y), OutDType(ctx, n));
}

Result<int32_t> Mod(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, 0, c));
  KILN_ASSIGN_OR_RETURN(int32_t y, Arg(ctx, n, 1, c));
  const bool fmod = n.attrs.GetInt("fmod", 0) != 0;
  return b.Binary(fmod || b.TypeOf(x) != ScalarType::kI64 ? Op::kFmod : Op::kMod, x, y);
}

template <Op kOp, bool kSwap = false>
Result<int32_t> Compare(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, 0, c));
  KILN_ASSIGN_OR_RETURN(int32_t y, Arg(ctx, n, 1, c));
  return kSwap ? ctx.builder().Binary(kOp, y, x) : ctx.builder().Binary(kOp, x, y);
}

Result<int32_t> Pow(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, 0, c));
  KILN_ASSIGN_OR_RETURN(int32_t y, Arg(ctx, n, 1, c));
  if (b.TypeOf(x) == ScalarType::kI64) {
    const int32_t r = b.Binary(Op::kPow, b.Convert(x, ScalarType::kF64), b.Convert(y, ScalarType::kF64));
    return b.Cast(r, OutDType(ctx, n));
  }
  const int32_t e = b.Convert(y, b.TypeOf(x));
  // A constant exponent of 2 or 3 (x^3: GPT-2's tanh GELU) is products (within 2 ulp of powf)
  // instead of exp(y log x) in double precision, which took 2 ns per element in native code.
  if (b.program().nodes[e].op == Op::kConst && b.program().nodes[e].f == 2.0) return b.Binary(Op::kMul, x, x);
  if (b.program().nodes[e].op == Op::kConst && b.program().nodes[e].f == 3.0)
    return b.Binary(Op::kMul, b.Binary(Op::kMul, x, x), x);
  return b.Binary(Op::kPow, x, e);
}

// Variadic Max/Min/Sum/Mean: a pairwise fold over the broadcast inputs.
template <Op kOp, bool kMean = false>
Result<int32_t> Variadic(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  int32_t acc = -1;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, i, c));
    acc = acc < 0 ? x : Wrap(b, b.Binary(kOp, acc, x), OutDType(ctx, n));
  }
  if (kMean) {
    if (b.TypeOf(acc) == ScalarType::kI64) return Unimplemented("Mean of integers has no fused form");
    acc = b.Binary(Op::kDiv, acc, F(b, static_cast<double>(n.inputs.size()), acc));
  }
  return acc;
}

Result<int32_t> Where(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  KILN_ASSIGN_OR_RETURN(int32_t cond, Arg(ctx, n, 0, c));
  KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, 1, c));
  KILN_ASSIGN_OR_RETURN(int32_t y, Arg(ctx, n, 2, c));
  return ctx.builder().Select(cond, x, y);
}

Result<int32_t> PRelu(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, Arg(ctx, n, 0, c));
  KILN_ASSIGN_OR_RETURN(int32_t slope, Arg(ctx, n, 1, c));
  const int32_t zero = b.TypeOf(x) == ScalarType::kI64 ? b.ConstI(0) : F(b, 0, x);
  return b.Select(b.Binary(Op::kLt, x, zero), Wrap(b, b.Binary(Op::kMul, x, slope), OutDType(ctx, n)), x);
}

// Unary ops share one shape: f(x) of input 0 at the same coordinates.
using UnaryBody = int32_t (*)(ProgramBuilder& b, int32_t x, const AttrMap& attrs, DType dtype);

template <UnaryBody kBody, bool kFloatOnly = true>
Result<int32_t> UnaryOp(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  if (kFloatOnly && b.TypeOf(x) == ScalarType::kI64)
    return Unimplemented(n.op + " of " + std::string(DTypeName(OutDType(ctx, n))) + " has no fused form");
  return kBody(b, x, n.attrs, OutDType(ctx, n));
}

template <Op kOp>
int32_t Simple(ProgramBuilder& b, int32_t x, const AttrMap&, DType dtype) {
  return Wrap(b, b.Unary(kOp, x), dtype);
}

int32_t Zero(ProgramBuilder& b, int32_t x) { return b.TypeOf(x) == ScalarType::kI64 ? b.ConstI(0) : F(b, 0, x); }

int32_t Relu(ProgramBuilder& b, int32_t x, const AttrMap&, DType) { return b.Binary(Op::kMax, x, Zero(b, x)); }
int32_t Sigmoid(ProgramBuilder& b, int32_t x, const AttrMap&, DType) { return b.Unary(Op::kSigmoid, x); }

int32_t LeakyRelu(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  const int32_t alpha = F(b, a.GetFloat("alpha", 0.01f), x);
  return b.Select(b.Binary(Op::kLe, F(b, 0, x), x), x, b.Binary(Op::kMul, alpha, x));
}
int32_t ThresholdedRelu(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  return b.Select(b.Binary(Op::kLt, F(b, a.GetFloat("alpha", 1.0f), x), x), x, F(b, 0, x));
}
int32_t ExpM1(ProgramBuilder& b, int32_t x) { return b.Binary(Op::kSub, b.Unary(Op::kExp, x), F(b, 1, x)); }
int32_t Elu(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  const int32_t alpha = F(b, a.GetFloat("alpha", 1.0f), x);
  return b.Select(b.Binary(Op::kLe, F(b, 0, x), x), x, b.Binary(Op::kMul, alpha, ExpM1(b, x)));
}
int32_t Celu(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  const int32_t alpha = F(b, a.GetFloat("alpha", 1.0f), x);
  const int32_t neg = b.Binary(Op::kMul, alpha, ExpM1(b, b.Binary(Op::kDiv, x, alpha)));
  return b.Binary(Op::kAdd, b.Binary(Op::kMax, x, F(b, 0, x)), b.Binary(Op::kMin, neg, F(b, 0, x)));
}
int32_t Selu(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  const int32_t alpha = F(b, a.GetFloat("alpha", 1.67326319217681884765625f), x);
  const int32_t gamma = F(b, a.GetFloat("gamma", 1.05070102214813232421875f), x);
  const int32_t neg = b.Binary(Op::kSub, b.Binary(Op::kMul, alpha, b.Unary(Op::kExp, x)), alpha);
  return b.Binary(Op::kMul, gamma, b.Select(b.Binary(Op::kLt, F(b, 0, x), x), x, neg));
}
int32_t Gelu(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  const int32_t half_x = b.Binary(Op::kMul, F(b, 0.5, x), x);
  int32_t inner;
  if (a.GetString("approximate", "none") == "tanh") {
    const int32_t cube = b.Binary(Op::kMul, b.Binary(Op::kMul, x, x), x);
    const int32_t poly = b.Binary(Op::kAdd, x, b.Binary(Op::kMul, F(b, 0.044715, x), cube));
    inner = b.Unary(Op::kTanh, b.Binary(Op::kMul, F(b, 0.7978845608028654, x), poly));
  } else {
    inner = b.Unary(Op::kErf, b.Binary(Op::kMul, x, F(b, 0.7071067811865476, x)));
  }
  return b.Binary(Op::kMul, half_x, b.Binary(Op::kAdd, F(b, 1, x), inner));
}
int32_t HardSigmoid(ProgramBuilder& b, int32_t x, const AttrMap& a, DType) {
  const int32_t lin = b.Binary(Op::kAdd, b.Binary(Op::kMul, F(b, a.GetFloat("alpha", 0.2f), x), x),
                               F(b, a.GetFloat("beta", 0.5f), x));
  return b.Clamp(lin, F(b, 0, x), F(b, 1, x));
}
int32_t HardSwish(ProgramBuilder& b, int32_t x, const AttrMap&, DType) {
  const int32_t lin = b.Binary(Op::kAdd, b.Binary(Op::kDiv, x, F(b, 6, x)), F(b, 0.5, x));
  return b.Binary(Op::kMul, x, b.Clamp(lin, F(b, 0, x), F(b, 1, x)));
}
// log(1 + t) for t in [0, 1] to a few ulps, as the CPU kernels' std::log1p: log(1 + t) alone
// loses the digits of a small t that 1 + t rounds away (softplus(-12) = 6.1e-6 came out 1% off).
// With u = 1 + t rounded, log(u) * t / (u - 1) corrects for that rounding (Goldberg, "What every
// computer scientist should know about floating-point arithmetic", theorem 4); u == 1: t.
int32_t Log1pOf(ProgramBuilder& b, int32_t t) {
  const int32_t u = b.Binary(Op::kAdd, F(b, 1, t), t);
  const int32_t corrected = b.Binary(Op::kMul, b.Unary(Op::kLog, u), b.Binary(Op::kDiv, t, b.Binary(Op::kSub, u, F(b, 1, t))));
  return b.Select(b.Binary(Op::kEq, u, F(b, 1, t)), t, corrected);
}
// log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
int32_t SoftplusOf(ProgramBuilder& b, int32_t x) {
  const int32_t t = b.Unary(Op::kExp, b.Unary(Op::kNeg, b.Unary(Op::kAbs, x)));
  return b.Binary(Op::kAdd, b.Binary(Op::kMax, x, F(b, 0, x)), Log1pOf(b, t));
}
int32_t Softplus(ProgramBuilder& b, int32_t x, const AttrMap&, DType) { return SoftplusOf(b, x); }
int32_t Softsign(ProgramBuilder& b, int32_t x, const AttrMap&, DType) {
  return b.Binary(Op::kDiv, x, b.Binary(Op::kAdd, F(b, 1, x), b.Unary(Op::kAbs, x)));
}
int32_t Mish(ProgramBuilder& b, int32_t x, const AttrMap&, DType) {
  return b.Binary(Op::kMul, x, b.Unary(Op::kTanh, SoftplusOf(b, x)));
}
int32_t Not(ProgramBuilder& b, int32_t x, const AttrMap&, DType) { return b.Unary(Op::kNot, x); }

Result<int32_t> Clip(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  for (int i = 1; i <= 2; ++i) {
    if (i >= static_cast<int>(n.inputs.size()) || n.inputs[i] == ir::kNoValue) continue;
    // min and max are scalars (rank 0 or one element).
    const ir::Value& v = ctx.trace().value(n.inputs[i]);
    std::vector<int32_t> zeros(v.shape.size(), b.ConstI(0));
    KILN_ASSIGN_OR_RETURN(int32_t bound, ctx.ValueAt(n.inputs[i], zeros));
    x = b.Binary(i == 1 ? Op::kMax : Op::kMin, x, bound);
  }
  return x;
}

Result<int32_t> Cast(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  fused::ScalarType t;
  const DType to = OutDType(ctx, n);
  if (!fused::ComputeTypeOf(to, &t)) return Unimplemented("Cast to " + std::string(DTypeName(to)) + " has no fused form");
  return ctx.builder().Cast(x, to);
}

// Inference BatchNormalization: per-channel (axis 1) scale and shift.
Result<int32_t> BatchNorm(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != ir::kNoValue) return Unimplemented("BatchNormalization in training mode has no fused form");
  if (c.size() < 2) return Unimplemented("BatchNormalization of a rank < 2 input has no fused form");
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  const int32_t ch[1] = {c[1]};
  KILN_ASSIGN_OR_RETURN(int32_t scale, ctx.ValueAt(n.inputs[1], ch));
  KILN_ASSIGN_OR_RETURN(int32_t bias, ctx.ValueAt(n.inputs[2], ch));
  KILN_ASSIGN_OR_RETURN(int32_t mean, ctx.ValueAt(n.inputs[3], ch));
  KILN_ASSIGN_OR_RETURN(int32_t var, ctx.ValueAt(n.inputs[4], ch));
  const ScalarType t = b.TypeOf(x);
  scale = b.Convert(scale, t), bias = b.Convert(bias, t), mean = b.Convert(mean, t), var = b.Convert(var, t);
  const int32_t eps = F(b, n.attrs.GetFloat("epsilon", 1e-5f), x);
  const int32_t inv = b.Binary(Op::kDiv, scale, b.Unary(Op::kSqrt, b.Binary(Op::kAdd, var, eps)));
  return b.Binary(Op::kAdd, b.Binary(Op::kMul, b.Binary(Op::kSub, x, mean), inv), bias);
}

Result<int32_t> ConstantOfShape(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t>) {
  ProgramBuilder& b = ctx.builder();
  const DType dt = OutDType(ctx, n);
  ScalarType t;
  if (!fused::ComputeTypeOf(dt, &t)) return Unimplemented("ConstantOfShape of this dtype has no fused form");
  if (n.attrs.Has("value_float")) {
    const int32_t v = b.ConstF(n.attrs.GetFloat("value_float", 0.0f), ScalarType::kF64);
    return b.Cast(v, dt);
  }
  return b.Cast(b.ConstI(n.attrs.GetInt("value_int", 0)), dt);
}

Result<int32_t> Range(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  auto scalar = [&](int i) -> Result<int32_t> {
    const ir::Value& v = ctx.trace().value(n.inputs[i]);
    std::vector<int32_t> zeros(v.shape.size(), b.ConstI(0));
    return ctx.ValueAt(n.inputs[i], zeros);
  };
  KILN_ASSIGN_OR_RETURN(int32_t start, scalar(0));
  KILN_ASSIGN_OR_RETURN(int32_t delta, scalar(2));
  const int32_t i = b.Convert(c[0], b.TypeOf(start));
  return Wrap(b, b.Binary(Op::kAdd, start, b.Binary(Op::kMul, i, delta)), OutDType(ctx, n));
}

Result<int32_t> CastLike(LowerContext& ctx, const ir::Node& n, int o, std::span<const int32_t> c) {
  return Cast(ctx, n, o, c);
}

// QuantizeLinear's and DequantizeLinear's scale (input 1) or zero point (input 2) for the
// element at `c`: one for the tensor, or one per index along `axis`. Blocked parameters have
// no fused form.
Result<int32_t> QuantParam(LowerContext& ctx, const ir::Node& n, int i, std::span<const int32_t> c) {
  if (n.attrs.GetInt("block_size", 0) != 0) return Unimplemented("blocked quantization has no fused form");
  const ir::Value& p = ctx.trace().value(n.inputs[static_cast<size_t>(i)]);
  if (p.rank() == 0) return ctx.ValueAt(n.inputs[static_cast<size_t>(i)], {});
  const int rank = ctx.trace().value(n.inputs[0]).rank();
  int64_t axis = n.attrs.GetInt("axis", 1);
  if (axis < 0) axis += rank;
  const int32_t zero = ctx.builder().ConstI(0);
  if (p.rank() == 1 && p.shape[0].value() == 1) return ctx.ValueAt(n.inputs[static_cast<size_t>(i)], {&zero, 1});
  if (p.rank() != 1 || axis < 0 || axis >= rank) return Unimplemented("these quantization parameters have no fused form");
  return ctx.ValueAt(n.inputs[static_cast<size_t>(i)], c.subspan(static_cast<size_t>(axis), 1));
}

bool HasInput(const ir::Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != ir::kNoValue; }

// As runtime/kernels/quantize.cc: (float32(x) - float32(zero point)) * scale, in float32.
Result<int32_t> DequantizeLinear(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  if (ctx.trace().value(n.inputs[1]).dtype != DType::kFloat32)
    return Unimplemented("DequantizeLinear with a scale other than float32 has no fused form");
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  if (b.TypeOf(x) != ScalarType::kI64) return Unimplemented("DequantizeLinear of floats has no fused form");
  int32_t d = b.Convert(x, ScalarType::kF32);
  if (HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(int32_t zp, QuantParam(ctx, n, 2, c));
    d = b.Binary(Op::kSub, d, b.Convert(zp, ScalarType::kF32));
  }
  KILN_ASSIGN_OR_RETURN(int32_t scale, QuantParam(ctx, n, 1, c));
  return b.Binary(Op::kMul, d, scale);
}

// As runtime/kernels/quantize.cc: x / scale in float32, rounded half to even, plus the zero
// point, saturated to the output's range; NaN gives its lowest value.
Result<int32_t> QuantizeLinear(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  const DType out = OutDType(ctx, n);
  double lo = 0, hi = 0;
  switch (out) {
    case DType::kInt8: lo = -128, hi = 127; break;
    case DType::kUInt8: lo = 0, hi = 255; break;
    case DType::kInt16: lo = -32768, hi = 32767; break;
    case DType::kUInt16: lo = 0, hi = 65535; break;
    default: return Unimplemented("QuantizeLinear to " + std::string(DTypeName(out)) + " has no fused form");
  }
  if (ctx.trace().value(n.inputs[0]).dtype != DType::kFloat32 || ctx.trace().value(n.inputs[1]).dtype != DType::kFloat32)
    return Unimplemented("QuantizeLinear of other than float32 by a float32 scale has no fused form");
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  KILN_ASSIGN_OR_RETURN(int32_t scale, QuantParam(ctx, n, 1, c));
  const int32_t v = b.Binary(Op::kDiv, x, scale);
  int32_t r = b.Unary(Op::kRound, v);
  if (HasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(int32_t zp, QuantParam(ctx, n, 2, c));
    r = b.Binary(Op::kAdd, r, b.Convert(zp, ScalarType::kF32));
  }
  // |r| beyond 2^24 rounds in float32 where the kernel adds in double: both saturate there.
  r = b.Binary(Op::kMin, b.Binary(Op::kMax, r, F(b, lo, r)), F(b, hi, r));
  return b.Cast(b.Select(b.Unary(Op::kIsNaN, v), F(b, lo, r), r), out);
}

constexpr Lowering kLowerings[] = {
    {"Abs", UnaryOp<Simple<Op::kAbs>, false>},
    {"Acos", UnaryOp<Simple<Op::kAcos>>},
    {"Add", BinaryOp<Op::kAdd>},
    {"And", BinaryOp<Op::kAnd>},
    {"Asin", UnaryOp<Simple<Op::kAsin>>},
    {"Atan", UnaryOp<Simple<Op::kAtan>>},
    {"BatchNormalization", BatchNorm},
    {"Cast", Cast},
    {"CastLike", CastLike},
    {"Ceil", UnaryOp<Simple<Op::kCeil>>},
    {"Celu", UnaryOp<Celu>},
    {"Clip", Clip},
    {"ConstantOfShape", ConstantOfShape},
    {"Cos", UnaryOp<Simple<Op::kCos>>},
    {"Cosh", UnaryOp<Simple<Op::kCosh>>},
    {"DequantizeLinear", DequantizeLinear},
    {"Div", BinaryOp<Op::kDiv>},
    {"Elu", UnaryOp<Elu>},
    {"Equal", Compare<Op::kEq>},
    {"Erf", UnaryOp<Simple<Op::kErf>>},
    {"Exp", UnaryOp<Simple<Op::kExp>>},
    {"Floor", UnaryOp<Simple<Op::kFloor>>},
    {"Gelu", UnaryOp<Gelu>},
    {"Greater", Compare<Op::kLt, true>},
    {"GreaterOrEqual", Compare<Op::kLe, true>},
    {"HardSigmoid", UnaryOp<HardSigmoid>},
    {"HardSwish", UnaryOp<HardSwish>},
    {"LeakyRelu", UnaryOp<LeakyRelu>},
    {"Less", Compare<Op::kLt>},
    {"LessOrEqual", Compare<Op::kLe>},
    {"Log", UnaryOp<Simple<Op::kLog>>},
    {"Max", Variadic<Op::kMax>},
    {"Mean", Variadic<Op::kAdd, true>},
    {"Min", Variadic<Op::kMin>},
    {"Mish", UnaryOp<Mish>},
    {"Mod", Mod},
    {"Mul", BinaryOp<Op::kMul>},
    {"Neg", UnaryOp<Simple<Op::kNeg>, false>},
    {"Not", UnaryOp<Not, false>},
    {"Or", BinaryOp<Op::kOr>},
    {"PRelu", PRelu},
    {"Pow", Pow},
    {"QuantizeLinear", QuantizeLinear},
    {"Range", Range},
    {"Reciprocal", UnaryOp<Simple<Op::kReciprocal>>},
    {"Relu", UnaryOp<Relu, false>},
    {"Round", UnaryOp<Simple<Op::kRound>>},
    {"Selu", UnaryOp<Selu>},
    {"Sigmoid", UnaryOp<Sigmoid>},
    {"Sign", UnaryOp<Simple<Op::kSign>, false>},
    {"Sin", UnaryOp<Simple<Op::kSin>>},
    {"Sinh", UnaryOp<Simple<Op::kSinh>>},
    {"Softplus", UnaryOp<Softplus>},
    {"Softsign", UnaryOp<Softsign>},
    {"Sqrt", UnaryOp<Simple<Op::kSqrt>>},
    {"Sub", BinaryOp<Op::kSub>},
    {"Sum", Variadic<Op::kAdd>},
    {"Tan", UnaryOp<Simple<Op::kTan>>},
    {"Tanh", UnaryOp<Simple<Op::kTanh>>},
    {"ThresholdedRelu", UnaryOp<ThresholdedRelu>},
    {"Where", Where},
    {"Xor", BinaryOp<Op::kXor>},
};

}  // namespace

std::span<const Lowering> ElementwiseLowerings() { return kLowerings; }

}  // namespace kiln::fusion
