#!/usr/bin/env python3
"""Fits the polynomial coefficients of compiler/codegen/cpu/llvm_math.cc (Kiln's own float32
math for native CPU code). Plain Python 3, no packages: each polynomial is a weighted
least-squares fit on Chebyshev nodes (Householder QR in a Chebyshev basis of the interval),
refined towards minimax by Lawson's iteration (each node's weight is multiplied by its error),
then converted to monomial coefficients, rounded to float32, and the fit's maximum weighted
error is re-measured with the rounded coefficients. The reference values are Python's double
math.exp/expm1/log1p/erf/erfc/tanh, far more accurate than float32 needs.

Run: python3 tests/compiler/codegen/cpu/fit_math_coefficients.py
It prints, per polynomial, the C++ initialiser pasted into llvm_math.cc and the error.
"""
import math
import struct


def f32(v):
    return struct.unpack('<f', struct.pack('<f', v))[0]


def lstsq(rows, rhs):
    """Least squares by Householder QR; rows: list of lists (m x n), m >= n."""
    a = [r[:] + [b] for r, b in zip(rows, rhs)]
    m, n = len(a), len(rows[0])
    for k in range(n):
        norm = math.sqrt(sum(a[i][k] ** 2 for i in range(k, m)))
        if a[k][k] > 0:
            norm = -norm
        v = [0.0] * m
        v[k] = a[k][k] - norm
        for i in range(k + 1, m):
            v[i] = a[i][k]
        vv = sum(x * x for x in v[k:])
        if vv == 0:
            continue
        for j in range(k, n + 1):
            s = sum(v[i] * a[i][j] for i in range(k, m)) * 2 / vv
            for i in range(k, m):
                a[i][j] -= s * v[i]
    c = [0.0] * n
    for k in reversed(range(n)):
        c[k] = (a[k][n] - sum(a[k][j] * c[j] for j in range(k + 1, n))) / a[k][k]
    return c


def cheb_to_monomial(cheb, lo, hi, center):
    """Chebyshev series on [lo, hi] (in u = (2x - lo - hi)/(hi - lo)) -> monomials in t = x - center."""
    # u = alpha * t + beta
    alpha = 2.0 / (hi - lo)
    beta = (2.0 * center - lo - hi) / (hi - lo)
    n = len(cheb)
    # T_k(u) as polynomials in t, built by the recurrence T_{k+1} = 2u T_k - T_{k-1}.
    tk_prev = [1.0] + [0.0] * (n - 1)
    tk = [beta, alpha] + [0.0] * (n - 2) if n > 1 else [1.0]
    out = [0.0] * n
    out = [x + cheb[0] * y for x, y in zip(out, tk_prev)]
    if n > 1:
        out = [x + cheb[1] * y for x, y in zip(out, tk)]
    for k in range(2, n):
        nxt = [0.0] * n
        for i in range(n):
            nxt[i] += 2 * beta * tk[i] - tk_prev[i]
            if i + 1 < n:
                nxt[i + 1] += 2 * alpha * tk[i]
        tk_prev, tk = tk, nxt
        out = [x + cheb[k] * y for x, y in zip(out, tk)]
    return out


def fit(name, g, w, lo, hi, degree, center=0.0, nodes=500, iters=15):
    """Near-minimax p(t) = sum c_k t^k, t = x - center, of `degree` for g on [lo, hi]: minimises
    max |w(x) (p(x - center) - g(x))| over Chebyshev nodes by Lawson's iteration (weighted least
    squares whose weights are multiplied by each node's error). Coefficients are rounded to
    float32 one at a time, lowest first, the others refitted each time to absorb the rounding.
    Prints the maximum weighted error with float32 coefficients, evaluated in double and in
    float32 Horner steps (one rounding per multiply and per add)."""
    xs = [0.5 * (lo + hi) + 0.5 * (hi - lo) * math.cos(math.pi * (i + 0.5) / nodes) for i in range(nodes)]
    scale = max(abs(lo - center), abs(hi - center))
    gv = [g(x) for x in xs]
    wv = [w(x) for x in xs]
    fixed = []
    for k in range(degree + 1):
        # Columns t^j / scale^j for the free j >= k; the fixed part is subtracted from g.
        cols = [[((x - center) / scale) ** j for j in range(k, degree + 1)] for x in xs]
        resid = [gv[i] - sum(c * (xs[i] - center) ** j for j, c in enumerate(fixed)) for i in range(nodes)]
        lw = [1.0] * nodes
        for _ in range(iters):
            rows = [[math.sqrt(lw[i]) * wv[i] * b for b in cols[i]] for i in range(nodes)]
            rhs = [math.sqrt(lw[i]) * wv[i] * resid[i] for i in range(nodes)]
            sol = lstsq(rows, rhs)
            err = [abs(wv[i] * (sum(c * b for c, b in zip(sol, cols[i])) - resid[i])) for i in range(nodes)]
            s = sum(lw[i] * err[i] for i in range(nodes))
            lw = [lw[i] * err[i] / s for i in range(nodes)]
        fixed.append(f32(sol[0] / scale ** k))
    mono = fixed
    worst = worst32 = 0.0
    for i in range(20001):
        x = lo + (hi - lo) * (i + 0.37) / 20001
        t = x - center
        p = p32 = 0.0
        t32 = f32(t)
        for c in reversed(mono):
            p = p * t + c
            p32 = f32(f32(p32 * t32) + c)
        worst = max(worst, abs(w(x) * (p - g(x))))
        worst32 = max(worst32, abs(w(x) * (p32 - g(x))))
    print(f'// {name}: degree {degree} on [{lo:.9g}, {hi:.9g}] in t = x - {center:g}, max weighted error '
          f'{worst:.3g} (2^{math.log2(worst):.1f}), {worst32:.3g} (2^{math.log2(worst32):.1f}) evaluated in float32')
    print('{' + ', '.join(f'{c:.9e}f' for c in mono) + '}')
    return mono


def main():
    ln2 = math.log(2)
    # exp(r) = 1 + r + r^2 q(r), |r| <= ln2/2 (a little more: the reduction rounds x/ln2);
    # error in exp relative: r^2 / exp(r) * |q - q*|.
    fit('exp q(r)', lambda r: (math.expm1(r) - r) / (r * r), lambda r: r * r / math.exp(r),
        -0.3536, 0.3536, 5)
    # log(1 + f) = f + f^2 q(f), f = m - 1, m in [sqrt(1/2), sqrt(2)); relative to log1p(f).
    fit('log q(f)', lambda f: (math.log1p(f) - f) / (f * f), lambda f: f * f / abs(math.log1p(f)),
        math.sqrt(0.5) - 1, math.sqrt(2) - 1, 8)
    # tanh(x) = x + x^3 p(x^2), |x| < 0.625; in t = x^2; relative to tanh(x) (~ x): weight t.
    fit('tanh p(t)', lambda t: (math.tanh(math.sqrt(t)) - math.sqrt(t)) / (t * math.sqrt(t)),
        lambda t: t, 0.0, 0.625 ** 2, 5)
    # erf(x) = x + x (c1 + x^2 p(x^2)), |x| < 0.875, c1 = 2/sqrt(pi) - 1 rounded to float32
    # (fixed first, so that the fit absorbs its rounding; as c1, not 1 + c1, its rounding error
    # is 8 times smaller); relative to erf(x) / x.
    c1 = f32(2 / math.sqrt(math.pi) - 1)
    print(f'// erf c1 = {c1:.9e}f')
    fit('erf p(t)', lambda t: (math.erf(math.sqrt(t)) / math.sqrt(t) - 1 - c1) / t,
        lambda t: t / (math.erf(math.sqrt(t)) / math.sqrt(t)), 0.0, 0.875 ** 2, 5)
    # erf(x) = 1 - exp(p(x - 2) - x^2), 0.875 <= x <= 4 (p is log(erfc(x)) + x^2, which varies
    # slowly, so float32 Horner steps lose little); error relative to erf: erfc / erf (floored
    # at 1e-4 so that the far end, where erfc is below float32's resolution of 1, stays sane).
    fit('erfc p(x - 2)', lambda x: math.log(math.erfc(x)) + x * x,
        lambda x: max(math.erfc(x) / math.erf(x), 1e-4), 0.875, 4.0, 10, center=2.0)


if __name__ == '__main__':
    main()
