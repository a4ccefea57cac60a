"""The convergence-scale search: safeguarded Newton iteration for ``Mag(t) = goal``.

Written as a small state machine (:class:`_ScaleSearch`) that is told ``Mag`` and ``dMag/dt`` at
the scale it asks for, so that a single space (:func:`_find_scale`) and a batch of spaces
(``_batch``, all searches advanced together) take exactly the same steps.
"""

from __future__ import annotations

import math

import numpy as np

from .._threads import map_threads
from ._similarity import elementwise_threads


def _initial_scale(D: np.ndarray) -> float:
    """A first guess: points separate once t exceeds a few inverse nearest-neighbour distances.

    "A few" is 5: over 7 clouds (uniform and clustered, 200 to 1,000 points, d = 2 to 384) the
    search then took 27 evaluations in all (Euclidean; 33 cosine), against 34 (37) with 3 and
    31 to 34 (29 to 34) with 6 to 10."""
    n = D.shape[0]
    nn = np.empty(n)
    # Row blocks through one small buffer per thread: no copy of D, and no fresh memory per
    # block (first touches of fresh pages cost more than the copy here). Each row's minimum is
    # one thread's, so the thread count changes no bit.
    rows = max(1, min(n, 2**17 // n))
    starts = list(range(0, n, rows))
    threads = min(elementwise_threads(n), len(starts))

    def share(part) -> None:
        buffer = np.empty((rows, n))
        for start in part:
            block = buffer[:min(rows, n - start)]
            np.copyto(block, D[start:start + rows])
            block[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
            nn[start:start + len(block)] = block.min(axis=1)

    bounds = np.linspace(0, len(starts), threads + 1).astype(int)
    map_threads(share, [starts[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)],
                threads)
    return 5.0 / np.median(nn)


# From this many distinct points on (every space with a search), the search starts from the root
# of the first-order bound (first_order_scale), found from 5 / median nearest-neighbour distance,
# instead of that first guess itself. In the quadrature study's 63 clouds below 2,048 points
# (benchmarks/results/quadrature_rule.csv, columns search_solves and search_solves_first_order)
# it saved one solve in 40 and two in 6, none in 16, and cost one in one; above, for the
# benchmark's 10,000 clustered points × 64, it took the solves from 5 to 3, on the large-n path
# at 50,000 from 6 to 3. The bound's root takes two or three passes over the distances, each an
# exp(-tD) fill and two sums: about what one solve costs on a batch's 300-point members (0.23
# against 0.6 ms here) and on 1,500 points (where the benchmark's clustered cloud, whose search
# it leaves at 3 solves, took 3 % longer), less from there on.
FIRST_ORDER_FROM = 2
# The bound's root is wanted to this relative accuracy (it lies 0.1 to 6 % above the
# convergence scale at targets 0.95 to 0.99), and Newton's steps on it are capped.
_FIRST_ORDER_RTOL = 1e-3
_FIRST_ORDER_MAX_STEPS = 12
# The predicted stop (see _ScaleSearch): the predicted error of the next scale must lie this
# many times below the tolerance, and the last step at most this share of the one before (the
# quadratic regime: where the search stopped so on the magnitude benchmark's batches and the
# quadrature study's clouds, the share was 1.2e-3 in the median and 2.4e-3 at most; where steps
# shrink more slowly the error model does not hold).
_PREDICTED_SAFETY = 10.0
_PREDICTED_MAX_RATIO = 0.05


class _FirstOrderRoot:
    """Newton's steps towards the scale where the first-order bound on magnitude reaches the
    goal ``n - deficit``, one pair of sums at a time (so that a batch advances its members'
    together): evaluate ``(S0, S1)`` = ``(Σ_{i≠j} exp(-t d_ij), Σ_{i≠j} d_ij exp(-t d_ij))`` at
    :attr:`t` and pass them to :meth:`step`, which returns the root once found, else None.

    Where Z_t is positive definite, Z⁻¹ ⪰ 2I - Z ((Z - I) Z⁻¹ (Z - I) ⪰ 0), so
    Mag(t) = 1ᵀZ⁻¹1 >= n - S0(t): the bound reaches the goal at or after the convergence
    scale, 0.1 to 6 % after it in the clouds measured (targets 0.95 to 0.99; at 0.5 it is
    looser, 15 %). log S0 is convex and decreasing in t (a log-sum-exp), so Newton's steps on
    it approach the root from below after the first one; a step to a scale where S0 underflows
    or t would not be positive goes back by a factor of 4 instead. After
    ``_FIRST_ORDER_MAX_STEPS`` steps the last scale is the answer."""

    def __init__(self, deficit: float, t: float):
        self.target = math.log(deficit)
        self.t = float(t)
        self.steps = 0

    def step(self, s0: float, s1: float) -> float | None:
        t = self.t
        if not (s0 > 0 and s1 > 0 and math.isfinite(s0) and math.isfinite(s1)):
            t_new = t / 4.0
        else:
            t_new = t + (math.log(s0) - self.target) * s0 / s1
            if not t_new > 0:
                t_new = t / 4.0
        self.t, self.steps = t_new, self.steps + 1
        if abs(t_new - t) <= _FIRST_ORDER_RTOL * t_new or self.steps >= _FIRST_ORDER_MAX_STEPS:
            return t_new
        return None


def first_order_scale(pair_sums, deficit: float, t: float) -> float:
    """The scale where the first-order bound on magnitude reaches the goal ``n - deficit``,
    by Newton's steps from ``t`` (:class:`_FirstOrderRoot`); ``pair_sums(t)`` returns
    ``(S0, S1)``, one pass over the distances."""
    root = _FirstOrderRoot(deficit, t)
    while True:
        result = root.step(*pair_sums(root.t))
        if result is not None:
            return result


def first_scale(n: int, goal: float, t0: float, pair_sums) -> float:
    """The search's first scale for a space of ``n`` distinct points: the first-order bound's
    root (see :func:`first_order_scale`) from ``FIRST_ORDER_FROM`` points on, else ``t0``
    (5 / median nearest-neighbour distance)."""
    if n < FIRST_ORDER_FROM:
        return t0
    return first_order_scale(pair_sums, n - goal, t0)


def first_scales(n, goals, t0, pair_sums_many) -> np.ndarray:
    """:func:`first_scale` of many spaces at once, their Newton steps taken together:
    ``pair_sums_many(k, ts)`` returns the arrays ``(S0, S1)`` of spaces ``k`` (indices into
    ``n``) at scales ``ts``. Each space takes the very steps of its own :func:`first_scale`."""
    scales = np.array(t0, dtype=float)
    roots = {k: _FirstOrderRoot(n[k] - goals[k], scales[k])
             for k in range(len(scales)) if n[k] >= FIRST_ORDER_FROM}
    while roots:
        k_all = np.fromiter(roots, dtype=np.intp, count=len(roots))
        s0, s1 = pair_sums_many(k_all, np.array([roots[k].t for k in k_all.tolist()]))
        for j, k in enumerate(k_all.tolist()):
            result = roots[k].step(float(s0[j]), float(s1[j]))
            if result is not None:
                scales[k] = result
                del roots[k]
    return scales


def _no_convergence_scale(n_points: int) -> str:
    """Why a space of one distinct point has no convergence scale."""
    return (("a space with a single point" if n_points == 1 else
             f"a space with a single distinct point ({n_points} copies)")
            + " has no convergence scale: its magnitude is 1 at every scale.")


class _ScaleSearch:
    """Safeguarded Newton iteration for Mag(t) = goal, one evaluation at a time.

    The Newton model is that the deficit n - Mag(t) decays exponentially in t (as it does once
    every point's nearest neighbour counts: n - Mag ~ Σ exp(-t d_nn)), so the root of
    log(n - Mag(t)) = log(n - goal) is sought, with derivative -Mag'(t) / (n - Mag(t)). From
    the same first guess this took one evaluation fewer than Newton on Mag(e^s) itself in 4 of
    5 clouds tried (300 to 1,000 points, d = 2 to 384), two fewer in one. Where Mag >= n (not
    for spaces of negative type) the step is Newton's on Mag(e^s).

    A bracket [lo, hi] with Mag(lo) < goal <= Mag(hi) is found by steps of at most x4 from the
    guess and then shrunk at every evaluation; a step that leaves the bracket, or that a
    non-positive derivative makes meaningless, is replaced by bisection in log t.

    Newton's error squares at every step (e_{k+1} ≈ C e_k², with e_k ≈ the step δ_k taken from
    t_k), so two Newton steps in a row tell C ≈ |δ_k| / δ_{k-1}² and the error of the scale
    the second one reaches, |δ_k| (δ_k / δ_{k-1})². Where that is below ``rtol`` t /
    ``_PREDICTED_SAFETY`` the search ends there without evaluating it: the evaluation would
    only confirm it. From the first-order start the search reaches Mag within 1e-10 of the goal
    in three evaluations in most spaces, the third of them that confirmation; on the 200
    cosine sets of 300 points and 1,000 of 10 of the magnitude benchmark's batches, and in 94
    of the 98 searches of the quadrature study's clouds up to 2,000 points, the predicted stop
    ended the search one evaluation earlier at the very same scale (bit for bit), and it never
    ended one at another.

    Usage: evaluate Mag and dMag/dt at :attr:`t`, pass them to :meth:`step`; it returns the
    convergence scale once found, else None (and :attr:`t` is the next scale to evaluate).
    """

    def __init__(self, n: int, goal: float, t0: float, *, rtol: float, max_iter: int,
                 mag_rtol: float = 1e-10):
        self.n, self.goal, self.rtol, self.max_iter = n, goal, rtol, max_iter
        self.mag_rtol = mag_rtol  # |Mag - goal| below this (relative) ends the search
        self.t = float(t0)
        self.lo = self.hi = None
        self.iterations = 0
        self.newton_step = None  # the last step, where it was Newton's own (not clamped)

    def step(self, mag: float, dmag: float) -> float | None:
        n, goal, rtol, t = self.n, self.goal, self.rtol, self.t
        lo, hi = self.lo, self.hi
        if mag < goal:
            lo = t if lo is None else max(lo, t)
        else:
            hi = t if hi is None else min(hi, t)
        self.lo, self.hi = lo, hi
        if abs(mag - goal) <= self.mag_rtol * goal:
            return t
        if lo is not None and hi is not None and (hi - lo) <= rtol * hi:
            return 0.5 * (lo + hi)
        s_new = newton = None
        if dmag > 0 and math.isfinite(dmag):
            if mag < n:
                t_step = t + math.log((n - mag) / (n - goal)) * (n - mag) / dmag
                s_new = math.log(t_step) if t_step > 0 else None
            else:
                s_new = math.log(t) + (goal - mag) / (t * dmag)
            newton = s_new
        if lo is None or hi is None:
            # Still bracketing: allow Newton to jump, but at most by a factor of 4 each way.
            bound_lo, bound_hi = math.log(t) - math.log(4.0), math.log(t) + math.log(4.0)
            if s_new is None:
                s_new = bound_hi if mag < goal else bound_lo
            s_new = min(max(s_new, bound_lo), bound_hi)
        else:
            log_lo, log_hi = math.log(lo), math.log(hi)
            if s_new is None or not (log_lo < s_new < log_hi):
                s_new = 0.5 * (log_lo + log_hi)
        t_new = math.exp(s_new)
        if lo is not None and hi is not None and abs(t_new - t) <= rtol * t:
            return t_new
        step, previous = t_new - t, self.newton_step
        self.newton_step = step if s_new == newton else None
        if self.newton_step is not None and previous is not None \
                and abs(step) <= _PREDICTED_MAX_RATIO * abs(previous) \
                and abs(step) * (step / previous) ** 2 <= rtol * t_new / _PREDICTED_SAFETY:
            return t_new
        self.t = t_new
        self.iterations += 1
        if self.iterations >= self.max_iter:
            raise RuntimeError(
                f"convergence scale search did not converge in {self.max_iter} iterations.")
        return None


def _find_scale(space, goal: float, *, rtol: float, max_iter: int) -> float:
    """The convergence scale of one prepared space (see :class:`_ScaleSearch`), from
    :func:`first_scale` (the space's ``initial_scale()`` and ``pair_sums``). A space that
    evaluates magnitude less accurately than the dense path's 1e-10 (the large-n path: to
    ``solver_rtol · n``) says so in ``search_accuracy(goal)``, and the search ends at that
    accuracy."""
    t0 = first_scale(space.n_unique, goal, space.initial_scale(), space.pair_sums)
    search = _ScaleSearch(space.n_unique, goal, t0, rtol=rtol, max_iter=max_iter,
                          mag_rtol=space.search_accuracy(goal))
    while True:
        result = search.step(*space.magnitude_and_derivative(search.t))
        if result is not None:
            return result


def find_convergence_scale(space, target: float, *, rtol: float, max_iter: int) -> float:
    """The convergence scale of a prepared space for ``target`` (a share of its distinct
    points); the checks and messages of :func:`~diversity_core.magnitude.convergence_scale`."""
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must lie in (0, 1); got {target}.")
    if space.n_unique == 1:
        raise ValueError(_no_convergence_scale(space.n_points))
    return _find_scale(space, target * space.n_unique, rtol=rtol, max_iter=max_iter)
