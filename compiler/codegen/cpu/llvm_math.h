// Kiln's own float32 math for native CPU code (issue 42): the elementwise functions of a fused
// region's portable program, emitted as LLVM IR that calls nothing.
//
// Why Kiln's own polynomials: native code for a fused region must be self-contained, with no
// call, no import and no relocation to an external symbol (the artifact carries it as
// position-independent bytes, runtime/cpu/native/abi.h). LLVM lowers llvm.exp, llvm.log,
// llvm.sin, llvm.pow... to libm calls, and on baseline x86-64 (SSE2 only) even llvm.floor,
// llvm.ceil, llvm.rint, llvm.round and llvm.fma become calls (no SSE4.1 roundps, no FMA). A
// vector math library's shared object (SLEEF's) cannot be called from code with no imports, and
// Highway has no Erf or Pow. So every function here is straight-line, branch-free IR: fcmp +
// select, bitcasts and integer ops on the float bits, fadd/fmul/fdiv, llvm.fmuladd, llvm.fabs and
// llvm.copysign; no llvm.minnum/maxnum, no llvm.fma (a call without FMA hardware), no
// llvm.floor/ceil/rint/round. It works on a `float` value and on a `<N x float>` vector alike
// (the type comes from the operand), so LLVM's loop vectorizer can widen it.
//
// Method (coefficients: tests/compiler/codegen/cpu/fit_math_coefficients.py, which fits each
// polynomial near-minimax by Lawson's iteration on Chebyshev nodes, rounds the coefficients to
// float32 one at a time while refitting the rest, and prints each fit's error):
//   exp      Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2 (n by the 1.5 * 2^23 rounding
//            trick, ln2 split in a 16-bit head and a tail so n * head is exact), exp(r) =
//            1 + r + r^2 q(r) with q of degree 5, then two exact multiplications by 2^(n/2) and
//            2^(n - n/2) so results down to the denormals round once.
//   log      x = 2^e m, m in [sqrt(1/2), sqrt(2)) from the bits (denormals scaled by 2^23 first),
//            log(m) = f + f^2 q(f) with f = m - 1 exact and q of degree 8, plus e ln2 in two parts.
//   sigmoid  e = exp(-|x|) in (0, 1]: 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0 (no overflow;
//            denormal results for x < -87 stay exact to within the rounding).
//   tanh     |x| < 0.625: x + x^3 p(x^2), p of degree 5; above: 1 - 2 / (exp(2|x|) + 1); sign
//            restored with copysign.
//   erf      |x| < 0.875: x + x (c1 + x^2 p(x^2)), c1 = 2/sqrt(pi) - 1, p of degree 5; 0.875 <= |x| < 4:
//            1 - exp(q(|x| - 2) - x^2), q (log erfc(x) + x^2) of degree 10; above: 1.
//   pow      computed in double: log|x| (atanh series in s = f / (2 + f), s^2 < 0.03, 9 terms)
//            times y, exp of that (Cody-Waite with n rounded by 1.5 * 2^52, Taylor series to
//            r^12 / 12!) scaled by 2^n, rounded once to float32; the special cases of C's powf
//            by selects (pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN, pow(-1, +-inf) = 1,
//            negative x with an odd integer y negative, with a non-integer finite y NaN, zeros
//            and infinities as C99 F.10.4.4).
//   floor, ceil, round: (|x| + 2^23) - 2^23 rounds |x| < 2^23 to nearest even in the default
//            rounding mode (2^52 for double); floor/ceil correct it by one and take x's sign.
//            |x| >= 2^23, infinities and NaN are returned as they are.
// The IR relies on strict IEEE semantics: the caller must not put fast-math flags on it (the
// rounding trick and the Cody-Waite split are exactly what reassociation would undo), and the
// code assumes round-to-nearest with denormals honoured (no FTZ/DAZ).
//
// Accuracy (MathMaxUlp), in float32 ULPs against the correctly rounded result (libm in double,
// rounded to float), measured by tests/compiler/codegen/cpu/llvm_math_test.cc with llvm.fmuladd
// unfused (x86-64 baseline) and fused (x86-64-v3), scalar and <8 x float>: every special value,
// a strided sweep of all 2^32 bit patterns (stride 4099), dense sweeps of |x| < 20, and for pow
// every pair of specials and 2.4 million random pairs:
//   exp 1, log 1, sigmoid 2, tanh 2 (1 measured), erf 2 (1 measured), pow 1 (the double result
//   rounds the wrong way only when the exact result is a float halfway case: 88^7),
//   floor, ceil, round 0.
// exp, log and erf also measured 1 over all 2^32 inputs (KILN_MATH_EXHAUSTIVE=exp,log,erf).
// Special values follow libm: NaN in gives NaN out; +-inf and +-0 as C99 Annex F; results past
// the float range overflow to inf and below half the smallest denormal underflow to 0; denormal
// inputs and outputs are exact to the same bound.
#pragma once

#include <llvm-c/Core.h>

#include "runtime/fused/program.h"

namespace kiln::codegen::cpu {

// Emits op(x) (op(x, y) for kPow) for a float or <N x float> value x (y the same type) at the
// builder's position, as branch-free IR that calls nothing, and returns it. kFloor, kCeil and
// kRound also take double and <N x double>. Returns nullptr when op is not one it covers (or the
// type is not one it takes): the other ops are plain IR instructions the caller emits itself.
// Intrinsics it uses (llvm.fmuladd, llvm.fabs, llvm.copysign) are declared in m.
LLVMValueRef EmitMath(LLVMModuleRef m, LLVMBuilderRef b, fused::Op op, LLVMValueRef x, LLVMValueRef y = nullptr);

// The documented maximum error of EmitMath(op) on float32, in ULP against the correctly rounded
// result, over every float input (above); -1 for an op EmitMath does not cover.
int MathMaxUlp(fused::Op op);

}  // namespace kiln::codegen::cpu
