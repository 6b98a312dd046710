// Lowerings of the elementwise math in runtime/kernels/math.cc (Acosh/Asinh/Atanh, IsInf,
// IsNaN, Shrink, Swish) and of the coordinate masks Trilu and EyeLike. The bit ops are
// CPU-only: a fused program computes in int64 and has no bitwise nodes.
#include <cfloat>
#include <string>

#include "compiler/fusion/rules.h"

namespace kiln::fusion {
namespace {

using fused::Op;
using fused::ScalarType;

DType OutDType(LowerContext& ctx, const ir::Node& n) { return ctx.trace().value(n.outputs[0]).dtype; }

Result<int32_t> FloatInput(LowerContext& ctx, const ir::Node& n, std::span<const int32_t> c) {
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  if (ctx.builder().TypeOf(x) == ScalarType::kI64)
    return Unimplemented(n.op + " of " + std::string(DTypeName(ctx.trace().value(n.inputs[0]).dtype)) +
                         " has no fused form");
  return x;
}

int32_t One(ProgramBuilder& b) { return b.ConstF(1.0, ScalarType::kF64); }

// acosh(x) = log(x + sqrt(x^2 - 1))
int32_t AcoshOf(ProgramBuilder& b, int32_t x) {
  return b.Unary(Op::kLog, b.Binary(Op::kAdd, x, b.Unary(Op::kSqrt, b.Binary(Op::kSub, b.Binary(Op::kMul, x, x), One(b)))));
}
// Near 0 the log forms below lose every digit (log(1 + 1e-20) is log(1) = 0, where asinh and
// atanh of 1e-20 are 1e-20): there, the first two Taylor terms, whose next term is below
// 1e-13 of the result for |x| < 1e-3.
int32_t NearZero(ProgramBuilder& b, int32_t x, double cube_coeff, int32_t otherwise) {
  const int32_t small = b.Binary(Op::kLt, b.Unary(Op::kAbs, x), b.ConstF(1e-3, ScalarType::kF64));
  const int32_t x3 = b.Binary(Op::kMul, b.Binary(Op::kMul, x, x), x);
  const int32_t taylor = b.Binary(Op::kAdd, x, b.Binary(Op::kMul, b.ConstF(cube_coeff, ScalarType::kF64), x3));
  return b.Select(small, taylor, otherwise);
}
// asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)), odd so that large negative x does not cancel.
int32_t AsinhOf(ProgramBuilder& b, int32_t x) {
  const int32_t ax = b.Unary(Op::kAbs, x);
  const int32_t r = b.Unary(Op::kLog, b.Binary(Op::kAdd, ax, b.Unary(Op::kSqrt, b.Binary(Op::kAdd, b.Binary(Op::kMul, x, x), One(b)))));
  return NearZero(b, x, -1.0 / 6.0, b.Binary(Op::kMul, b.Unary(Op::kSign, x), r));
}
// atanh(x) = log((1 + x) / (1 - x)) / 2
int32_t AtanhOf(ProgramBuilder& b, int32_t x) {
  const int32_t q = b.Binary(Op::kDiv, b.Binary(Op::kAdd, One(b), x), b.Binary(Op::kSub, One(b), x));
  return NearZero(b, x, 1.0 / 3.0, b.Binary(Op::kMul, b.ConstF(0.5, ScalarType::kF64), b.Unary(Op::kLog, q)));
}

// The inverse hyperbolics by their log forms, in float64 so that float32 keeps its
// precision near 0 where log(1 + small) cancels.
template <int32_t (*kBody)(ProgramBuilder&, int32_t)>
Result<int32_t> Hyperbolic(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, FloatInput(ctx, n, c));
  return b.Convert(kBody(b, b.Convert(x, ScalarType::kF64)), b.TypeOf(x));
}

Result<int32_t> IsNaN(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  KILN_ASSIGN_OR_RETURN(int32_t x, FloatInput(ctx, n, c));
  return ctx.builder().Unary(Op::kIsNaN, x);
}

// |x| > the largest finite value holds only for infinities (a NaN compares false).
Result<int32_t> IsInf(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, FloatInput(ctx, n, c));
  const ScalarType t = b.TypeOf(x);
  const int32_t max = b.ConstF(t == ScalarType::kF32 ? FLT_MAX : DBL_MAX, t);
  const int32_t zero = b.ConstF(0.0, t);
  const bool neg = n.attrs.GetInt("detect_negative", 1) != 0, pos = n.attrs.GetInt("detect_positive", 1) != 0;
  int32_t inf = b.Binary(Op::kLt, max, b.Unary(Op::kAbs, x));
  if (!pos) inf = b.Binary(Op::kAnd, inf, b.Binary(Op::kLt, x, zero));
  if (!neg) inf = b.Binary(Op::kAnd, inf, b.Binary(Op::kLt, zero, x));
  return inf;
}

Result<int32_t> Shrink(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, FloatInput(ctx, n, c));
  const ScalarType t = b.TypeOf(x);
  const double lambd = n.attrs.GetFloat("lambd", 0.5f), bias = n.attrs.GetFloat("bias", 0.0f);
  const int32_t l = b.ConstF(lambd, t), bs = b.ConstF(bias, t);
  const int32_t above = b.Select(b.Binary(Op::kLt, l, x), b.Binary(Op::kSub, x, bs), b.ConstF(0.0, t));
  return b.Select(b.Binary(Op::kLt, x, b.ConstF(-lambd, t)), b.Binary(Op::kAdd, x, bs), above);
}

Result<int32_t> Swish(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t x, FloatInput(ctx, n, c));
  const int32_t alpha = b.ConstF(n.attrs.GetFloat("alpha", 1.0f), b.TypeOf(x));
  return b.Binary(Op::kMul, x, b.Unary(Op::kSigmoid, b.Binary(Op::kMul, alpha, x)));
}

// The diagonal offset k (input 1 of Trilu) as a kI64 node; 0 when absent.
Result<int32_t> DiagonalK(LowerContext& ctx, const ir::Node& n) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return ctx.builder().ConstI(0);
  const ir::Value& k = ctx.trace().value(n.inputs[1]);
  std::vector<int32_t> zeros(k.shape.size(), ctx.builder().ConstI(0));
  return ctx.ValueAt(n.inputs[1], zeros);
}

// Trilu keeps x where the column minus the row is >= k (upper) or <= k (lower).
Result<int32_t> Trilu(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  if (c.size() < 2) return Unimplemented("Trilu of a rank < 2 input has no fused form");
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  KILN_ASSIGN_OR_RETURN(int32_t k, DiagonalK(ctx, n));
  const int32_t d = b.Binary(Op::kSub, c[c.size() - 1], c[c.size() - 2]);
  const bool upper = n.attrs.GetInt("upper", 1) != 0;
  const int32_t keep = upper ? b.Binary(Op::kLe, k, d) : b.Binary(Op::kLe, d, k);
  const int32_t zero = b.TypeOf(x) == ScalarType::kI64 ? b.ConstI(0) : b.ConstF(0.0, b.TypeOf(x));
  return b.Select(keep, x, zero);
}

// EyeLike: 1 where the column minus the row is k.
Result<int32_t> EyeLike(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  const DType dt = OutDType(ctx, n);
  ScalarType t;
  if (!fused::ComputeTypeOf(dt, &t)) return Unimplemented("EyeLike to " + std::string(DTypeName(dt)) + " has no fused form");
  if (c.size() != 2) return Unimplemented("EyeLike of rank other than 2 has no fused form");
  const int32_t on = b.Binary(Op::kEq, b.Binary(Op::kSub, c[1], c[0]), b.ConstI(n.attrs.GetInt("k", 0)));
  return b.Cast(on, dt);
}

constexpr Lowering kLowerings[] = {
    {"Acosh", Hyperbolic<AcoshOf>},
    {"Asinh", Hyperbolic<AsinhOf>},
    {"Atanh", Hyperbolic<AtanhOf>},
    {"EyeLike", EyeLike},
    {"IsInf", IsInf},
    {"IsNaN", IsNaN},
    {"Shrink", Shrink},
    {"Swish", Swish},
    {"Trilu", Trilu},
};

}  // namespace

std::span<const Lowering> MathLowerings() { return kLowerings; }

}  // namespace kiln::fusion
