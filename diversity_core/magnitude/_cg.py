"""Conjugate gradients, written once for the dense and the large-n path.

Written out rather than ``scipy.sparse.linalg.cg``: SciPy's loop wraps every product in a
LinearOperator and checks in float64, which cost about as much as a 1,000-point float32
matrix-vector product itself; and the stopping rules below (the energy error's estimate, the
early give-up) are not SciPy's.
"""

from __future__ import annotations

import collections
import math
from typing import NamedTuple

import numpy as np
from scipy.linalg import blas

# Decrements of the CG energy error summed for its estimate (see conjugate_gradients).
_CG_DELAY = 8


class CGResult(NamedTuple):
    """What :func:`conjugate_gradients` ended with."""

    x: np.ndarray
    r: np.ndarray  # the recursively updated residual b - A x
    iterations: int
    estimate: float  # sum of the last _CG_DELAY energy decrements (the energy error's estimate)
    stop: str  # "residual", "energy", "budget", "stalled" (no progress) or "non-finite"


def conjugate_gradients(product, x, r, *, stop: float, budget: int, energy_tol: float = 0.0,
                        give_up_goal: float | None = None) -> CGResult:
    """Conjugate gradients for ``A x = b`` from ``x`` with residual ``r = b − A x`` (copied, not
    changed), in their dtype (NumPy arrays, or torch tensors on their device), until
    ``‖r‖² <= stop``, or, with ``energy_tol > 0``, until the error of the variational estimate
    ``2 bᵀx − xᵀAx`` is estimated below it.

    ``product(p, q)``: ``A p``, into ``q`` if it likes (its return value is used). Python-float
    step sizes are applied to float32 vectors in float32 (NumPy's rules for scalars), so the
    dense float32 solve and the large-n path's on-the-fly one take identical steps.

    That error is ``‖x* − x‖²_A``, and CG lowers it by exactly ``α_k ‖r_k‖²`` at step k: the
    sum of the last ``_CG_DELAY`` decrements is what the error was ``_CG_DELAY`` steps ago minus
    what it is now (Hestenes and Stiefel; Strakoš and Tichý, ETNA 2002), an estimate that is
    reliable once convergence is steady; the loop stops when that sum is below a quarter of
    ``energy_tol`` (a safety factor against slow, linear convergence, where the remaining error
    is a few times the window's decrease).

    ``give_up_goal`` (the residual norm aimed at, ``√stop``): every ten iterations, stop
    ("stalled") when the residual has not shrunk below its start, and, without an energy
    tolerance, when the rate so far says the budget will not reach the goal.
    """
    x, r, p, q = _copy(x), _copy(r), _copy(r), _copy(r)  # q: overwritten by the product
    rr = float(r @ r)
    start = math.sqrt(rr)
    decrements = collections.deque(maxlen=_CG_DELAY)
    if rr <= stop:
        return CGResult(x, r, 0, 0.0, "residual")
    for iteration in range(1, budget + 1):
        q = product(p, q)
        alpha = rr / float(p @ q)
        x += alpha * p
        r -= alpha * q
        decrements.append(alpha * rr)
        if energy_tol > 0 and len(decrements) == _CG_DELAY \
                and sum(decrements) <= 0.25 * energy_tol:
            return CGResult(x, r, iteration, float(sum(decrements)), "energy")
        rr_next = float(r @ r)
        if rr_next <= stop:
            return CGResult(x, r, iteration, float(sum(decrements)), "residual")
        if not math.isfinite(rr_next):
            return CGResult(x, r, iteration, math.inf, "non-finite")
        if give_up_goal is not None and iteration % 10 == 0:
            size, goal = math.sqrt(rr_next), give_up_goal
            if not size < start:  # no progress
                return CGResult(x, r, iteration, math.inf, "stalled")
            if not energy_tol > 0 and size > goal and \
                    iteration * math.log(goal / size) / math.log(size / start) > budget - iteration:
                return CGResult(x, r, iteration, math.inf, "stalled")
        p *= rr_next / rr
        p += r
        rr = rr_next
    return CGResult(x, r, budget, math.inf, "budget")


# Warm starts: the polynomial through the solutions at up to this many scales nearest the new
# one, fewer where its coefficients would amplify their errors more than this (see
# warm_start). CG iterations of a default convergence scale + MagArea at the dense path's
# benchmark's 1,000 points: 378 from the straight line between the neighbours; through 4, 5
# and 6 scales without a bound 317, 313 and 305; through 4 with a bound of 100, 10 and 4: 327,
# 326 and 333 (the bound matters next to the search's nearly coincident scales).
_WARM_START_SCALES = 4
_WARM_START_GAIN = 100.0


def warm_start(solutions: dict, t: float, n: int) -> np.ndarray:
    """A first solution at scale t from ``solutions`` (scale -> solution, n floats each): the
    polynomial in t through those at the ``_WARM_START_SCALES`` scales nearest t (in log t),
    evaluated at t (Lagrange's form), of the highest degree whose coefficients sum to at most
    ``_WARM_START_GAIN`` in absolute value (else fewer scales; one: that solution); zeros
    without any. The Clenshaw–Curtis levels put most new scales between solved ones; against
    the straight line between the two neighbours, the cubic took 13 to 23% fewer CG iterations
    for a convergence scale + MagArea of clustered, uniform and cosine clouds of 1,000 to 2,000
    points on the dense path (the constants' comment gives the counts)."""
    if not solutions:
        return np.zeros(n)
    scales = np.fromiter(solutions, dtype=float)
    nearest = scales[np.argsort(np.abs(np.log(scales / t)), kind="stable")]
    for count in range(min(_WARM_START_SCALES, nearest.size), 0, -1):
        coefficients = _lagrange_coefficients(nearest[:count], t)
        if np.abs(coefficients).sum() <= _WARM_START_GAIN:
            break
    w = np.zeros(n)
    for coefficient, s in zip(coefficients, nearest[:count], strict=True):
        w += coefficient * solutions[float(s)]
    return w


def _lagrange_coefficients(nodes: np.ndarray, t: float) -> np.ndarray:
    """c with Σ c_i f(nodes_i) = p(t) for the polynomial p through (nodes_i, f(nodes_i))
    (distinct nodes; a handful, so plain products)."""
    return np.array([math.prod((t - b) / (a - b) for b in nodes if b != a) for a in nodes])


def _copy(v):
    """A copy of a NumPy array or (the large-n path on a torch device) a torch tensor."""
    return v.copy() if isinstance(v, np.ndarray) else v.clone()


def _symmetric_product(A, x, out=None):
    """A x for a symmetric A of which only the upper triangle (C order) is valid: BLAS symv on
    the Fortran view ``A.T`` (lower triangle), in the dtype of ``A`` (float32 or float64)."""
    symv = blas.ssymv if A.dtype == np.float32 else blas.dsymv
    x = x.astype(A.dtype, copy=False)
    if out is None:
        return symv(1.0, A.T, x, lower=1)
    return symv(1.0, A.T, x, beta=0.0, y=out, lower=1, overwrite_y=1)


def _dense_product(A):
    """``product`` of :func:`conjugate_gradients` for a buffer as :func:`_symmetric_product`'s."""
    return lambda p, q: _symmetric_product(A, p, out=q)


def _conjugate_gradients_from(A, x, r, goal: float, budget: int, energy_tol: float = 0.0):
    """float64 CG on a dense symmetric ``A`` (see :func:`_symmetric_product`) from ``x`` with
    residual ``r`` to ``‖r‖ <= goal`` or the energy tolerance (see :func:`conjugate_gradients`),
    giving up early when the rate says the budget will not do.

    Returns ``(x, r, iterations, estimate)``, or ``(None, None, iterations, inf)`` without
    convergence."""
    result = conjugate_gradients(_dense_product(A), x, r, stop=goal * goal, budget=budget,
                                 energy_tol=energy_tol, give_up_goal=goal)
    if result.stop in ("residual", "energy"):
        return result.x, result.r, result.iterations, result.estimate
    return None, None, result.iterations, math.inf


def _conjugate_gradients(A, b, rtol: float, maxiter: int):
    """CG for ``A x = b`` from ``x = 0`` in the dtype of ``A`` and ``b`` (``A`` as for
    :func:`_symmetric_product`). Returns ``(x, iterations)``; ``x`` satisfies
    ``‖b - A x‖ <= rtol ‖b‖`` (by the recursive residual) unless ``maxiter`` were spent first."""
    result = conjugate_gradients(_dense_product(A), np.zeros_like(b), b,
                                 stop=rtol * rtol * float(b @ b), budget=maxiter)
    return result.x, result.iterations
