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
        s_new = None
        if dmag > 0 and math.isfinite(dmag):
            if mag < n:
                t_step = t + math.log((n - mag) / (n - goal)) * (n - mag) / dmag
                s_new = math.log(t_step) if t_step > 0 else None
            else:
                s_new = math.log(t) + (goal - mag) / (t * dmag)
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
        self.t = t_new
        self.iterations += 1
        if self.iterations >= self.max_iter:
            raise RuntimeError(
                f"convergence scale search did not converge in {self.max_iter} iterations.")
        return None


def _find_scale(space, goal: float, *, rtol: float, max_iter: int) -> float:
    """The convergence scale of one prepared space (see :class:`_ScaleSearch`), from the
    space's ``initial_scale()``. A space that evaluates magnitude less accurately than the
    dense path's 1e-10 (the large-n path: to ``solver_rtol · n``) says so in
    ``search_accuracy(goal)``, and the search ends at that accuracy."""
    search = _ScaleSearch(space.n_unique, goal, space.initial_scale(), rtol=rtol,
                          max_iter=max_iter, mag_rtol=space.search_accuracy(goal))
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
