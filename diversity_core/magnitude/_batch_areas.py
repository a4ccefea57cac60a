"""MagArea of a batch of spaces: each rule's stages solved for all unfinished members at once.

:func:`mag_areas` integrates every member of a prepared batch (``_batch``) on its [0, t_cut]:
members of the single-space path by their own space's rule; the others by the same rule as a
single space, advanced together: ``hermite_d2`` and ``hermite_log`` one stage of stretched
scales of every member per batch evaluation (whether they share one t_cut or each has its own),
Clenshaw–Curtis one level of nodes of every member sharing a t_cut; then bisection member by
member where a member's estimate exceeds ``rtol``. The torch batch runs the same function.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_scales
from ._batch import PreparedBatch, _check_errors, _finish, _member_warnings, _prepared_batch
from ._chebyshev import _CC_LEVELS, _cc_levels, _cc_refine, _stretch_rate, _stretched_refine
from ._hermite_d2 import check_largest_distance, hermite_d2_many
from ._quadrature import (
    _integrate,
    _log_hermite_many,
    canonical_method,
    check_integration,
    path_rule,
)


def mag_areas(spaces, t_cut, *, method: str, rtol: float, n_ts: int,
              errors: str = "raise") -> np.ndarray:
    """Batch version of :func:`~diversity_core.magnitude.mag_area`."""
    _check_errors(errors)
    check_integration(method, rtol, n_ts)
    batch = _prepared_batch(spaces)
    t_cuts = np.broadcast_to(check_scales(t_cut, name="t_cut"), (batch.m,)) \
        if np.ndim(t_cut) == 0 else check_scales(t_cut, name="t_cut")
    if t_cuts.shape != (batch.m,):
        raise ValueError(f"t_cut must be one scale or one per space ({batch.m}); got "
                         f"{t_cuts.shape[0]}.")
    failures = dict(batch.failures)
    out = np.full(batch.m, np.nan)
    members = np.flatnonzero(batch.ok)
    single = np.zeros(batch.m, dtype=bool)
    single[batch.single] = True
    for i in members[single[members]]:  # large members: their own single-space integral
        out[i] = batch.space(int(i))._integrate(float(t_cuts[i]), method=method, rtol=rtol,
                                                n_ts=n_ts)
    members = members[~single[members]]
    out[members[t_cuts[members] == 0.0]] = 0.0
    members = members[t_cuts[members] != 0.0]
    # The stretched Hermite rules work in s on [0, 1] whatever each member's limit: all members
    # advance together, whether they share one t_cut or each has its own (one stage's scales of
    # every member in one call, shared among the threads).
    stretched = {"hermite_log": _log_hermite_areas, "hermite_d2": _hermite_d2_areas}
    # Each member's largest distance, read once: it sets the stretch, and ``auto``'s rule.
    largest = np.full(batch.m, np.nan)
    largest[members] = [float(np.max(batch.D[int(i)])) for i in members]
    # Every member here is factored in float64 (the stacked and looped solvers): ``auto`` is
    # hermite_d2 for each member whose largest distance it takes, hermite_log for the others.
    rules = np.array([path_rule(method, factored=True, diameter=largest[i]) for i in members]) \
        if method == "auto" else np.full(members.size, method)
    for rule, area in stretched.items():
        chosen = members[rules == rule]
        if chosen.size:
            out[chosen] = area(batch, chosen, t_cuts[chosen], rtol, largest[chosen])
    members = members[~np.isin(rules, list(stretched))]
    for T in np.unique(t_cuts[members]):
        group = members[t_cuts[members] == T]
        if canonical_method(method) == "chebyshev":
            out[group] = _chebyshev_areas(batch, group, float(T), rtol)
        elif method == "trapezoid":
            ts = np.linspace(0.0, float(T), n_ts)
            values = np.ones((len(group), n_ts))
            idx = np.repeat(group, n_ts - 1)
            scales = np.tile(ts[1:][::-1], len(group))
            values[:, 1:] = batch.evaluate(idx, scales)[0].reshape(len(group), -1)[:, ::-1]
            out[group] = np.trapezoid(values, ts, axis=1)
        else:
            for i in group:
                with _member_warnings(i):
                    out[i] = _integrate(lambda t, i=i: _one(batch, i, t), float(T),
                                        method=method, rtol=rtol, n_ts=n_ts,
                                        slope=lambda t, i=i: _one_slope(batch, i, t),
                                        diameter=float(largest[i]))
    return _finish(out, failures, errors)



def _one(batch: PreparedBatch, i: int, t: float) -> float:
    return 1.0 if t == 0.0 else float(batch.evaluate([i], [t])[0][0])


def _one_slope(batch: PreparedBatch, i: int, t: float) -> tuple[float, float]:
    mag, dmag = batch.evaluate([i], [t], derivative=True)
    return float(mag[0]), float(dmag[0])


def _chebyshev_areas(batch: PreparedBatch, members: np.ndarray, t_cut: float, rtol: float):
    """The single-space Clenshaw–Curtis integral of many members on one [0, t_cut]: the
    quadrature's nested levels (``_chebyshev._cc_levels``, the single space's loop) evaluated
    for all unfinished members at once (the same nodes), then bisection member by member where
    a panel is not enough."""
    values = np.full((len(members), _CC_LEVELS[-1] + 1), np.nan)  # on the finest grid
    values[:, 0] = 1.0  # Mag(0)
    for k, i in enumerate(members):  # scales a member's own space has evaluated already
        mag = batch.known_magnitude(int(i), t_cut)
        if mag is not None:
            values[k, -1] = mag

    def evaluate(rows, nodes, ts, n):
        return batch.evaluate(members[rows], ts[nodes], complement=t_cut)[0]

    estimate, error = _cc_levels(evaluate, 0.0, t_cut, len(members), rtol=rtol, values=values)
    areas = estimate.copy()
    for k in np.flatnonzero(~(error <= rtol * np.abs(estimate))):  # bisection, as for one space
        i = int(members[k])
        with _member_warnings(i):
            areas[k] = _cc_refine(lambda t, i=i: _one(batch, i, t), t_cut, float(estimate[k]),
                                  rtol)
    return areas


def _log_hermite_areas(batch: PreparedBatch, members: np.ndarray, t_cut: np.ndarray,
                       rtol: float, largest: np.ndarray):
    """The single-space ``hermite_log`` integral of many members, each on its [0, t_cut] and
    with its ``largest`` distance: each stage's scales solved for all unfinished members at once
    (``_quadrature._log_hermite_many``), then bisection member by member where the 57 points
    are not enough."""
    alphas = _stretch_rates(largest, t_cut)

    def slopes(rows, ts):
        return batch.evaluate(members[rows], ts, derivative=True)

    def values(rows, ts):
        return batch.evaluate(members[rows], ts)[0]

    estimate, error = _log_hermite_many(slopes, values, np.ones(len(members)), t_cut, rtol,
                                        alphas)
    return _refined(batch, members, estimate, error, t_cut, rtol, alphas)


def _hermite_d2_areas(batch: PreparedBatch, members: np.ndarray, t_cut: np.ndarray,
                      rtol: float, largest: np.ndarray):
    """The single-space ``hermite_d2`` integral of many members, each on its [0, t_cut] and
    with its ``largest`` distance: each stage's scales solved for all unfinished members at once
    (``_hermite_d2.hermite_d2_many``), then bisection member by member where its
    Clenshaw–Curtis levels are not enough."""
    for i, distance in zip(members, largest, strict=True):
        try:
            check_largest_distance(float(distance))
        except ValueError as exc:
            raise ValueError(f"member {int(i)}: {exc}") from None
    alphas = _stretch_rates(largest, t_cut)

    def derivatives(rows, ts, order):
        if order == 2:
            return np.stack(batch.evaluate(members[rows], ts, derivative=True))
        return np.stack(batch.evaluate_derivatives(members[rows], ts))

    def values(rows, ts):
        return batch.evaluate(members[rows], ts)[0]

    estimate, error = hermite_d2_many(derivatives, values, np.ones(len(members)), t_cut, rtol,
                                      alphas)
    return _refined(batch, members, estimate, error, t_cut, rtol, alphas)


def _stretch_rates(largest: np.ndarray, t_cut: np.ndarray) -> np.ndarray:
    """Each member's stretch rate α for its [0, t_cut] (``_chebyshev._stretch_rate`` of t_cut
    times its ``largest`` distance)."""
    return np.array([_stretch_rate(float(T * L)) for L, T in zip(largest, t_cut, strict=True)])


def _refined(batch: PreparedBatch, members: np.ndarray, estimate: np.ndarray,
             error: np.ndarray, t_cut: np.ndarray, rtol: float, alphas: np.ndarray) -> np.ndarray:
    """The stretched rules' areas: each member's estimate, bisected in the stretched variable
    (``_chebyshev._stretched_refine``) where its error exceeds ``rtol`` times it."""
    areas = estimate.copy()
    for k in np.flatnonzero(~(error <= rtol * np.abs(estimate))):
        i = int(members[k])
        with _member_warnings(i):
            areas[k] = _stretched_refine(lambda t, i=i: _one(batch, i, t), float(t_cut[k]),
                                         float(alphas[k]), float(estimate[k]), rtol)[0]
    return areas
