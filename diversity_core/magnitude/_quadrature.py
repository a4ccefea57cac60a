"""Quadrature of magnitude functions: MagArea's integral and the scale grid of many limits.

* :func:`_integrate` and its Clenshaw–Curtis rule (nested Chebyshev grids of 13, 25 and 49
  scales, the error estimated from the trailing Chebyshev coefficients, panels bisected where
  needed), the Hermite rule (values and derivatives on the 13-point grid, the Clenshaw–Curtis
  rule where its estimate is not enough), the log-stretched Hermite rule (values and
  derivatives on 15 scales crowded towards 0, then on 22 and 29, then Clenshaw–Curtis in the
  stretched variable, as far as its estimates need), ``hermite_d2`` (:mod:`._hermite_d2`),
  also SciPy's ``quad`` and the paper's trapezoid rule; their building blocks (Chebyshev
  points, Clenshaw–Curtis levels and panels, the stretch) are :mod:`._chebyshev`'s;
* :class:`ScaleGrid`: scales at which one evaluation of each magnitude function serves MagArea
  up to any limit (the curvature experiment's scale-sensitivity study).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import numpy as np
from numpy.polynomial import chebyshev

from .._validation import check_scales
from ._chebyshev import (
    _CC_LEVELS,
    _birkhoff_basis,
    _cc_levels,
    _cc_nodes,
    _cc_panel,
    _cc_refine,
    _interpolant_integral,
    _log_stretch,
    _stretch_rate,
    _stretched_refine,
)
from ._hermite_d2 import check_largest_distance, hermite_d2, in_d2_range

INTEGRATION_METHODS = ("chebyshev", "cc25", "hermite", "hermite_log", "hermite_d2", "auto",
                       "quad", "trapezoid")
# Names of one rule: ``cc25`` is ``chebyshev`` (Clenshaw–Curtis, 13 then 25 scales, ...) under
# the name the quadrature study gives it.
_ALIASES = {"cc25": "chebyshev"}
# The Hermite rule's grid: the first Clenshaw–Curtis level (its nodes are those of the 13-point
# level, so the Clenshaw–Curtis rule reuses every value where the Hermite estimate falls short).
_HERMITE_LEVEL = _CC_LEVELS[0]
# The log-stretched Hermite rule (``hermite_log``, see _log_hermite): Hermite rules on nested
# sets of the 29 Chebyshev–Lobatto points of s, each stage's new points (0, whose value is
# known, aside): the even points (the 15-point grid: 13 scales to solve besides 0 and t_cut),
# then the odd points 1 and 17 (2 more), then the other odd points 5, 9, ..., 25 of every other
# gap (5 more), then the remaining odd points (7 more); then Clenshaw–Curtis in s on 57 points.
# α, its stretch where the space's largest distance is not known (every engine path passes it).
_LOG_HERMITE_STAGES = (tuple(range(2, 29, 2)), (1, 17), (5, 9, 13, 21, 25),
                       tuple(range(3, 28, 4)))
# Each stage's error estimate is that of _hermite_rule times this factor: the second and third
# stages' points are not Chebyshev points, and the trailing coefficients of their interpolant
# bound its error less sharply (the study's hermite_log17_*, hermite_log22_rel_error and
# _rel_estimate columns compare them).
_LOG_HERMITE_ERROR_FACTORS = (1.0, 4.0, 4.0, 1.0)
_LOG_HERMITE_ALPHA = 2.0
_LOG_HERMITE_LEVELS = (14, 28, 56)


def canonical_method(method: str) -> str:
    """The rule an integration method names (``cc25`` is ``chebyshev``)."""
    return _ALIASES.get(method, method)


def path_rule(method: str, *, factored: bool, diameter: float | None) -> str:
    """The rule ``method`` names on a path (:func:`canonical_method`), ``auto`` resolved:
    ``hermite_d2`` where a Cholesky factor gives each scale (``factored``: its second
    derivative costs two triangular solves) and the largest distance ``diameter`` lies in its
    range (``_hermite_d2.in_d2_range``), else ``hermite_log`` (conjugate gradients,
    whose second derivative is a second solve, and the large-n path, which has none)."""
    method = canonical_method(method)
    if method != "auto":
        return method
    if factored and diameter is not None and in_d2_range(diameter):
        return "hermite_d2"
    return "hermite_log"


def _integrate(f, t_cut: float, *, method: str, rtol: float, n_ts: int,
               return_error: bool = False, announce=None, slope=None, diameter=None,
               derivatives=None):
    """∫_0^t_cut f by ``method``; with ``return_error``, also its estimated absolute error (NaN
    for the trapezoid rule, whose error is not estimated). ``announce``: see :func:`_cc_panel`.
    ``slope(t)``: ``(f(t), f'(t))`` at t > 0, which the Hermite rules need. ``diameter``: the
    space's largest distance, which sets ``hermite_log``'s stretch (None: the stretch of
    ``_LOG_HERMITE_ALPHA``). ``derivatives(t, order)``: f and its first ``order`` − 1
    derivatives at t > 0 (order 2 or 3), which ``hermite_d2`` needs."""
    t_cut = float(check_scales(t_cut, name="t_cut")[0])
    check_integration(method, rtol, n_ts)
    value, error = _integrate_with_error(f, t_cut, method=method, rtol=rtol, n_ts=n_ts,
                                         announce=announce, slope=slope, diameter=diameter,
                                         derivatives=derivatives)
    return (value, error) if return_error else value


def check_integration(method: str, rtol: float, n_ts: int) -> None:
    """Refuse integration options before any work (``ValueError`` naming the option): the one
    check of the single-space, batch and many-set paths."""
    if method not in INTEGRATION_METHODS:
        raise ValueError(f"method must be one of {INTEGRATION_METHODS}; got {method!r}.")
    if method == "trapezoid":
        if n_ts < 2:
            raise ValueError(f"the trapezoid rule needs n_ts >= 2 scales; got {n_ts}.")
    elif not rtol > 0:
        raise ValueError(f"rtol must be positive; got {rtol}.")


def _integrate_with_error(f, t_cut: float, *, method: str, rtol: float, n_ts: int,
                          announce=None, slope=None, diameter=None, derivatives=None):
    # A path that factors its scales resolves ``auto`` itself (path_rule); here it is the rule
    # of paths that do not.
    method = path_rule(method, factored=False, diameter=diameter)
    if t_cut == 0.0:
        return 0.0, 0.0
    if method == "hermite_d2":
        if derivatives is None:
            raise ValueError("the hermite_d2 rule needs the first and second derivatives of the "
                             "integrand, which this path does not compute; use hermite_log.")
        if diameter is not None:
            check_largest_distance(diameter)
        alpha = _LOG_HERMITE_ALPHA if diameter is None else _stretch_rate(t_cut * diameter)
        return hermite_d2(f, derivatives, t_cut, rtol, alpha)
    if method == "hermite_log":
        if slope is None:
            raise ValueError("the hermite_log rule needs the derivative of the integrand (slope).")
        alpha = _LOG_HERMITE_ALPHA if diameter is None else _stretch_rate(t_cut * diameter)
        return _log_hermite(f, slope, t_cut, rtol, alpha)
    if method == "hermite":
        if slope is None:
            raise ValueError("the hermite rule needs the derivative of the integrand (slope).")
        estimate, error = _hermite_panel(slope, f(0.0), t_cut)
        if error <= rtol * abs(estimate):
            return estimate, error
        return _integrate_chebyshev(f, t_cut, rtol, return_error=True, announce=announce)
    if method == "trapezoid":
        ts = np.linspace(0.0, t_cut, n_ts)
        return float(np.trapezoid([f(float(t)) for t in ts], ts)), math.nan
    if method == "chebyshev":
        return _integrate_chebyshev(f, t_cut, rtol, return_error=True, announce=announce)
    # SciPy's integrate and optimize are imported where used: together 0.2 CPU s for every
    # process that imports the engine, and neither serves the default method.
    from scipy import integrate

    with warnings.catch_warnings():
        warnings.simplefilter("error", integrate.IntegrationWarning)
        try:
            value, error = integrate.quad(f, 0.0, t_cut, epsabs=0.0, epsrel=rtol, limit=200)
        except integrate.IntegrationWarning as exc:
            raise RuntimeError(
                f"MagArea integral on [0, {t_cut:.6g}] did not reach rtol={rtol:g}: {exc}. The "
                "magnitude function may have a pole (distances that are not of negative type); "
                "try method='trapezoid'."
            ) from exc
    return float(value), float(error)


def _integrate_chebyshev(f, t_cut: float, rtol: float, *, return_error: bool = False,
                         announce=None):
    """Clenshaw–Curtis quadrature of ``f`` on [0, t_cut] to relative tolerance ``rtol``.

    One panel first (13, 25, 49 scales); if its estimated error is still too large, the interval
    is bisected recursively. Bisection matters when t_cut lies far beyond the scales where
    magnitude rises (a common t_cut taken from other spaces): the rise near 0 then needs finer
    panels than the flat remainder. Each half gets the budget / √2: independent panel errors add
    in quadrature, and the estimates overshoot the true error anyway. If a panel cannot meet its
    budget after ``_MAX_BISECTIONS`` levels (magnitude evaluated with round-off noise, where Z_t
    is ill-conditioned), its estimate is used and a :class:`MagnitudeWarning` says so.
    """
    estimate, error = _cc_panel(f, 0.0, t_cut, rtol=rtol, announce=announce)
    if error > rtol * abs(estimate):
        estimate, error = _cc_refine(f, t_cut, estimate, rtol, return_error=True,
                                     announce=announce)
    return (estimate, error) if return_error else estimate


def _hermite_panel(slope, f0: float, t_cut: float) -> tuple[float, float]:
    """Hermite estimate of ∫_0^t_cut f and its estimated absolute error, from ``f0 = f(0)`` and
    ``slope(t) = (f(t), f'(t))`` at the 12 positive nodes of the 13-point Chebyshev–Lobatto grid
    (asked from the largest down, as the Clenshaw–Curtis levels ask theirs).

    The estimate is the exact integral of the polynomial of degree 24 that takes the 13 values
    and the 12 derivatives (25 conditions; not f'(0): no factorisation gives Mag'(0), Z_0 being
    singular). Its error is estimated by the integral that the last four terms of that
    polynomial's Chebyshev series could have at most, t_cut times the sum of their
    coefficients' absolute values (∫|T_k| <= 2 on [-1, 1]; the terms the grid barely resolves,
    as :func:`_cc_panel` reads its last four). ``benchmarks/bench_quadrature_rule.py`` measures
    it against the true error. The rule is exact to degree 24 but errs by about 4 times each
    further Chebyshev coefficient (a Gauss-type rule; Clenshaw–Curtis errs little on the modes
    just beyond its grid), so it is only a few times more accurate than Clenshaw–Curtis on the
    same 13 scales.
    """
    ts = _cc_nodes(0.0, t_cut, _HERMITE_LEVEL)
    values = np.empty(_HERMITE_LEVEL + 1)
    slopes = np.empty(_HERMITE_LEVEL)
    values[0] = f0
    for j in range(_HERMITE_LEVEL, 0, -1):
        values[j], slopes[j - 1] = slope(float(ts[j]))
    estimate, error = _hermite_rule(values, slopes, t_cut)
    return float(estimate), float(error)


def _hermite_rule(values: np.ndarray, slopes: np.ndarray, t_cut: float, *,
                  basis: np.ndarray | None = None):
    """Hermite estimate of ∫_0^t_cut and its error estimate (see :func:`_hermite_panel`) from
    ``values`` (..., n + 1) at :func:`_cc_nodes` and ``slopes`` (..., n) at all but the first
    (n = 12: the ``hermite`` rule; 14 and 28: ``hermite_log``'s); arrays of shape (...).
    ``basis``: that of other points (:func:`_hermite_basis_at`)."""
    half = 0.5 * t_cut  # t = half · (x + 1): f'(t) dt/dx = half · f'(t)
    data = np.concatenate([values, half * np.asarray(slopes)], axis=-1)
    if basis is None:
        basis = _hermite_basis(values.shape[-1] - 1)
    integral, tail = _interpolant_integral(data @ basis.T)  # Chebyshev coefficients in x
    return half * integral, t_cut * tail


def _log_hermite(f, slope, t_cut: float, rtol: float, alpha: float) -> tuple[float, float]:
    """``hermite_log``: ∫_0^t_cut f dt = ∫_0^1 g(s) ds with g(s) = f(t(s)) t'(s) under
    :func:`_log_stretch`, by Hermite rules in s: g and g'(s) = f'(t) t'(s)² + f(t) t''(s) at
    positive points of s (``slope(t)``, asked from the largest scale down) and g(0) = t'(0)
    (Mag(0) = 1; Mag'(0) is not known).

    Four nested levels on the 29 Chebyshev–Lobatto points of s, each the exact integral of
    the interpolant of all values and derivatives known so far, with the error estimate of
    :func:`_hermite_rule`, stopping at the first level whose estimate is within ``rtol``:

    1. the even points: the 15 Chebyshev–Lobatto points of s (13 solves inside, and t_cut
       unless the convergence-scale search ended on a solve there);
    2. besides them the points 1 and 17, 2 solves: one new point in the first gap and one
       past the middle. Of the 21 pairs of the seven points 1, 5, ..., 25 (one in every other
       gap), this pair let the most cases of the quadrature study's clouds stop here among
       those whose estimate (counted four times) stayed above the true error in every case,
       and it stayed so on the holdout clouds (``benchmarks/results/log_hermite_pair.csv``);
    3. the points 5, 9, ..., 25, 5 solves more: with the second level's, one new point in
       every other gap. The nodes stay spread as Chebyshev points are, at twice the density in
       every other gap, and their interpolant is as well conditioned (points added in
       neighbouring gaps only make it ill-conditioned: its integral then errs by far more
       than the 15 points'); its error estimate counts four times, as the second level's
       (``_LOG_HERMITE_ERROR_FACTORS``);
    4. all 29 points, 7 solves more.

    Then Clenshaw–Curtis in s on 57 points (reusing the 29 values) and bisected panels
    (:func:`_cc_refine`) meet the tolerance by their estimates as ``chebyshev`` does.

    Why the stretch: Mag(t) rises from 1 over scales of about 1 / (largest distance), a small
    share of [0, t_cut] where t_cut · (largest distance) is large (cosine distances, targets of
    0.99), and the Chebyshev points of t leave that rise unresolved; e^{αs} spaces the nodes
    evenly in log t near t_cut and evenly in t near 0. Returns (estimate, estimated absolute
    error). One integrand of :func:`_log_hermite_many`, which integrates many at once."""

    def values(rows, ts):
        return np.array([f(float(t)) for t in ts])

    estimate, error = _log_hermite_many(_one_integrand(slope), values, np.array([f(0.0)]),
                                        t_cut, rtol, np.array([alpha]))
    if error[0] > rtol * abs(estimate[0]):
        return _stretched_refine(f, t_cut, alpha, float(estimate[0]), rtol)
    return float(estimate[0]), float(error[0])


def _log_hermite_many(slopes, values, f0: np.ndarray, t_cut, rtol: float, alphas: np.ndarray):
    """:func:`_log_hermite` of ``count = len(alphas)`` integrands on [0, t_cut] (the batch's
    members; ``t_cut`` one limit, or one per integrand), each stage evaluated for all
    unfinished integrands at once, then the
    Clenshaw–Curtis levels in s as ``_cc_levels`` runs them for many; without the bisection
    (:func:`_chebyshev._stretched_refine`, one integrand at a time, where the returned error exceeds
    ``rtol`` times the estimate).

    ``slopes(rows, ts)``: ``(f, f')`` of integrands ``rows`` (indices into ``alphas``) at
    scales ``ts`` > 0, arrays of len(rows), each integrand's scales from the largest down;
    ``values(rows, ts)``: f alone likewise; ``f0``: f(0) of each; ``alphas``: each one's
    stretch rate. Returns ``(estimate, error)``, arrays of shape (count,)."""
    count = len(alphas)
    t_cut = np.broadcast_to(np.asarray(t_cut, dtype=float), (count,))
    g = np.full((count, _LOG_HERMITE_LEVELS[1] + 1), np.nan)  # g at the 29 points
    estimate = np.full(count, np.nan)
    error = np.full(count, np.nan)
    active = np.arange(count)
    stages = _log_hermite_stages_many(slopes, f0, t_cut, alphas, g)
    next(stages)
    for _ in _LOG_HERMITE_STAGES:
        estimate[active], error[active] = stages.send(active)
        active = active[~(error[active] <= rtol * np.abs(estimate[active]))]
        if not active.size:
            return estimate, error

    def evaluate(rows, nodes, xs, level):
        members, x = active[rows], xs[nodes]
        tx, dtx, _ = _log_stretch(x, t_cut[members], np.asarray(alphas, dtype=float)[members])
        return values(members, np.where(x < 1.0, tx, t_cut[members])) * dtx

    finest = _LOG_HERMITE_LEVELS[-1]
    known_values = np.full((active.size, finest + 1), np.nan)
    known_values[:, ::finest // _LOG_HERMITE_LEVELS[1]] = g[active]
    estimate[active], error[active] = _cc_levels(evaluate, 0.0, 1.0, active.size, rtol=rtol,
                                                 values=known_values,
                                                 levels=_LOG_HERMITE_LEVELS[1:])
    return estimate, error


def _hermite_basis(n: int) -> np.ndarray:
    """:func:`_hermite_basis_at` the n + 1 Chebyshev–Lobatto points of [-1, 1] (condition
    number 5e2 for n = 12)."""
    return _hermite_basis_at(tuple(-np.cos(np.pi * np.arange(n + 1) / n)))


def _log_hermite_stages(f, slope, t_cut: float, alpha: float, g: np.ndarray):
    """(estimate, estimated absolute error) of ``hermite_log``'s stages in turn (see
    :func:`_log_hermite`) for one integrand, each solving its new scales when asked for;
    ``g`` (29,): g(s) at the 29 points, filled as they are known."""
    stages = _log_hermite_stages_many(_one_integrand(slope), np.array([f(0.0)]), t_cut,
                                      np.array([alpha]), g.reshape(1, -1))
    next(stages)
    for _ in _LOG_HERMITE_STAGES:
        estimate, error = stages.send(np.array([0]))
        yield float(estimate[0]), float(error[0])


def _one_integrand(slope):
    """``slopes(rows, ts)`` of :func:`_log_hermite_many` for one integrand's ``slope(t)``,
    asked scale by scale in the order given."""

    def slopes(rows, ts):
        pairs = [slope(float(t)) for t in ts]
        return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])

    return slopes


def _log_hermite_stages_many(slopes, f0: np.ndarray, t_cut, alphas: np.ndarray,
                             g: np.ndarray):
    """The stages of :func:`_log_hermite` for many integrands (``slopes``, ``f0``, ``t_cut``,
    ``alphas`` as for :func:`_log_hermite_many`), a generator: sent the integrands to advance
    (an array of indices), it solves their scales of the next stage and yields their
    (estimate, estimated absolute error), arrays of that length; ``g`` (count, 29): g(s) at the
    29 points, filled as they are known."""
    s = _cc_nodes(0.0, 1.0, g.shape[1] - 1)
    alphas = np.asarray(alphas, dtype=float)[:, None]
    t_cut = np.broadcast_to(np.asarray(t_cut, dtype=float), (len(alphas),))
    t = _log_stretch(s[None, :], t_cut[:, None], alphas)[0]
    t[:, 0], t[:, -1] = 0.0, t_cut
    # The rule runs on g / t_cut (the stretch of [0, 1]: du/ds and d²u/ds², with dMag/dt times
    # t_cut), its integral times t_cut: g'(s) itself holds t'(s)², which overflows where t_cut
    # exceeds 1e154 (distances below 1e-154), while each factor here stays of the order of n.
    _, du, ddu = _log_stretch(s[None, :], 1.0, alphas)
    unit = np.full(g.shape, np.nan)  # g / t_cut
    dunit = np.full(g.shape, np.nan)
    unit[:, 0] = f0 * du[:, 0]
    g[:, 0] = t_cut * unit[:, 0]
    known = [0]
    active = yield None
    for new, factor in zip(_LOG_HERMITE_STAGES, _LOG_HERMITE_ERROR_FACTORS, strict=True):
        order = sorted(new, reverse=True)
        rows, cols = np.repeat(active, len(order)), np.tile(order, len(active))
        mag, dmag = slopes(rows, t[rows, cols])
        unit[rows, cols], dunit[rows, cols] = _stretched_data(
            mag, dmag, t_cut[rows], du[rows, cols], ddu[rows, cols])
        g[rows, cols] = t_cut[rows] * unit[rows, cols]
        known = sorted(known + list(new))
        estimate, error = _stretched_rule(unit[active], dunit[active], s, known)
        active = yield t_cut[active] * estimate, factor * t_cut[active] * error


def _stretched_data(mag, dmag, t_cut, du, ddu):
    """``hermite_log``'s data at points of s from Mag and dMag/dt at their scales: g / t_cut =
    Mag · du/ds and its s-derivative dMag/dt · t_cut · (du/ds)² + Mag · d²u/ds² (du/ds, d²u/ds²:
    the stretch of [0, 1], ``_log_stretch(s, 1.0, α)``); arrays broadcast together."""
    return mag * du, (dmag * t_cut) * du**2 + mag * ddu


def _stretched_rule(unit, dunit, s: np.ndarray, known: list[int]):
    """The Hermite rule on the points ``known`` (ascending, 0 first) of the grid ``s`` of [0, 1]
    from :func:`_stretched_data` (..., len(s)): (the integral of g / t_cut over [0, 1], its
    estimated error), arrays of shape (...)."""
    return _hermite_rule(unit[..., known], dunit[..., known[1:]], 1.0,
                         basis=_hermite_basis_at(tuple(2.0 * s[known] - 1.0)))


def _hermite_basis_at(x: tuple[float, ...]) -> np.ndarray:
    """Values at the points ``x`` of [-1, 1] (ascending) and derivatives at all but the first
    -> the Chebyshev coefficients of their interpolant of degree 2 len(x) - 2 (a square
    matrix of that degree + 1): ``_chebyshev._birkhoff_basis`` of orders 1, 2, ..., 2."""
    return _birkhoff_basis(x, (1,) + (2,) * (len(x) - 1))


@dataclasses.dataclass(frozen=True)
class ScaleGrid:
    """Scales at which one evaluation of each magnitude function serves MagArea up to any limit.

    The curvature experiment's scale-sensitivity study integrates every cloud's magnitude
    function up to dozens of limits (fixed t_cut from 5 to 300, medians of convergence scales for
    targets 0.5 to 0.99, halved limits for the Turkeš variant; the configuration section
    ``curvature.sensitivity.grid`` holds this class's fields). Instead of one adaptive integral
    per limit, magnitude is evaluated once per cloud at the scales of this grid, and every
    integral is the exact integral of a piecewise Chebyshev interpolant of those values:

    * a first panel ``[0, t_first]`` with ``first_nodes`` Chebyshev points of the first kind
      (0 is not among them, so ``(Mag − 1)/t`` is never needed at t = 0);
    * panels geometric in t from ``t_first`` to ``t_max``, each spanning a factor of at most
      ``panel_ratio``, with ``panel_nodes`` Chebyshev–Lobatto points in ``u = log t`` (adjacent
      panels share their end scale). Magnitude saturates towards n over decades of t and is
      smooth in log t, which is why the panels are geometric.

    Integrals are linear in the values, so one weight vector per limit serves every cloud:
    ``∫_0^L Mag dt`` interpolates ``Mag`` in t on the first panel and ``Mag·e^u`` in u on the
    others; MagArea in log t, ``∫_0^L (Mag − 1) dt/t``, interpolates ``(Mag − 1)/t`` and
    ``Mag − 1`` (it differs from ``∫_ε^L Mag d(log t)`` by ``log(L/ε)`` plus a term that
    vanishes with ε, the same for every cloud at a given L). On clouds of 500 points the
    defaults (82 scales per cloud) agreed with :func:`diversity_core.mag_area` (rtol 1e-11) to
    1e-9 at limits from 0.7 to 1280, where :meth:`relative_error_estimate`, the bound each run
    checks, gave at most 5e-7 (13 nodes per panel: true errors 2e-8, estimates 2e-6);
    ``tests/data/test_curvature.py`` checks 1e-6.

    Attributes
    ----------
    t_first, t_max : float, 0 < t_first < t_max
        End of the first panel and of the grid (scale units: 1 / distance).
    first_nodes, panel_nodes : int >= 3
    panel_ratio : float > 1
    """

    t_first: float = 5.0
    t_max: float = 1280.0
    first_nodes: int = 17
    panel_nodes: int = 17
    panel_ratio: float = 4.0

    def __post_init__(self):
        if not 0 < self.t_first < self.t_max:
            raise ValueError(f"scale grid: need 0 < t_first < t_max; got t_first={self.t_first}, "
                             f"t_max={self.t_max}.")
        if self.first_nodes < 3 or self.panel_nodes < 3:
            raise ValueError("scale grid: first_nodes and panel_nodes must be at least 3; got "
                             f"{self.first_nodes}, {self.panel_nodes}.")
        if not self.panel_ratio > 1:
            raise ValueError(f"scale grid: panel_ratio must exceed 1; got {self.panel_ratio}.")

    # -- layout ----------------------------------------------------------------------------
    @functools.cached_property
    def edges(self) -> np.ndarray:
        """Panel ends, shape (n_panels + 1,): 0, t_first, ..., t_max."""
        n_log = int(np.ceil(np.log(self.t_max / self.t_first) / np.log(self.panel_ratio) - 1e-9))
        logs = np.linspace(np.log(self.t_first), np.log(self.t_max), n_log + 1)
        ends = np.exp(logs)
        ends[0], ends[-1] = self.t_first, self.t_max  # exactly
        return np.concatenate([[0.0], ends])

    @functools.cached_property
    def _layout(self):
        """Per panel: (a, b, x in [-1, 1], node indices, scales); x ascending."""
        panels = []
        x1 = chebyshev.chebpts1(self.first_nodes)
        scales = [0.5 * self.t_first * (x1 + 1.0)]
        panels.append((0.0, self.t_first, x1, np.arange(self.first_nodes)))
        x2 = chebyshev.chebpts2(self.panel_nodes)
        next_index = self.first_nodes
        for a, b in zip(self.edges[1:-1], self.edges[2:], strict=True):
            ua, ub = np.log(a), np.log(b)
            t = np.exp(ua + 0.5 * (ub - ua) * (x2 + 1.0))
            t[0], t[-1] = a, b
            # Adjacent log panels share their end scale; the first one starts a new node.
            shared = len(panels) > 1
            first = next_index - 1 if shared else next_index
            index = np.arange(first, first + self.panel_nodes)
            scales.append(t[1:] if shared else t)
            next_index = first + self.panel_nodes
            panels.append((a, b, x2, index))
        return panels, np.concatenate(scales)

    @property
    def nodes(self) -> np.ndarray:
        """The scales to evaluate magnitude at, shape (n_nodes,), ascending, all > 0."""
        return self._layout[1]

    @staticmethod
    @functools.cache
    def _inverse_vandermonde(x: tuple) -> np.ndarray:
        """Values at the points x -> Chebyshev coefficients of their interpolant, (m, m)."""
        xs = np.array(x)
        return np.linalg.inv(chebyshev.chebvander(xs, len(xs) - 1))

    def _panel(self, t: float) -> int:
        """Index of the panel holding scale t (0 <= t <= t_max)."""
        return int(min(np.searchsorted(self.edges, t, side="right") - 1, len(self.edges) - 2))

    def _local(self, p: int, t: float) -> float:
        """Scale t mapped to [-1, 1] on panel p (linear in t on the first, in log t after)."""
        a, b = self.edges[p], self.edges[p + 1]
        if p == 0:
            return 2.0 * t / b - 1.0
        return 2.0 * (np.log(t) - np.log(a)) / (np.log(b) - np.log(a)) - 1.0

    def _check_scale(self, t: float, what: str) -> float:
        t = float(t)
        if not 0.0 <= t <= self.t_max * (1 + 1e-12):
            raise ValueError(f"{what} {t:.6g} lies outside the scale grid [0, {self.t_max:.6g}]: "
                             "raise the grid's t_max.")
        return min(t, self.t_max)

    # -- integrals --------------------------------------------------------------------------
    def integral_weights(self, limit: float, *, log: bool = False) -> tuple[np.ndarray, float]:
        """Weights ``w`` (n_nodes,) and offset ``c`` with ``∫_0^limit = w @ Mag(nodes) + c``.

        ``log=False``: ``∫_0^limit Mag(t) dt`` (MagArea, c = 0). ``log=True``:
        ``∫_0^limit (Mag(t) − 1) dt / t`` (MagArea in log t).
        """
        limit = self._check_scale(limit, "integration limit")
        weights = np.zeros(self.nodes.size)
        offset = 0.0
        panels, _ = self._layout
        for p, (a, b, x, index) in enumerate(panels):
            if limit <= a:
                break
            s = 1.0 if limit >= b else self._local(p, limit)
            # ∫_{-1}^{s} of the interpolant of unit values at each node.
            unit = chebyshev.chebval(s, chebyshev.chebint(self._inverse_vandermonde(tuple(x)),
                                                          lbnd=-1))
            t = self.nodes[index]
            if p == 0:
                half = 0.5 * b
                w = unit * half / t if log else unit * half
            else:
                half = 0.5 * (np.log(b) - np.log(a))
                w = unit * half if log else unit * half * t  # Mag·e^u in u
            weights[index] += w
            if log:
                offset -= w.sum()
        return weights, offset

    def integrals(self, values: np.ndarray, limits, *, log: bool = False) -> np.ndarray:
        """Integrals of each magnitude function up to each limit.

        Parameters
        ----------
        values : array of shape (n_clouds, n_nodes)
            Magnitude at :attr:`nodes`.
        limits : array of shape (n_limits,)

        Returns
        -------
        areas : array of shape (n_clouds, n_limits)
        """
        values = self._check_values(values)
        pairs = [self.integral_weights(L, log=log) for L in np.atleast_1d(limits)]
        W = np.stack([w for w, _ in pairs], axis=1)
        return values @ W + np.array([c for _, c in pairs])

    # -- the interpolant itself -------------------------------------------------------------
    def magnitude_at(self, values: np.ndarray, scales) -> np.ndarray:
        """Interpolated Mag at ``scales``, shape (n_clouds, n_scales)."""
        values = self._check_values(values)
        panels, _ = self._layout
        out = np.empty((values.shape[0], np.size(scales)))
        for k, t in enumerate(np.atleast_1d(scales)):
            t = self._check_scale(t, "scale")
            p = self._panel(t)
            _, _, x, index = panels[p]
            unit = chebyshev.chebval(self._local(p, t), self._inverse_vandermonde(tuple(x)))
            out[:, k] = values[:, index] @ unit
        return out

    def scale_at(self, values: np.ndarray, levels) -> np.ndarray:
        """For each cloud, the smallest scale at which the interpolated Mag reaches its level.

        Parameters
        ----------
        values : array of shape (n_clouds, n_nodes)
        levels : array of shape (n_clouds,)
            E.g. ``q · n_distinct`` for a convergence target q.

        Returns
        -------
        scales : array of shape (n_clouds,)

        Raises ``ValueError`` when a level is not reached on the grid (raise ``t_max``) or is
        reached within the first panel (below ``t_first``, where convergence targets of
        interest never lie).
        """
        from scipy.optimize import brentq  # see _integrate_with_error

        values = self._check_values(values)
        levels = np.broadcast_to(np.asarray(levels, dtype=float), values.shape[:1])
        panels, _ = self._layout
        out = np.empty(values.shape[0])
        for i, (row, level) in enumerate(zip(values, levels, strict=True)):
            above = np.flatnonzero(row >= level)
            if above.size == 0:
                raise ValueError(
                    f"cloud {i}: Mag reaches {row[-1]:.6g} < {level:.6g} by t_max = "
                    f"{self.t_max:.6g}; raise the grid's t_max.")
            j = above[0]
            if j <= self.first_nodes:  # node first_nodes is t_first, the first log panel's start
                raise ValueError(f"cloud {i}: Mag reaches {level:.6g} at or below t_first = "
                                 f"{self.t_first:.6g}; lower the grid's t_first.")
            # Nodes j - 1 and j are consecutive Lobatto points of one log panel, where the
            # interpolant equals the values: the bracket holds a sign change.
            p = next(q for q in range(1, len(panels)) if j in panels[q][3][1:])
            a, b, x, index = panels[p]
            coef = self._inverse_vandermonde(tuple(x)) @ row[index]
            lo, hi = self._local(p, self.nodes[j - 1]), self._local(p, self.nodes[j])
            s = brentq(_shifted_chebval, lo, hi, args=(coef, level), xtol=1e-14, rtol=1e-13)
            out[i] = np.exp(np.log(a) + 0.5 * (s + 1.0) * (np.log(b) - np.log(a)))
        return out

    def relative_error_estimate(self, values: np.ndarray, *, log: bool = False) -> np.ndarray:
        """Estimated relative error of every integral of each cloud, shape (n_clouds,).

        On each panel, the interpolated function's error is estimated by the sum of its last two
        Chebyshev coefficients (they decay geometrically for smooth functions) and divided by
        the function's smallest value there; the largest ratio over the panels bounds
        ``|error| / integral`` for every limit, since the integrands are positive.
        """
        values = self._check_values(values)
        panels, _ = self._layout
        worst = np.zeros(values.shape[0])
        for p, (_, _, x, index) in enumerate(panels):
            t = self.nodes[index]
            f = values[:, index]
            if log:
                f = (f - 1.0) / t if p == 0 else f - 1.0
            elif p > 0:
                f = f * t
            coef = f @ self._inverse_vandermonde(tuple(x)).T
            tail = np.abs(coef[:, -2:]).sum(axis=1)
            floor = np.abs(f).min(axis=1)
            worst = np.maximum(worst, tail / np.where(floor > 0, floor, np.inf))
        return worst

    def _check_values(self, values) -> np.ndarray:
        values = np.atleast_2d(np.asarray(values, dtype=float))
        if values.shape[1] != self.nodes.size:
            raise ValueError(f"expected magnitude at the grid's {self.nodes.size} scales; got "
                             f"{values.shape[1]} per cloud.")
        if not np.all(np.isfinite(values)):
            raise ValueError("magnitude values must be finite.")
        return values


def _shifted_chebval(s: float, coef: np.ndarray, level: float) -> float:
    return chebyshev.chebval(s, coef) - level

