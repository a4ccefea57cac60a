"""The ``hermite_d2`` rule: MagArea from Mag, dMag/dt and d²Mag/dt² at few stretched scales.

A Cholesky factor of Z_t gives the weighting w = Z_t⁻¹1, and with it Mag(t) = 1ᵀw and
Mag'(t) = wᵀ(D ∘ Z_t)w, which ``hermite_log`` uses. Differentiating Z_t w = 1 twice gives
Mag''(t) = 2 vᵀZ_t⁻¹v − wᵀ(D² ∘ Z_t)w with v = (D ∘ Z_t)w: for two triangular solves with the
same factor and products with D ∘ Z_t and D² ∘ Z_t, O(n²) against the factorisation's O(n³). A
rule that interpolates three conditions at each scale reaches the degree of ``hermite_log``'s
15 scales on 11. Where conjugate gradients give w (dense spaces from 500 distinct points on),
Z_t⁻¹v is a second solve (``_solver._DenseSolver._inverse_form``), and the rule takes longer
than ``hermite_log`` (``benchmarks/results/hermite_d2_summary.csv``).

The stages, on the Chebyshev–Lobatto points of s under ``hermite_log``'s stretch t(s) and rate
α (``_chebyshev._log_stretch``, ``_chebyshev._stretch_rate``), each the exact integral of the
polynomial that takes every value and derivative known so far, with ``hermite_log``'s error
estimate (t_cut times the last four Chebyshev coefficients' absolute values), stopping at the
first within ``rtol``:

1. the 11 points of s (N = 10): at s = 0 the value (Mag(0) = 1), at t_cut the value and the
   first derivative (one solve, none where the convergence-scale search ended on a solve
   there), at the 9 others all three: 9 solves inside;
2. two of the 21 points (N = 20), at θ = π/4 and 3π/4 of s = (1 − cos θ) / 2: 11 solves;
3. the other eight of the 21: 19 solves;
4. Clenshaw–Curtis in s on 41 points (reusing the 21 values), then bisected panels, as
   ``hermite_log`` ends. Not a level of 81 points: where t_cut lies far beyond the rise of
   Mag (30 points on a line, t_cut = 30 t_conv, the rise within the first 0.001 of s) its
   estimate met rtol 1e-9 with a true error of 2.1e-8; bisection resolves the rise.

The second stage is small because where the first falls short its estimate is the pessimistic
one, not the area: on a Table 2-shaped batch (60 sets of 300 points, the median t_conv as
t_cut) the 11 points were within 2.3e-8 of the reference in every set while their estimate
exceeded 1e-6 in 27, by 70 to 11,000 times the true error; two more points brought every
estimate below 1e-6, still 2.7 times the true error or more.

``benchmarks/bench_derivative_order.py`` measured the first stage's rule (there with the
second derivative at t_cut too) on the quadrature study's clouds; ``benchmarks/
bench_hermite_d2.py`` measures this one through the engine. Written here because no library
offers Hermite–Birkhoff quadrature on given points with an error estimate.
"""

from __future__ import annotations

import numpy as np

from ._chebyshev import (
    _birkhoff_basis,
    _cc_levels,
    _cc_nodes,
    _interpolant_integral,
    _log_stretch,
    _stretched_refine,
)

# The Chebyshev–Lobatto points of s (N = 20) and the indices each stage adds: the 11 points of
# N = 10; the pair at θ = π/4 and 3π/4; the other eight. The pair was chosen over two pairs
# more ({3, 7, 13, 17} and {3, 9, 11, 17}: 13 solves) on the quadrature study's clouds and a
# Table 2-shaped batch (see the module's docstring): with it, every case the 11 points left
# stopped at 13 points (11 solves), within 1.6e-7 of the reference, the estimate 2.7 to 20
# times the true error.
D2_FINEST = 20
D2_STAGES = (tuple(range(0, D2_FINEST + 1, 2)), (5, 15), (1, 3, 7, 9, 11, 13, 17, 19))
_CC_LEVELS_IN_S = (20, 40)  # see the module's docstring, stage 4
# d²Mag/dt² is of the order of n times the squared distances, and the rule multiplies it by
# t_cut² (about the inverse square of the largest distance): beyond these largest distances one
# of the two leaves float64's range (squares beyond 1e300 overflow, below 1e-300 underflow).
_DISTANCE_RANGE = (1e-150, 1e150)


def in_d2_range(largest: float) -> bool:
    """Whether a space's largest distance keeps d²Mag/dt² and its product with t_cut² in
    float64's range (:data:`_DISTANCE_RANGE`)."""
    low, high = _DISTANCE_RANGE
    return bool(low <= largest <= high)


def check_largest_distance(largest: float) -> None:
    """Refuse (``ValueError``) a space whose largest distance puts d²Mag/dt² or its product
    with t_cut² out of float64's range (:func:`in_d2_range`), before any solve."""
    low, high = _DISTANCE_RANGE
    if not in_d2_range(largest):
        raise ValueError(f"the hermite_d2 rule takes largest distances between {low:g} and "
                         f"{high:g} (d²Mag/dt² grows as their square); got {largest:.3g}: use "
                         "hermite_log, or rescale the distances.")


def _stage_orders(points: int) -> tuple[int, ...]:
    """Conditions per point of a stage: the value at s = 0, three inside, two at t_cut."""
    return (1,) + (3,) * (points - 2) + (2,)


def hermite_d2_many(derivatives, values, f0: np.ndarray, t_cut, rtol: float,
                    alphas: np.ndarray):
    """The ``hermite_d2`` integral on [0, t_cut] of ``count = len(alphas)`` integrands at once
    (one space, or a batch's members; ``t_cut`` one limit, or one per integrand), each stage's
    scales evaluated for all unfinished integrands together; without the bisection
    (``_chebyshev._stretched_refine``, one integrand at a time, where the returned error
    exceeds ``rtol`` times the estimate).

    ``derivatives(rows, ts, order)``: f and its first ``order`` − 1 derivatives (order 2 or 3)
    of integrands ``rows`` (indices into ``alphas``) at scales ``ts`` > 0, an array
    (order, len(rows)), each integrand's scales from the largest down; ``values(rows, ts)``: f
    alone likewise; ``f0``: f(0) of each; ``alphas``: each one's stretch rate. Returns
    ``(estimate, error)``, arrays of shape (count,)."""
    count = len(alphas)
    t_cut = np.broadcast_to(np.asarray(t_cut, dtype=float), (count,))
    finest = D2_FINEST
    s = _cc_nodes(0.0, 1.0, finest)
    alphas = np.asarray(alphas, dtype=float)[:, None]
    t = _log_stretch(s[None, :], t_cut[:, None], alphas)[0]
    t[:, 0], t[:, -1] = 0.0, t_cut
    # In units of t_cut (as hermite_log's stages): u = t / t_cut and its s-derivatives, with
    # Mag' times t_cut and Mag'' times t_cut², each factor of the order of n.
    _, du, ddu = _log_stretch(s[None, :], 1.0, alphas)
    dddu = alphas * ddu
    g = np.full((3, count, finest + 1), np.nan)  # g / t_cut and its first two s-derivatives
    g[0, :, 0] = f0 * du[:, 0]
    estimate = np.full(count, np.nan)
    error = np.full(count, np.nan)
    active = np.arange(count)
    known = {0}
    for added in D2_STAGES:
        new = sorted(set(added) - known, reverse=True)
        grid = sorted(known | set(added))
        for order, cols in ((2, [c for c in new if c == finest]),
                            (3, [c for c in new if c != finest])):
            if not cols:
                continue
            rows, cs = np.repeat(active, len(cols)), np.tile(cols, len(active))
            f = derivatives(rows, t[rows, cs], order)
            a, b, c = du[rows, cs], ddu[rows, cs], dddu[rows, cs]
            scale = t_cut[rows]
            g[0, rows, cs] = f[0] * a
            g[1, rows, cs] = (f[1] * scale) * a**2 + f[0] * b
            if order == 3:
                g[2, rows, cs] = (f[2] * scale**2) * a**3 + 3.0 * (f[1] * scale) * a * b \
                    + f[0] * c
        known.update(new)
        # In x = 2s − 1: d/dx = d/ds / 2.
        data = np.concatenate([g[0][np.ix_(active, grid)], g[1][np.ix_(active, grid[1:])] / 2.0,
                               g[2][np.ix_(active, grid[1:-1])] / 4.0], axis=1)
        integral, tail = _interpolant_integral(
            data @ _birkhoff_basis(tuple(2.0 * s[grid] - 1.0), _stage_orders(len(grid))).T)
        estimate[active] = t_cut[active] * 0.5 * integral
        error[active] = t_cut[active] * tail
        active = active[~(error[active] <= rtol * np.abs(estimate[active]))]
        if not active.size:
            return estimate, error

    def evaluate(rows, nodes, xs, level):
        members, x = active[rows], xs[nodes]
        tx, dtx, _ = _log_stretch(x, t_cut[members], alphas[members, 0])
        return values(members, np.where(x < 1.0, tx, t_cut[members])) * dtx

    top = _CC_LEVELS_IN_S[-1]
    known_values = np.full((active.size, top + 1), np.nan)
    known_values[:, ::top // finest] = t_cut[active, None] * g[0][active]
    estimate[active], error[active] = _cc_levels(evaluate, 0.0, 1.0, active.size, rtol=rtol,
                                                 values=known_values, levels=_CC_LEVELS_IN_S)
    return estimate, error


def hermite_d2(f, derivatives, t_cut: float, rtol: float, alpha: float) -> tuple[float, float]:
    """``hermite_d2`` of one integrand (see the module's docstring): ``f(t)``, and
    ``derivatives(t, order)``, f and its first ``order`` − 1 derivatives at t > 0 (a
    sequence). Returns (estimate, estimated absolute error)."""

    def many(rows, ts, order):
        return np.array([derivatives(float(t), order) for t in ts]).T

    def values(rows, ts):
        return np.array([f(float(t)) for t in ts])

    estimate, error = hermite_d2_many(many, values, np.array([f(0.0)]), t_cut, rtol,
                                      np.array([alpha]))
    if error[0] > rtol * abs(estimate[0]):
        return _stretched_refine(f, t_cut, alpha, float(estimate[0]), rtol)
    return float(estimate[0]), float(error[0])

