"""How many solves MagArea needs when each solve also gives dMag/dt's own derivatives: Hermite
rules of higher order on ``hermite_log``'s stretched scales, true error against a reference.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_derivative_order.py   # writes the CSV below
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_derivative_order.py --holdout
    python benchmarks/bench_derivative_order.py --max-n 300 --out other.csv

A Cholesky factor of Z_t gives the weighting w = Z_t⁻¹1 and with it Mag(t) and
Mag'(t) = wᵀ(D ∘ Z_t)w, which ``hermite_log`` uses. The same factor gives every further
derivative for two triangular solves and a few products with (−D)^j ∘ Z_t each, O(n²) against
the factorisation's O(n³): differentiating Z_t w = 1 k times, Z_t w⁽ᵏ⁾ = −Σ_{j=1..k} C(k, j)
((−D)^j ∘ Z_t) w⁽ᵏ⁻ʲ⁾, and Mag⁽ᵏ⁾ = 1ᵀw⁽ᵏ⁾. A rule that interpolates values and ``order`` − 1
derivatives at each scale needs fewer scales for the same degree. This study measures how many.

For the clouds of ``bench_quadrature_rule.py`` (the same points and seeds; ``--holdout`` its
out-of-sample clouds), at each target: the convergence scale (the engine's search), the
reference MagArea (``chebyshev`` at rtol 1e-10), and for each rule of :data:`RULES` (``N`` points,
``order`` conditions at each): the integral of the polynomial that takes g(s) = Mag(t(s)) t'(s)
and its first ``order`` − 1 derivatives in s at the ``N`` Chebyshev–Lobatto points of s
(``hermite_log``'s stretch t(s) and rate α; at s = 0 the value alone, Mag(0) = 1), its true
relative error and the relative error estimate of ``hermite_log`` (t_cut times the last four
Chebyshev coefficients' absolute values). ``15x2`` is ``hermite_log``'s first stage. Solves:
``N`` − 2 (t = 0 is known, t_cut is the search's last scale). The derivatives come from a float64
Cholesky factor written here (``mag_derivatives``), not from the engine, which gives Mag and
Mag' only.

Counts and errors are deterministic; no times are recorded. Output:
``benchmarks/results/derivative_order.csv`` (``--holdout``: ``derivative_order_holdout.csv``),
``# key: value`` header lines naming machine, versions, command and date, and beside it
``*_summary.csv``: per rule, the solves, the cases whose true error and whose estimate are
within rtol 1e-6, and the worst true error.
"""

from __future__ import annotations

import math

import bench_quadrature_rule as study
import numpy as np
import scipy.linalg
from numpy.polynomial import chebyshev
from record import load_average, write_csv

from diversity_core.magnitude import MagnitudeSpace, _chebyshev

# (points N, conditions per point): value, then derivatives up to order - 1.
RULES = ((15, 2), (10, 3), (11, 3), (8, 4), (9, 4))
RTOL = study.RTOL
OUT = study.OUT.with_name("derivative_order.csv")
HOLDOUT_OUT = OUT.with_name("derivative_order_holdout.csv")
DEFAULT_MAX_N = 2000  # the clouds of 3,000 to 10,000 points take minutes per factorisation set


def mag_derivatives(D: np.ndarray, t: float, order: int) -> np.ndarray:
    """Mag(t) and its first ``order`` - 1 derivatives in t, from one float64 Cholesky factor of
    Z_t = exp(-tD) (see the module's docstring)."""
    Z = np.exp(-t * D)
    factor = scipy.linalg.cho_factor(Z, lower=True)
    weights = [scipy.linalg.cho_solve(factor, np.ones(len(D)))]
    powers = [Z]  # (-D)^j ∘ Z
    for k in range(1, order):
        powers.append(-D * powers[-1])
        rhs = -sum(math.comb(k, j) * (powers[j] @ weights[k - j]) for j in range(1, k + 1))
        weights.append(scipy.linalg.cho_solve(factor, rhs))
    return np.array([w.sum() for w in weights])


def stretched_derivatives(f: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """g = f(t(s)) t'(s) and its s-derivatives up to len(f) - 1 (at most 3), from f and its
    t-derivatives ``f`` and t(s)'s s-derivatives ``dt`` = (t', t'', t''', t'''') (Faà di
    Bruno)."""
    t1, t2, t3, t4 = dt
    g = [f[0] * t1]
    if len(f) > 1:
        g.append(f[1] * t1**2 + f[0] * t2)
    if len(f) > 2:
        g.append(f[2] * t1**3 + 3 * f[1] * t1 * t2 + f[0] * t3)
    if len(f) > 3:
        g.append(f[3] * t1**4 + 6 * f[2] * t1**2 * t2 + f[1] * (3 * t2**2 + 4 * t1 * t3)
                 + f[0] * t4)
    return np.array(g)


def hermite_basis(x: np.ndarray, order: int) -> np.ndarray:
    """The value at every point of ``x`` (ascending, in [-1, 1]) and derivatives 1 to
    ``order`` - 1 at all but the first -> the Chebyshev coefficients of the interpolant."""
    degree = len(x) * order - (order - 1) - 1
    unit = np.eye(degree + 1)
    blocks = [chebyshev.chebvander(x, degree)]
    for k in range(1, order):
        blocks.append(np.stack([chebyshev.chebval(x[1:], chebyshev.chebder(unit[i], k))
                                for i in range(degree + 1)], axis=1))
    return np.linalg.inv(np.vstack(blocks))


def rule(D: np.ndarray, t_cut: float, alpha: float, points: int, order: int):
    """(integral, estimated absolute error) of one rule of :data:`RULES` on [0, t_cut]."""
    s = _chebyshev._cc_nodes(0.0, 1.0, points - 1)
    scale = t_cut / math.expm1(alpha)
    t = scale * np.expm1(alpha * s)
    t[0], t[-1] = 0.0, t_cut
    dt = np.array([scale * alpha**k * np.exp(alpha * s) for k in range(1, 5)])  # (4, points)
    g = np.empty((order, points))
    g[0, 0] = dt[0, 0]  # Mag(0) t'(0)
    for i in range(1, points):
        g[:, i] = stretched_derivatives(mag_derivatives(D, float(t[i]), order), dt[:, i])
    # In x = 2s - 1 on [-1, 1]: d/dx = d/ds / 2.
    data = np.concatenate([g[0]] + [g[k, 1:] / 2.0**k for k in range(1, order)])
    coef = hermite_basis(2.0 * s - 1.0, order) @ data
    even = np.arange(0, len(coef), 2)
    estimate = 0.5 * np.sum(coef[even] * 2.0 / (1.0 - even.astype(float)**2))
    return float(estimate), float(np.abs(coef[-4:]).sum())


def name(points: int, order: int) -> str:
    return f"{points}x{order}"


COLUMNS = ["metric", "n", "d", "kind", "target", "t_conv", "alpha"] + [
    f"{name(*r)}_{what}" for r in RULES for what in ("solves", "rel_error", "rel_estimate")]


def measure(D: np.ndarray, target: float) -> dict:
    space = MagnitudeSpace(D)
    t_conv = space.convergence_scale(target)
    reference = space.mag_area(t_conv, method="chebyshev", rtol=study.REFERENCE_RTOL)
    alpha = _chebyshev._stretch_rate(t_conv * space.diameter)
    row = {"t_conv": t_conv, "alpha": alpha}
    for points, order in RULES:
        estimate, error = rule(D, t_conv, alpha, points, order)
        key = name(points, order)
        row[f"{key}_solves"] = points - 2
        row[f"{key}_rel_error"] = float(f"{abs(estimate - reference) / reference:.3g}")
        row[f"{key}_rel_estimate"] = float(f"{error / reference:.3g}")
    return row


def summary(rows: list[dict]) -> list[dict]:
    """Per rule: its solves, the cases, those whose true error and whose estimate are within
    :data:`RTOL`, and the worst true error."""
    out = []
    for points, order in RULES:
        key = name(points, order)
        errors = [r[f"{key}_rel_error"] for r in rows]
        out.append({"rule": key, "solves": points - 2, "cases": len(rows),
                    "error_within_rtol": sum(e <= RTOL for e in errors),
                    "estimate_within_rtol": sum(r[f"{key}_rel_estimate"] <= RTOL
                                                for r in rows),
                    "worst_rel_error": max(errors)})
    return out


def main(argv=None) -> None:
    args, out, command = study.cloud_arguments(argv, __doc__.split("\n")[0],
                                               "bench_derivative_order.py", (OUT, HOLDOUT_OUT),
                                               max_n=DEFAULT_MAX_N)
    chosen = study.clouds(args.max_n, args.holdout)
    extra = (("rtol", f"{RTOL:g}; reference: chebyshev at rtol {study.REFERENCE_RTOL:g}"),
             ("clouds", ("bench_quadrature_rule.HOLDOUT" if args.holdout else
                         "bench_quadrature_rule.CLOUDS") + ", its seeds; sizes run: "
              + ", ".join(str(n) for n in sorted({c[2] for _, c in chosen}))))
    before = load_average()
    rows = study.cloud_rows(chosen, measure, COLUMNS)
    load = (before, load_average())
    write_csv(out, COLUMNS, rows, command=command, load=load, extra=extra)
    write_csv(out.with_name(out.stem + "_summary.csv"),
              ["rule", "solves", "cases", "error_within_rtol", "estimate_within_rtol",
               "worst_rel_error"], summary(rows), command=command, load=load, extra=extra)


if __name__ == "__main__":
    main()
