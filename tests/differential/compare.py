"""How two results of one graph are compared (docs/semantics.md, "How paths are compared").

A graph whose ops are all `exact` or `rounded` (ops.py) must give the same bits on every path:
integers and bools exactly, floats with every NaN equal to every other NaN and -0 equal to +0.
Any other graph is compared within a tolerance of its output dtype: the same NaN and infinity
positions, and finite values within rtol * (|want| + max|want|) + 4 eps, the tensor's largest finite
magnitude standing for the scale its sums and functions worked at, and 4 eps (units in the last place
of 1) for a result that cancels terms of order 1."""
import numpy as np

RTOL = {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 1e-4, np.dtype(np.float16): 1e-2}


def describe(a, idx):
    return f"{a[idx]!r}" if a.ndim == 0 else f"{a[idx]!r} at {list(np.unravel_index(idx, a.shape))}"


def compare(want, got, exact, half_intermediates=False):
    """None when `got` matches `want`, else one line saying where and how it differs.

    half_intermediates: the two results come from paths that store a float16 intermediate
    differently (an unfused op rounds each one to float16, a fused kernel keeps it in float32
    registers up to its one store, docs/semantics.md), so an overflow to infinity or a rounding
    can happen on one and not the other: positions where either is not finite are skipped and
    the rest compare within float16's tolerance."""
    want, got = np.asarray(want), np.asarray(got)
    if want.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.shape != got.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    w, g = want.reshape(-1), got.reshape(-1)
    if w.size == 0:
        return None
    if w.dtype.kind != "f":
        bad = np.nonzero(w != g)[0]
        if bad.size:
            i = int(bad[0])
            return f"{bad.size} of {w.size} elements differ; first: got {describe(g, i)}, expected {w[i]!r}"
        return None
    if half_intermediates:
        keep = np.isfinite(w.astype(np.float64)) & np.isfinite(g.astype(np.float64))
        w, g = w[keep], g[keep]
        exact = False
        if w.size == 0:
            return None
    wn, gn = np.isnan(w), np.isnan(g)
    bad = np.nonzero(wn != gn)[0]
    if bad.size:
        i = int(bad[0])
        return f"NaN differs in {bad.size} of {w.size} elements; first: got {describe(g, i)}, expected {w[i]!r}"
    if exact:
        bad = np.nonzero(~wn & (w != g))[0]
        if bad.size:
            i = int(bad[0])
            return (f"{bad.size} of {w.size} elements differ (bit-exact op chain); first: got {describe(g, i)},"
                    f" expected {w[i]!r}")
        return None
    winf, ginf = np.isinf(w), np.isinf(g)
    # Within a tolerance, a sum or a function that lands within a factor 8 of the largest
    # finite value may overflow on one path and not on another (a wider accumulator).
    near_max = np.abs(np.where(winf, g, w).astype(np.float64)) > np.finfo(w.dtype).max / 8
    bad = np.nonzero((winf | ginf) & (w != g) & ~near_max)[0]
    if bad.size:
        i = int(bad[0])
        return f"infinity differs in {bad.size} of {w.size} elements; first: got {describe(g, i)}, expected {w[i]!r}"
    fin = ~(wn | winf | ginf)
    if not fin.any():
        return None
    w64, g64 = w[fin].astype(np.float64), g[fin].astype(np.float64)
    rtol = RTOL[np.dtype(np.float16)] if half_intermediates else RTOL.get(w.dtype, 1e-2)
    scale = float(np.max(np.abs(w64)))
    err = np.abs(g64 - w64)
    # An absolute floor of 4 units in the last place of 1: a value far below its computation's
    # natural scale (a sigmoid's 5e-18 against a library's 0; LogSumExp of a LogSoftmax row,
    # log(1) = 0, as 2.7e-8 or 0) is rounding, not a disagreement.
    eps = float(np.finfo(np.float16 if half_intermediates else w.dtype).eps)
    tol = rtol * (np.abs(w64) + scale) + 4 * eps
    bad = np.nonzero(err > tol)[0]
    if bad.size:
        i = int(bad[np.argmax((err / tol)[bad])])
        return (f"{bad.size} of {w.size} elements beyond rtol {rtol:g} (scale {scale:.3g}); worst: got {g64[i]!r},"
                f" expected {w64[i]!r}")
    return None
