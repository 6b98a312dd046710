// Kiln's own float32 math as branch-free LLVM IR (see llvm_math.h for the method and the errors).
// Polynomial coefficients: tests/compiler/codegen/cpu/fit_math_coefficients.py, whose output
// lines are quoted above each table.
#include "compiler/codegen/cpu/llvm_math.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace kiln::codegen::cpu {
namespace {

using fused::Op;

// Builds IR on values of one shape: scalars, or vectors of `lanes` elements.
class Emitter {
 public:
  Emitter(LLVMModuleRef m, LLVMBuilderRef b, LLVMTypeRef shape) : m_(m), b_(b), ctx_(LLVMGetModuleContext(m)) {
    lanes_ = LLVMGetTypeKind(shape) == LLVMVectorTypeKind ? LLVMGetVectorSize(shape) : 0;
    f32_ = Shape(LLVMFloatTypeInContext(ctx_));
    f64_ = Shape(LLVMDoubleTypeInContext(ctx_));
    i32_ = Shape(LLVMInt32TypeInContext(ctx_));
    i64_ = Shape(LLVMInt64TypeInContext(ctx_));
  }

  LLVMTypeRef Shape(LLVMTypeRef elem) const { return lanes_ ? LLVMVectorType(elem, lanes_) : elem; }
  LLVMTypeRef f32() const { return f32_; }
  LLVMTypeRef f64() const { return f64_; }
  LLVMTypeRef i32() const { return i32_; }
  LLVMTypeRef i64() const { return i64_; }

  LLVMValueRef Splat(LLVMValueRef c) const {
    if (lanes_ == 0) return c;
    std::vector<LLVMValueRef> v(lanes_, c);
    return LLVMConstVector(v.data(), lanes_);
  }
  // A constant of shaped type t (float, double or integer elements).
  LLVMValueRef C(LLVMTypeRef t, double v) const {
    LLVMTypeRef e = lanes_ ? LLVMGetElementType(t) : t;
    return Splat(LLVMConstReal(e, v));
  }
  LLVMValueRef I(LLVMTypeRef t, long long v) const {
    LLVMTypeRef e = lanes_ ? LLVMGetElementType(t) : t;
    return Splat(LLVMConstInt(e, static_cast<unsigned long long>(v), 1));
  }

  LLVMValueRef Add(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFAdd(b_, a, c, ""); }
  LLVMValueRef Sub(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFSub(b_, a, c, ""); }
  LLVMValueRef Mul(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFMul(b_, a, c, ""); }
  LLVMValueRef Div(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFDiv(b_, a, c, ""); }
  LLVMValueRef Neg(LLVMValueRef a) { return LLVMBuildFNeg(b_, a, ""); }
  LLVMValueRef Cmp(LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildFCmp(b_, p, a, c, ""); }
  LLVMValueRef Sel(LLVMValueRef cond, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildSelect(b_, cond, a, c, ""); }
  LLVMValueRef And(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildAnd(b_, a, c, ""); }
  LLVMValueRef Or(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildOr(b_, a, c, ""); }
  LLVMValueRef Not(LLVMValueRef a) { return LLVMBuildNot(b_, a, ""); }
  LLVMValueRef IAdd(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildAdd(b_, a, c, ""); }
  LLVMValueRef ISub(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildSub(b_, a, c, ""); }
  LLVMValueRef Shl(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildShl(b_, a, c, ""); }
  LLVMValueRef AShr(LLVMValueRef a, LLVMValueRef c) { return LLVMBuildAShr(b_, a, c, ""); }
  LLVMValueRef ICmp(LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef c) { return LLVMBuildICmp(b_, p, a, c, ""); }
  LLVMValueRef Cast(LLVMOpcode op, LLVMValueRef a, LLVMTypeRef t) { return LLVMBuildCast(b_, op, a, t, ""); }

  // Bits of a float (i32) or double (i64) value, and back.
  LLVMValueRef Bits(LLVMValueRef a) {
    return LLVMBuildBitCast(b_, a, LLVMTypeOf(a) == f32_ ? i32_ : i64_, "");
  }
  LLVMValueRef FromBits(LLVMValueRef a) {
    return LLVMBuildBitCast(b_, a, LLVMTypeOf(a) == i32_ ? f32_ : f64_, "");
  }

  LLVMValueRef Intrinsic(const char* name, std::initializer_list<LLVMValueRef> args) {
    LLVMTypeRef t = LLVMTypeOf(*args.begin());
    const unsigned id = LLVMLookupIntrinsicID(name, std::strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m_, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(ctx_, id, &t, 1);
    std::vector<LLVMValueRef> a(args);
    return LLVMBuildCall2(b_, fty, fn, a.data(), static_cast<unsigned>(a.size()), "");
  }
  // a * c + d, fused or not as the target likes (llvm.fmuladd never becomes a call).
  LLVMValueRef Fma(LLVMValueRef a, LLVMValueRef c, LLVMValueRef d) { return Intrinsic("llvm.fmuladd", {a, c, d}); }
  LLVMValueRef Abs(LLVMValueRef a) { return Intrinsic("llvm.fabs", {a}); }
  LLVMValueRef CopySign(LLVMValueRef mag, LLVMValueRef sign) { return Intrinsic("llvm.copysign", {mag, sign}); }

  // c[0] + t (c[1] + t (c[2] + ...)), constants of t's type.
  LLVMValueRef Horner(LLVMValueRef t, std::initializer_list<double> c) {
    LLVMTypeRef ty = LLVMTypeOf(t);
    const double* begin = c.begin();
    const double* it = c.end() - 1;
    LLVMValueRef p = C(ty, *it);
    while (it != begin) {
      --it;
      p = Fma(p, t, C(ty, *it));
    }
    return p;
  }

  // --- float32 functions -------------------------------------------------------------------

  // exp(x): Cody-Waite x = n ln2 + r, exp(r) = 1 + r + r^2 q(r), times 2^n in two exact steps.
  LLVMValueRef Exp(LLVMValueRef x) {
    // Past 89 every result overflows, below -104 every result underflows to 0 (NaN passes).
    x = Sel(Cmp(LLVMRealOGT, x, C(f32_, 89.0)), C(f32_, 89.0), x);
    x = Sel(Cmp(LLVMRealOLT, x, C(f32_, -104.0)), C(f32_, -104.0), x);
    const double kMagic = 12582912.0;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
    LLVMValueRef t = Fma(x, C(f32_, 1.44269504088896340736), C(f32_, kMagic));
    LLVMValueRef nf = Sub(t, C(f32_, kMagic));
    LLVMValueRef n = ISub(Bits(t), I(i32_, 0x4B400000));  // the bits of 1.5 * 2^23
    // ln2 = 0.693145751953125 (15 significant bits: n * it is exact for |n| <= 512) + 1.4286068e-6.
    LLVMValueRef r = Fma(nf, C(f32_, -0.693145751953125), x);
    r = Fma(nf, C(f32_, -1.428606765330187045e-06), r);
    // exp q(r): degree 5 on [-0.3536, 0.3536], max weighted error 1.19e-10 (2^-33.0),
    // 3.17e-09 (2^-28.2) evaluated in float32
    LLVMValueRef q = Horner(r, {5.000000000e-01, 1.666666567e-01, 4.166644439e-02, 8.333558217e-03,
                                1.393710962e-03, 1.975403720e-04});
    LLVMValueRef p = Add(Fma(Mul(r, r), q, r), C(f32_, 1.0));
    // n in [-150, 128]: 2^(n >> 1) and 2^(n - (n >> 1)) are both normal, and p * the first exact.
    LLVMValueRef n1 = AShr(n, I(i32_, 1));
    LLVMValueRef n2 = ISub(n, n1);
    LLVMValueRef s1 = FromBits(Shl(IAdd(n1, I(i32_, 127)), I(i32_, 23)));
    LLVMValueRef s2 = FromBits(Shl(IAdd(n2, I(i32_, 127)), I(i32_, 23)));
    return Mul(Mul(p, s1), s2);
  }

  // log(x): x = 2^e m, m in [sqrt(1/2), sqrt(2)), log(m) = f + f^2 q(f), f = m - 1.
  LLVMValueRef Log(LLVMValueRef x) {
    LLVMValueRef den = Cmp(LLVMRealOLT, x, C(f32_, 0x1p-126));
    LLVMValueRef xs = Sel(den, Mul(x, C(f32_, 0x1p23)), x);
    LLVMValueRef eadj = Sel(den, I(i32_, -23), I(i32_, 0));
    const long long kSqrtHalf = 0x3F3504F3;  // bits of sqrt(1/2) rounded to float
    LLVMValueRef ix = ISub(Bits(xs), I(i32_, kSqrtHalf));
    LLVMValueRef e = IAdd(AShr(ix, I(i32_, 23)), eadj);
    LLVMValueRef m = FromBits(IAdd(And(ix, I(i32_, 0x7FFFFF)), I(i32_, kSqrtHalf)));
    LLVMValueRef f = Sub(m, C(f32_, 1.0));  // exact
    // log q(f): degree 8 on [-0.292893219, 0.414213562], max weighted error 4.2e-09 (2^-27.8),
    // 1.55e-08 (2^-25.9) evaluated in float32
    LLVMValueRef q = Horner(f, {-4.999998808e-01, 3.333332539e-01, -2.500160038e-01, 2.000200003e-01,
                                -1.660876274e-01, 1.418121904e-01, -1.324468851e-01, 1.290849894e-01,
                                -7.622861862e-02});
    LLVMValueRef lg = Fma(Mul(f, f), q, f);
    LLVMValueRef ef = Cast(LLVMSIToFP, e, f32_);
    LLVMValueRef r = Fma(ef, C(f32_, 0.693145751953125), Fma(ef, C(f32_, 1.428606765330187045e-06), lg));
    r = Sel(Cmp(LLVMRealOEQ, x, C(f32_, INFINITY)), x, r);
    r = Sel(Cmp(LLVMRealOLT, x, C(f32_, 0.0)), C(f32_, NAN), r);
    r = Sel(Cmp(LLVMRealOEQ, x, C(f32_, 0.0)), C(f32_, -INFINITY), r);
    return Sel(Cmp(LLVMRealUNO, x, x), x, r);
  }

  LLVMValueRef Sigmoid(LLVMValueRef x) {
    LLVMValueRef e = Exp(Neg(Abs(x)));  // in [0, 1]
    LLVMValueRef num = Sel(Cmp(LLVMRealOLT, x, C(f32_, 0.0)), e, C(f32_, 1.0));
    return Div(num, Add(C(f32_, 1.0), e));
  }

  LLVMValueRef Tanh(LLVMValueRef x) {
    LLVMValueRef a = Abs(x);
    LLVMValueRef t = Mul(x, x);
    // tanh p(t): degree 5 on [0, 0.390625], max weighted error 1.61e-10 (2^-32.5),
    // 7.23e-09 (2^-27.0) evaluated in float32
    LLVMValueRef p = Horner(t, {-3.333333135e-01, 1.333322227e-01, -5.394846201e-02, 2.170874923e-02,
                                -8.195086382e-03, 2.157635754e-03});
    LLVMValueRef small = Fma(Mul(x, t), p, x);
    LLVMValueRef e = Exp(Add(a, a));
    LLVMValueRef big = Sub(C(f32_, 1.0), Div(C(f32_, 2.0), Add(e, C(f32_, 1.0))));
    // tanh has x's sign, -0 included (the polynomial gives +0 for -0).
    return CopySign(Sel(Cmp(LLVMRealOLT, a, C(f32_, 0.625)), small, big), x);
  }

  LLVMValueRef Erf(LLVMValueRef x) {
    LLVMValueRef a = Abs(x);
    LLVMValueRef t = Mul(x, x);
    // erf c1 = 1.283791661e-01f; erf p(t): degree 5 on [0, 0.765625], max weighted error
    // 8.6e-10 (2^-30.1), 1.94e-08 (2^-25.6) evaluated in float32
    LLVMValueRef p = Horner(t, {-3.761262894e-01, 1.128362268e-01, -2.685535140e-02, 5.190855823e-03,
                                -8.024667040e-04, 7.856312732e-05});
    LLVMValueRef small = Fma(x, Fma(t, p, C(f32_, 1.283791661e-01)), x);  // x + x (2/sqrt(pi) - 1 + ...)
    // erfc p(x - 2): degree 10 on [0.875, 4], max weighted error 1.19e-10 (2^-33.0),
    // 2.3e-08 (2^-25.4) evaluated in float32
    LLVMValueRef q = Horner(Sub(a, C(f32_, 2.0)),
                            {-1.364941239e+00, -4.181607068e-01, 7.624869794e-02, -1.646720432e-02,
                             3.569418797e-03, -7.296969998e-04, 1.379783644e-04, -2.192228385e-05,
                             6.250687079e-07, 5.317136811e-07, 1.080726975e-08});
    LLVMValueRef big = Sub(C(f32_, 1.0), Exp(Fma(Neg(a), a, q)));
    big = Sel(Cmp(LLVMRealOGE, a, C(f32_, 4.0)), C(f32_, 1.0), big);
    return Sel(Cmp(LLVMRealOLT, a, C(f32_, 0.875)), small, CopySign(big, x));
  }

  // --- double helpers for pow --------------------------------------------------------------

  // log(d) for d >= 0 (d == 0: -inf, d == inf: inf, NaN: NaN), relative error ~1e-15.
  LLVMValueRef LogD(LLVMValueRef d) {
    const long long kSqrtHalf = 0x3FE6A09E667F3BCDll;  // bits of sqrt(1/2) rounded to double
    LLVMValueRef ix = ISub(Bits(d), I(i64_, kSqrtHalf));
    LLVMValueRef e = AShr(ix, I(i64_, 52));
    LLVMValueRef m = FromBits(IAdd(And(ix, I(i64_, 0x000FFFFFFFFFFFFFll)), I(i64_, kSqrtHalf)));
    LLVMValueRef f = Sub(m, C(f64_, 1.0));
    LLVMValueRef s = Div(f, Add(f, C(f64_, 2.0)));  // |s| <= 0.1716
    LLVMValueRef z = Mul(s, s);
    // log(1 + f) = 2 atanh(s) = 2 s (1 + z/3 + z^2/5 + ...); z^9/19 < 1e-15.
    LLVMValueRef series = Horner(z, {1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11, 1.0 / 13,
                                     1.0 / 15, 1.0 / 17, 1.0 / 19});
    LLVMValueRef l = Fma(Cast(LLVMSIToFP, e, f64_), C(f64_, 0.6931471805599453094), Mul(Add(s, s), series));
    l = Sel(Cmp(LLVMRealOEQ, d, C(f64_, 0.0)), C(f64_, -INFINITY), l);
    l = Sel(Cmp(LLVMRealOEQ, d, C(f64_, INFINITY)), d, l);
    return Sel(Cmp(LLVMRealUNO, d, d), d, l);
  }

  // exp(t) in double, relative error ~1e-15; |t| > 200 clamped (the float result is 0 or inf).
  LLVMValueRef ExpD(LLVMValueRef t) {
    t = Sel(Cmp(LLVMRealOGT, t, C(f64_, 200.0)), C(f64_, 200.0), t);
    t = Sel(Cmp(LLVMRealOLT, t, C(f64_, -200.0)), C(f64_, -200.0), t);
    const double kMagic = 6755399441055744.0;  // 1.5 * 2^52
    LLVMValueRef k = Fma(t, C(f64_, 1.4426950408889634074), C(f64_, kMagic));
    LLVMValueRef nd = Sub(k, C(f64_, kMagic));
    LLVMValueRef n = ISub(Bits(k), I(i64_, 0x4338000000000000ll));
    // ln2 = 0.693147182464599609375 (ln2 rounded to float: n * it is exact) + the rest.
    const double kLn2Hi = 0.693147182464599609375;
    LLVMValueRef r = Fma(nd, C(f64_, -kLn2Hi), t);
    r = Fma(nd, C(f64_, -(0.6931471805599453094 - kLn2Hi)), r);
    // exp(r), |r| <= 0.35, Taylor to r^12 / 12! (the next term < 2e-16).
    std::vector<double> c(13);
    double fact = 1.0;
    for (int i = 0; i < 13; ++i) {
      if (i > 0) fact *= i;
      c[i] = 1.0 / fact;
    }
    LLVMValueRef p = C(f64_, c[12]);
    for (int i = 11; i >= 0; --i) p = Fma(p, r, C(f64_, c[i]));
    LLVMValueRef scale = FromBits(Shl(IAdd(n, I(i64_, 1023)), I(i64_, 52)));  // n in [-289, 289]
    return Mul(p, scale);
  }

  // C's powf(x, y).
  LLVMValueRef Pow(LLVMValueRef x, LLVMValueRef y) {
    LLVMValueRef ax = Abs(x), ay = Abs(y);
    LLVMValueRef l = LogD(Cast(LLVMFPExt, ax, f64_));
    LLVMValueRef mag = Cast(LLVMFPTrunc, ExpD(Mul(Cast(LLVMFPExt, y, f64_), l)), f32_);
    // y an integer, and odd: below 2^24 convert exactly; every float from 2^24 up is even.
    LLVMValueRef ysmall = Cmp(LLVMRealOLT, ay, C(f32_, 0x1p24));
    LLVMValueRef yc = Sel(ysmall, y, C(f32_, 0.0));
    LLVMValueRef yi = Cast(LLVMFPToSI, yc, i32_);
    LLVMValueRef exact = Cmp(LLVMRealOEQ, Cast(LLVMSIToFP, yi, f32_), yc);
    LLVMValueRef is_int = Or(Not(ysmall), exact);
    LLVMValueRef odd = And(And(ysmall, exact), ICmp(LLVMIntEQ, And(yi, I(i32_, 1)), I(i32_, 1)));
    LLVMValueRef x_sign = ICmp(LLVMIntSLT, Bits(x), I(i32_, 0));
    LLVMValueRef r = Sel(And(x_sign, odd), Neg(mag), mag);
    // A finite negative x to a finite non-integer power is NaN.
    LLVMValueRef neg_finite = And(Cmp(LLVMRealOLT, x, C(f32_, 0.0)), Cmp(LLVMRealOGT, x, C(f32_, -INFINITY)));
    r = Sel(And(neg_finite, Not(is_int)), C(f32_, NAN), r);
    // pow(-1, +-inf) = 1; pow(1, y) = 1 and pow(x, +-0) = 1, even for NaN.
    r = Sel(And(Cmp(LLVMRealOEQ, ax, C(f32_, 1.0)), Cmp(LLVMRealOEQ, ay, C(f32_, INFINITY))), C(f32_, 1.0), r);
    return Sel(Or(Cmp(LLVMRealOEQ, x, C(f32_, 1.0)), Cmp(LLVMRealOEQ, y, C(f32_, 0.0))), C(f32_, 1.0), r);
  }

  // Round half to even, floor, ceil, for float or double x (the shape's type of x).
  LLVMValueRef Rounding(Op op, LLVMValueRef x) {
    LLVMTypeRef t = LLVMTypeOf(x);
    const double big = t == f32_ ? 0x1p23 : 0x1p52;  // from here up every value is an integer
    LLVMValueRef a = Abs(x);
    LLVMValueRef r = CopySign(Sub(Add(a, C(t, big)), C(t, big)), x);
    if (op == Op::kFloor) r = CopySign(Sel(Cmp(LLVMRealOGT, r, x), Sub(r, C(t, 1.0)), r), x);
    if (op == Op::kCeil) r = CopySign(Sel(Cmp(LLVMRealOLT, r, x), Add(r, C(t, 1.0)), r), x);
    return Sel(Cmp(LLVMRealOLT, a, C(t, big)), r, x);
  }

 private:
  LLVMModuleRef m_;
  LLVMBuilderRef b_;
  LLVMContextRef ctx_;
  unsigned lanes_ = 0;
  LLVMTypeRef f32_, f64_, i32_, i64_;
};

}  // namespace

LLVMValueRef EmitMath(LLVMModuleRef m, LLVMBuilderRef b, fused::Op op, LLVMValueRef x, LLVMValueRef y) {
  if (x == nullptr) return nullptr;
  LLVMTypeRef t = LLVMTypeOf(x);
  const LLVMTypeKind kind = LLVMGetTypeKind(t);
  if (kind == LLVMScalableVectorTypeKind) return nullptr;
  const LLVMTypeKind elem = LLVMGetTypeKind(kind == LLVMVectorTypeKind ? LLVMGetElementType(t) : t);
  if (elem != LLVMFloatTypeKind && elem != LLVMDoubleTypeKind) return nullptr;
  Emitter e(m, b, t);
  switch (op) {
    case Op::kFloor:
    case Op::kCeil:
    case Op::kRound:
      return e.Rounding(op, x);
    default:
      break;
  }
  if (elem != LLVMFloatTypeKind) return nullptr;
  switch (op) {
    case Op::kExp: return e.Exp(x);
    case Op::kLog: return e.Log(x);
    case Op::kSigmoid: return e.Sigmoid(x);
    case Op::kTanh: return e.Tanh(x);
    case Op::kErf: return e.Erf(x);
    case Op::kPow: return y != nullptr && LLVMTypeOf(y) == t ? e.Pow(x, y) : nullptr;
    default: return nullptr;
  }
}

int MathMaxUlp(fused::Op op) {
  switch (op) {
    case Op::kExp: return 1;
    case Op::kLog: return 1;
    case Op::kSigmoid: return 2;
    case Op::kTanh: return 2;
    case Op::kErf: return 2;
    case Op::kPow: return 1;
    case Op::kFloor:
    case Op::kCeil:
    case Op::kRound: return 0;
    default: return -1;
  }
}

}  // namespace kiln::codegen::cpu
