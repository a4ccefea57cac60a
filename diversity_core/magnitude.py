"""Metric space magnitude: magnitude functions, convergence scales, MagArea and MagDiff.

Definitions (Leinster 2013; Limbeck et al., "Metric Space Magnitude for Evaluating the Diversity
of Latent Representations", §3):

* similarity matrix ``Z_t = exp(-t D)`` (elementwise) of an (n, n) distance matrix ``D``;
* weighting ``w`` solving ``Z_t w = 1`` and magnitude ``Mag(t) = sum(w) = 1ᵀ Z_t⁻¹ 1``, with
  ``Mag(0) := 1`` by definition and ``Mag(t) -> n`` as ``t -> inf``;
* convergence scale ``t_conv``: the scale with ``Mag(t_conv) = target * n`` (paper: 0.95), n
  the number of distinct points;
* MagArea ``= ∫_0^t_cut Mag(t) dt`` and MagDiff ``= ∫_0^t_cut (Mag_X(t) - Mag_ref(t)) dt``.

How it is computed, and why it differs from the authors' ``magnipy``:

* One Cholesky factorisation ``Z_t = L Lᵀ`` per scale and ONE triangular solve:
  ``Mag(t) = ‖L⁻¹ 1‖²``. The weighting needs a second solve and is only formed when asked for
  (weights, the derivative). From ``CG_MIN_POINTS`` distinct points on, conjugate gradients
  come first: ``Z_t`` is well conditioned near the convergence scale, where a few dozen O(n²)
  iterations replace an O(n³) factorisation (see :class:`MagnitudeSpace`).
* The convergence scale is found by safeguarded Newton iteration on ``log t`` with the exact
  derivative ``dMag/dt = wᵀ (D ∘ Z_t) w`` (O(n²) once ``w`` is known), inside a bracket that is
  never left; magnipy brackets by factors of 10 and runs toms748 without derivatives.
* MagArea is a true integral by default: Clenshaw–Curtis quadrature on nested Chebyshev grids
  (17, 33, 65, ... scales), refined until the error estimated from the decay of the Chebyshev
  coefficients is below a relative tolerance (default 1e-8). The magnitude function is smooth on
  [0, t_cut], so this converges geometrically: 33 evaluations give a relative error of about
  1e-11 on a 500-point cloud, where ``scipy.integrate.quad``'s adaptive Gauss–Kronrod needs 147
  for rtol 1e-8 (it is kept as ``method="quad"`` for cross-checks). The grid's end points are
  free: Mag(0) = 1, and Mag(t_cut) is usually known from the convergence-scale search. The
  paper's evenly spaced trapezoid rule is ``method="trapezoid"``, for comparison with published
  numbers.
* :class:`MagnitudeSpace` validates and de-duplicates a distance matrix once and remembers every
  scale it has evaluated, so that a convergence scale, a MagArea and a magnitude function of the
  same space share their work. The functions below accept it wherever they accept ``D``.
* Duplicate points make ``Z_t`` singular. By the twin property the magnitude of a space with
  duplicates equals that of the de-duplicated space; we merge exact duplicates *without
  re-ordering anything*: weights are returned in input order, a duplicated point's weight split
  equally among its copies (so ``Z_t w = 1`` still holds for the full matrix). magnipy uses
  ``np.unique``, which sorts the rows, and silently adds ``0.01 I`` on any failure.
* ``Z_t`` of a space that is not of negative type may be indefinite (Leinster's K_{3,2} graph
  metric below t = log √2, say) or singular: Cholesky then fails, and we fall back to a
  symmetric-indefinite LDLᵀ solve (or, for a singular matrix, an eigendecomposition with a
  pseudo-inverse) and emit a :class:`MagnitudeWarning` naming the scale — never a silently wrong
  number. Euclidean and cityblock distances are of negative type, so their ``Z_t`` is positive
  definite for distinct points. So is the cosine one, although cosine distance is no metric:
  ``exp(-t (1 - cos)) = e^{-t} exp(t <x̂, ŷ>)`` is an exponential of a positive semi-definite
  kernel (Schur product theorem). It can still be numerically singular at small ``t`` when there
  are many more points than dimensions, which is where the fallback then applies.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import warnings

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from scipy import integrate
from scipy.fft import dct
from scipy.linalg import lapack
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from threadpoolctl import ThreadpoolController

from ._validation import check_distance_matrix, check_scales

__all__ = [
    "MagnitudeSpace",
    "MagnitudeWarning",
    "magnitude_function",
    "magnitude_weights",
    "magnitude_derivative",
    "convergence_scale",
    "mag_area",
    "mag_diff",
    "reference_free_t_cut",
    "reference_based_t_cut",
]

# Points closer than this (relative to the largest distance) are treated as duplicates: their
# rows of Z_t agree to machine precision at every scale, so Z_t is numerically singular anyway.
DUPLICATE_RTOL = 1e-12
INTEGRATION_METHODS = ("chebyshev", "quad", "trapezoid")
# Nested Clenshaw–Curtis grids: N + 1 Chebyshev points on a panel; each contains the previous.
_CC_LEVELS = (16, 32, 64)
_MAX_BISECTIONS = 20
DIFF_NORMALISATIONS = (None, "t_cut", "reference_area")
# float64 is the default: a single float32 factorisation is about twice as fast, but at large t
# it meets subnormal intermediates (20 times slower than float64 for 500 points), and measured
# end to end (convergence scale + MagArea, 1,000 to 2,000 points, quiet 2-core machine) the mixed
# path was 2.5 to 3 times slower with the direct solver and no faster with conjugate gradients.
PRECISIONS = ("double", "mixed")
SOLVERS = ("auto", "direct")
# Conjugate gradients are tried from this many distinct points on, with a budget of n / 40
# iterations: one Cholesky factorisation cost 70 to 180 matrix-vector products here (n = 1,000
# to 4,000, one thread), so a failed attempt costs at most about half a factorisation. Below
# 1,000 points a factorisation costs only a few dozen products.
CG_MIN_POINTS = 1000
CG_RTOL = 1e-10  # relative residual; Mag then agrees with the direct solve to ~1e-11
# Below this many distinct points, BLAS/LAPACK run single-threaded: a 500-point factorisation is
# 1.6 ms on one thread and 2.6 ms on two here, convergence scale + MagArea of 1,000 points took
# 0.17 s on one thread and 0.29 s on two (2,000 points: 0.96 s and 0.69 s), and threads that
# spin-wait on an oversubscribed machine made a 300-point MagArea 100 times slower (11 s, 0.1 s).
SINGLE_THREAD_BELOW = 1500


@functools.cache
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()


class MagnitudeWarning(UserWarning):
    """The similarity matrix was not positive definite; a fallback solver was used."""


class MagnitudeSpace:
    """A distance matrix prepared for magnitude: validated and de-duplicated once, with a memory
    of every scale evaluated.

    Parameters
    ----------
    D : array of shape (n, n)
        Distance matrix (see :func:`diversity_core.pairwise_distances`).
    precision : {"double", "mixed"}
        ``double`` (default): float64 Cholesky. ``mixed``: factorise ``Z_t`` in float32 (about
        twice the speed of float64 in LAPACK) and refine the weighting in float64 until the
        residual ``1 - Z_t w`` reaches float64 round-off; where float32 cannot factorise ``Z_t``
        or refinement stalls (``Z_t`` too ill-conditioned, at small ``t``), the scale is redone
        in float64. The result is a float64-accurate weighting either way (see ``PRECISIONS``
        for when it pays off).
    solver : {"auto", "direct"}
        ``auto`` (default): for spaces of at least ``CG_MIN_POINTS`` distinct points, first try
        conjugate gradients (O(n²) per iteration, warm-started from the last solution) with a
        budget of n / 40 iterations, about half the cost of one factorisation; ``Z_t`` is well
        conditioned at the scales that matter most (4 to 60 iterations for t ≥ 0.3 t_conv on
        3,000 clustered or cosine points), badly at small t, where CG is abandoned for that
        scale and every smaller one in favour of the Cholesky factorisation. ``direct``:
        Cholesky only.

    Attributes
    ----------
    n_points : int
        Number of input points, duplicates included.
    n_unique : int
        Number of distinct points (the twin property merges exact duplicates).

    Examples
    --------
    >>> space = MagnitudeSpace(pairwise_distances(X))
    >>> t_conv = space.convergence_scale()
    >>> area = space.mag_area(t_conv)   # reuses Mag(t_conv) from the search
    """

    def __init__(self, D, *, precision: str = "double", solver: str = "auto", name: str = "D"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}; got {precision!r}.")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}; got {solver!r}.")
        self.precision = precision
        self.solver = solver
        D = check_distance_matrix(D, name=name)
        self.n_points = D.shape[0]
        tol = DUPLICATE_RTOL * max(float(D.max()), 1.0)
        # Sparse graph of near-zero distances (the diagonal and any duplicates): a dense input
        # would make csgraph copy D as float64.
        rows, cols = np.nonzero(D <= tol)
        close = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=D.shape)
        n_groups, labels = connected_components(close, directed=False)
        if n_groups < self.n_points:
            # First occurrence of each group, in input order: nothing the caller sees is reordered.
            _, first = np.unique(labels, return_index=True)
            keep = np.sort(first)
            relabel = np.empty(n_groups, dtype=np.intp)
            relabel[labels[keep]] = np.arange(n_groups)
            self.group_of_point = relabel[labels]
            self.multiplicity = np.bincount(self.group_of_point, minlength=n_groups)
            D = np.ascontiguousarray(D[np.ix_(keep, keep)])
        else:
            self.group_of_point = None
            self.multiplicity = None
        self.D = D
        self.n_unique = D.shape[0]
        self._ones = np.ones(self.n_unique)
        self._Z = np.empty_like(D)  # one buffer reused across scales
        self._Z_scale = None  # the t whose exp(-tD) the buffer holds intact, if any
        self._Z32 = np.empty(D.shape, dtype=np.float32) if self.precision == "mixed" else None
        self._cache: dict[float, float] = {0.0: 1.0}  # scale -> Mag; Mag(0) := 1
        self._use_cg = solver == "auto" and self.n_unique >= CG_MIN_POINTS
        self._cg_floor = 0.0  # CG did not converge at this scale: not tried at or below it
        self._cg_last = None  # last CG solution: the warm start of the next one
        # Measured costs (seconds) of one factorisation and one CG iteration on this machine:
        # the CG budget is half a factorisation's worth of iterations once both are known.
        self._seconds_factor = None
        self._seconds_cg_iteration = None

    # -- linear algebra at one scale ----------------------------------------------------------
    def _similarity(self, t: float) -> np.ndarray:
        """exp(-tD) in the reusable buffer."""
        if self._Z_scale != t:
            np.multiply(self.D, -t, out=self._Z)
            # Entries are kept >= exp(-345) = 1e-150, so that products of two of them, as formed
            # by the factorisation, stay normal floats: subnormals make LAPACK orders of
            # magnitude slower. Next to the diagonal 1 the change is nil (norm <= n·1e-150).
            np.maximum(self._Z, -345.0, out=self._Z)
            np.exp(self._Z, out=self._Z)
            self._Z_scale = t
        return self._Z

    def _factor(self, t: float):
        """float64 Cholesky factor of Z_t, in place of the buffer (lower, Fortran view), or None
        if Z_t is not numerically positive definite."""
        Z = self._similarity(t)
        self._Z_scale = None  # overwritten by the factor
        # Z is symmetric, so its transpose is the same matrix in Fortran order: LAPACK then works
        # in place without a copy. clean=0 leaves the unused triangle as it is.
        start = time.perf_counter()
        L, info = lapack.dpotrf(Z.T, lower=1, clean=0, overwrite_a=1)
        self._seconds_factor = time.perf_counter() - start
        return L if info == 0 else None

    def _solve_mixed(self, t: float, max_refinements: int = 8):
        """Weighting by a float32 Cholesky factor and float64 iterative refinement, or None.

        Refinement converges when cond(Z_t) · 6e-8 < 1; it stops at the float64 round-off floor
        of the residual, 64 eps (Z |w|). This is what LAPACK's dsposv does, but SciPy does not wrap
        dsposv, hence this loop.
        """
        Z = self._similarity(t)
        Z32 = self._Z32
        Z32[...] = Z
        # Products of entries below ~1e-19 are float32 subnormals, on which spotrf ran 35 times
        # slower (31 ms instead of 0.9 ms for 500 points at large t). Zeroing entries below
        # 1e-15 perturbs Z32 by a matrix of norm <= n·1e-15, far below float32's precision;
        # the refinement's float64 residuals see the exact Z.
        Z32[Z32 < 1e-15] = 0.0
        start = time.perf_counter()
        L32, info = lapack.spotrf(Z32.T, lower=1, clean=0, overwrite_a=1)
        self._seconds_factor = time.perf_counter() - start
        if info != 0:
            return None
        w = lapack.spotrs(L32, self._ones.astype(np.float32), lower=1)[0].astype(np.float64)
        previous = np.inf
        for _ in range(max_refinements):
            residual = self._ones - Z @ w
            size = float(np.abs(residual).max())
            floor = 64 * np.finfo(np.float64).eps * float((Z @ np.abs(w)).max())
            if size <= floor:
                return w
            if size > 0.5 * previous:  # stalled: float32 is not accurate enough for this Z
                return None
            previous = size
            w += lapack.spotrs(L32, residual.astype(np.float32), lower=1)[0]
        return None

    def _solve_fallback(self, t: float) -> np.ndarray:
        """Weighting for a similarity matrix that is not numerically positive definite."""
        Z = np.exp(-t * self.D)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
                w = scipy.linalg.solve(Z, self._ones, assume_a="sym", check_finite=False)
            warnings.warn(
                f"similarity matrix exp(-tD) is not positive definite at t={t:.6g}; magnitude "
                "computed with a symmetric indefinite (LDLᵀ) solve. This happens for distances "
                "that are not of negative type, where magnitude may be non-monotone, negative or "
                "have poles, and for numerically singular Z at very small t.",
                MagnitudeWarning,
                stacklevel=4,
            )
            return w
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
            pass
        evals, evecs = np.linalg.eigh(Z)
        cutoff = np.abs(evals).max() * self.n_unique * np.finfo(float).eps
        keep = np.abs(evals) > cutoff
        coef = (evecs[:, keep].T @ self._ones) / evals[keep]
        warnings.warn(
            f"similarity matrix exp(-tD) is singular at t={t:.6g} "
            f"({int((~keep).sum())} eigenvalue(s) below {cutoff:.3g}); magnitude computed with "
            "the pseudo-inverse, i.e. on the subspace where Z is invertible.",
            MagnitudeWarning,
            stacklevel=4,
        )
        return evecs[:, keep] @ coef

    def _solve_cg(self, t: float):
        """Weighting by conjugate gradients within the iteration budget, or None."""
        if not self._use_cg or t <= self._cg_floor:
            return None
        Z = self._similarity(t)
        budget = self._cg_budget()
        iterations = 0

        def count(_):
            nonlocal iterations
            iterations += 1

        start = time.perf_counter()
        w, info = scipy.sparse.linalg.cg(Z, self._ones, x0=self._cg_last, rtol=CG_RTOL,
                                         atol=0.0, maxiter=budget, callback=count)
        if iterations:
            self._seconds_cg_iteration = (time.perf_counter() - start) / iterations
        if info != 0:
            self._cg_floor = max(self._cg_floor, t)
            return None
        self._cg_last = w
        return w

    def _cg_budget(self) -> int:
        """Iterations worth about half a factorisation: measured where possible (a float32
        factorisation of 4,000 points cost 11 CG iterations on a quiet 2-core machine, 70 to 180
        under load), else n / 40."""
        if self._seconds_factor is None or self._seconds_cg_iteration is None:
            return max(20, self.n_unique // 40)
        return max(5, int(0.5 * self._seconds_factor / self._seconds_cg_iteration))

    def _fast_weights(self, t: float):
        """Weighting by CG or the mixed-precision factorisation, or None where neither applies."""
        w = self._solve_cg(t)
        if w is None and self.precision == "mixed":
            w = self._solve_mixed(t)
        return w

    def _blas_threads(self):
        if self.n_unique < SINGLE_THREAD_BELOW:
            return _threadpools().limit(limits=1, user_api="blas")
        return contextlib.nullcontext()

    def magnitude(self, t: float) -> float:
        """Mag(t) at one scale t >= 0 (effective number of points)."""
        t = float(t)
        if t not in self._cache:
            with self._blas_threads():
                self._cache[t] = self._magnitude(t)
        return self._cache[t]

    def _magnitude(self, t: float) -> float:
        if t == 0.0:
            return 1.0
        w = self._fast_weights(t)
        if w is not None:
            return float(w.sum())
        L = self._factor(t)
        if L is None:
            return float(self._solve_fallback(t).sum())
        v, _ = lapack.dtrtrs(L, self._ones, lower=1)
        return float(v @ v)  # ‖L⁻¹1‖²: one triangular solve

    def weights(self, t: float) -> np.ndarray:
        """Weighting of the input points at t > 0; see :func:`magnitude_weights`."""
        return self.expand_weights(self.unique_weights(t))

    def unique_weights(self, t: float) -> np.ndarray:
        """Weighting of the de-duplicated space (shape (n_unique,)); t > 0."""
        with self._blas_threads():
            return self._unique_weights(t)

    def _unique_weights(self, t: float) -> np.ndarray:
        w = self._fast_weights(t)
        if w is not None:
            return w
        L = self._factor(t)
        if L is None:
            return self._solve_fallback(t)
        v, _ = lapack.dtrtrs(L, self._ones, lower=1)
        w, _ = lapack.dtrtrs(L, v, lower=1, trans=1)
        return w

    def magnitude_and_derivative(self, t: float) -> tuple[float, float]:
        """Mag(t) and dMag/dt = wᵀ (D ∘ Z_t) w."""
        with self._blas_threads():
            w = self._unique_weights(t)
            mag = float(w.sum())
            self._cache.setdefault(float(t), mag)
            return mag, float(w @ self._weighted_distance_product(t, w))

    def _weighted_distance_product(self, t: float, w: np.ndarray, block: int = 2048):
        """(D ∘ exp(-tD)) w, from the buffer if it still holds exp(-tD), else in row blocks:
        O(block·n) memory instead of another n×n matrix."""
        out = np.empty(self.n_unique)
        if self._Z_scale == t:
            for start in range(0, self.n_unique, block):
                rows = slice(start, start + block)
                out[rows] = (self.D[rows] * self._Z[rows]) @ w
            return out
        for start in range(0, self.n_unique, block):
            Db = self.D[start:start + block]
            out[start:start + block] = (Db * np.exp(-t * Db)) @ w
        return out

    def expand_weights(self, w_unique: np.ndarray) -> np.ndarray:
        """Weights of the input points: a duplicated point's weight shared among its copies."""
        if self.group_of_point is None:
            return w_unique
        return (w_unique / self.multiplicity)[self.group_of_point]


    # -- the public operations, also available as functions of D -----------------------------
    def magnitude_function(self, ts) -> np.ndarray:
        """Mag(t) for each scale; see :func:`magnitude_function`."""
        return np.array([self.magnitude(t) for t in check_scales(ts)])

    def convergence_scale(self, target: float = 0.95, **kwargs) -> float:
        """See :func:`convergence_scale`."""
        return convergence_scale(self, target, **kwargs)

    def mag_area(self, t_cut: float, **kwargs) -> float:
        """See :func:`mag_area`."""
        return mag_area(self, t_cut, **kwargs)


def _as_space(D, name: str = "D") -> MagnitudeSpace:
    return D if isinstance(D, MagnitudeSpace) else MagnitudeSpace(D, name=name)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def magnitude_function(D, ts) -> np.ndarray:
    """Magnitude of ``D`` at each scale in ``ts``.

    Parameters
    ----------
    D : array of shape (n, n)
        Distance matrix (see :func:`diversity_core.pairwise_distances`).
    ts : float or array of shape (n_scales,)
        Non-negative scales (units: 1 / distance).

    Returns
    -------
    mag : array of shape (n_scales,)
        ``Mag(t)`` in effective number of points; ``Mag(0) = 1``.
    """
    return _as_space(D).magnitude_function(ts)


def magnitude_weights(D, t: float) -> np.ndarray:
    """Weighting ``w`` with ``Z_t w = 1`` at scale ``t > 0``, in the order of the input points.

    Returns
    -------
    w : array of shape (n,)
        ``w.sum()`` is the magnitude. Copies of a duplicated point share its weight equally.
    """
    t = float(check_scales(t, name="t")[0])
    if t == 0.0:
        raise ValueError("the weighting is not defined at t = 0 (Z_0 is the all-ones matrix).")
    return _as_space(D).weights(t)


def magnitude_derivative(D, ts) -> np.ndarray:
    """``dMag/dt`` at each (positive) scale, ``wᵀ (D ∘ Z_t) w``.

    Returns
    -------
    dmag : array of shape (n_scales,), in points per unit of scale.
    """
    ts = check_scales(ts)
    if np.any(ts == 0):
        raise ValueError("the derivative is evaluated at t > 0 only.")
    space = _as_space(D)
    return np.array([space.magnitude_and_derivative(float(t))[1] for t in ts])


def convergence_scale(
    D, target: float = 0.95, *, rtol: float = 1e-9, max_iter: int = 100
) -> float:
    """The scale ``t_conv`` at which ``Mag(t_conv) = target * n`` (paper, Definition 3.5).

    ``n`` counts *distinct* points: by the twin property magnitude is that of the de-duplicated
    space, which tends to the number of distinct points, so a target on all input points could be
    out of reach (a set of 10 generated texts with 3 identical ones, say). magnipy's ``Magnipy``
    de-duplicates its input with ``np.unique`` first and does the same.

    Parameters
    ----------
    D : array of shape (n, n)
    target : float in (0, 1)
        Share of the cardinality to reach (paper: 0.95).
    rtol : float
        Relative tolerance on ``t_conv``; the search also stops once ``Mag`` is within 1e-10
        (relative) of the target, the accuracy to which the solvers evaluate it.

    Returns
    -------
    t_conv : float (units: 1 / distance)
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must lie in (0, 1); got {target}.")
    space = _as_space(D)
    if space.n_unique == 1:
        raise ValueError(
            f"a space with a single distinct point ({space.n_points} copies) has no convergence "
            "scale: its magnitude is 1 at every scale."
        )
    goal = target * space.n_unique
    return _find_scale(space, goal, rtol=rtol, max_iter=max_iter)


def _initial_scale(space: MagnitudeSpace) -> float:
    """A first guess: points separate once t exceeds a few inverse nearest-neighbour distances."""
    nn = np.empty(space.n_unique)
    for start in range(0, space.n_unique, 2048):  # row blocks: no copy of D
        block = space.D[start:start + 2048].copy()
        block[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        nn[start:start + 2048] = block.min(axis=1)
    return 3.0 / np.median(nn)


def _find_scale(space: MagnitudeSpace, goal: float, *, rtol: float, max_iter: int) -> float:
    """Safeguarded Newton iteration in s = log t for Mag(e^s) = goal.

    A bracket [lo, hi] with Mag(lo) < goal <= Mag(hi) is found by steps of x4 from the guess and
    then shrunk at every evaluation; a Newton step (dMag/ds = t dMag/dt) that leaves the bracket,
    or that a non-positive derivative makes meaningless, is replaced by bisection in log t.
    """
    t = _initial_scale(space)
    lo = hi = None
    for _ in range(max_iter):
        mag, dmag = space.magnitude_and_derivative(t)
        if mag < goal:
            lo = t if lo is None else max(lo, t)
        else:
            hi = t if hi is None else min(hi, t)
        if abs(mag - goal) <= 1e-10 * goal:
            return t
        if lo is not None and hi is not None and (hi - lo) <= rtol * hi:
            return 0.5 * (lo + hi)
        slope = t * dmag  # dMag / d(log t)
        step_ok = slope > 0 and math.isfinite(slope)
        s_new = math.log(t) + (goal - mag) / slope if step_ok else None
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
        t = t_new
    raise RuntimeError(f"convergence scale search did not converge in {max_iter} iterations.")


def mag_area(
    D,
    t_cut: float,
    *,
    method: str = "chebyshev",
    rtol: float = 1e-8,
    n_ts: int = 30,
) -> float:
    """Area under the magnitude function, ``MagArea = ∫_0^t_cut Mag(t) dt`` (Definition 3.3).

    Parameters
    ----------
    D : array of shape (n, n)
    t_cut : float
        Upper end of the integration interval (see :func:`reference_free_t_cut`).
    method : {"chebyshev", "quad", "trapezoid"}
        ``chebyshev`` (default): Clenshaw–Curtis on nested Chebyshev grids (17, 33, 65, ...
        scales, end points included), refined until the error estimated from the trailing
        Chebyshev coefficients is below ``rtol`` (relative). ``quad``: scipy's adaptive
        Gauss–Kronrod
        to ``rtol`` (about twice the evaluations). ``trapezoid``: the paper's rule on ``n_ts``
        evenly spaced scales in [0, t_cut], 0 included (magnipy's default is 30; the paper
        era used 10); its error is not controlled.

    Returns
    -------
    area : float (units: effective points × scale)
    """
    return _integrate(_as_space(D).magnitude, t_cut, method=method, rtol=rtol, n_ts=n_ts)


def mag_diff(
    D_x,
    D_ref,
    t_cut: float,
    *,
    method: str = "chebyshev",
    rtol: float = 1e-8,
    n_ts: int = 30,
    normalise: str | None = None,
    absolute: bool = False,
    reference_area: float | None = None,
) -> float:
    """Signed difference of magnitude functions, ``∫_0^t_cut (Mag_X(t) - Mag_ref(t)) dt``.

    The convention of this package is the plain, signed integral (Definition 3.4): negative when
    ``X`` is less diverse than the reference. The conventions found elsewhere are options:

    * ``normalise="t_cut"``: divided by ``t_cut``, the mean difference in effective points (the
      magnipy ``Magnipy`` class);
    * ``normalise="reference_area"``: divided by the reference's MagArea, a relative change (the
      paper's image experiment);
    * ``absolute=True``: the absolute value (magnipy's ``MagDiff`` default).

    Parameters
    ----------
    D_x, D_ref : arrays of shape (n, n) and (m, m)
        Distance matrices of the compared and the reference space; n and m may differ.
    t_cut : float
        Usually the reference's convergence scale (:func:`reference_based_t_cut`).
    reference_area : float, optional
        The reference's MagArea on [0, t_cut] with the same method, if already known (it is
        reused when one reference is compared with many spaces).

    Returns
    -------
    diff : float
    """
    if normalise not in DIFF_NORMALISATIONS:
        raise ValueError(f"normalise must be one of {DIFF_NORMALISATIONS}; got {normalise!r}.")
    area_x = mag_area(D_x, t_cut, method=method, rtol=rtol, n_ts=n_ts)
    if reference_area is None:
        reference_area = mag_area(D_ref, t_cut, method=method, rtol=rtol, n_ts=n_ts)
    diff = area_x - reference_area
    if normalise == "t_cut":
        diff /= t_cut
    elif normalise == "reference_area":
        diff /= reference_area
    return abs(diff) if absolute else diff


def reference_free_t_cut(distance_matrices, target: float = 0.95) -> float:
    """Common integration limit for comparing spaces without a reference: the median of their
    convergence scales (paper §3.4).

    Parameters
    ----------
    distance_matrices : iterable of arrays of shape (n_i, n_i)

    Returns
    -------
    t_cut : float
    """
    scales = [convergence_scale(D, target) for D in distance_matrices]
    if not scales:
        raise ValueError("reference_free_t_cut needs at least one distance matrix.")
    return float(np.median(scales))


def reference_based_t_cut(D_ref, target: float = 0.95) -> float:
    """Integration limit for comparisons with a reference: the reference's convergence scale."""
    return convergence_scale(D_ref, target)


def _integrate(f, t_cut: float, *, method: str, rtol: float, n_ts: int) -> float:
    t_cut = float(check_scales(t_cut, name="t_cut")[0])
    if method not in INTEGRATION_METHODS:
        raise ValueError(f"method must be one of {INTEGRATION_METHODS}; got {method!r}.")
    if t_cut == 0.0:
        return 0.0
    if method == "trapezoid":
        if n_ts < 2:
            raise ValueError(f"the trapezoid rule needs n_ts >= 2 scales; got {n_ts}.")
        ts = np.linspace(0.0, t_cut, n_ts)
        return float(np.trapezoid([f(float(t)) for t in ts], ts))
    if not rtol > 0:
        raise ValueError(f"rtol must be positive; got {rtol}.")
    if method == "chebyshev":
        return _integrate_chebyshev(f, t_cut, rtol)
    with warnings.catch_warnings():
        warnings.simplefilter("error", integrate.IntegrationWarning)
        try:
            value, _ = integrate.quad(f, 0.0, t_cut, epsabs=0.0, epsrel=rtol, limit=200)
        except integrate.IntegrationWarning as exc:
            raise RuntimeError(
                f"MagArea integral on [0, {t_cut:.6g}] did not reach rtol={rtol:g}: {exc}. The "
                "magnitude function may have a pole (distances that are not of negative type); "
                "try method='trapezoid'."
            ) from exc
    return float(value)


def _integrate_chebyshev(f, t_cut: float, rtol: float) -> float:
    """Clenshaw–Curtis quadrature of ``f`` on [0, t_cut] to relative tolerance ``rtol``.

    One panel first (17, 33, 65 scales); if its estimated error is still too large, the interval
    is bisected recursively. Bisection matters when t_cut lies far beyond the scales where
    magnitude rises (a common t_cut taken from other spaces): the rise near 0 then needs finer
    panels than the flat remainder. Each half gets the budget / √2: independent panel errors add
    in quadrature, and the estimates overshoot the true error anyway. If a panel cannot meet its
    budget after ``_MAX_BISECTIONS`` levels (magnitude evaluated with round-off noise, where Z_t
    is ill-conditioned), its estimate is used and a :class:`MagnitudeWarning` says so.
    """
    estimate, error = _cc_panel(f, 0.0, t_cut, rtol=rtol)
    if error <= rtol * abs(estimate):
        return estimate
    tol = rtol * abs(estimate)  # absolute budget, from the best single-panel estimate
    middle = 0.5 * t_cut
    return (_cc_bisect(f, 0.0, middle, tol / math.sqrt(2), _MAX_BISECTIONS)
            + _cc_bisect(f, middle, t_cut, tol / math.sqrt(2), _MAX_BISECTIONS))


def _cc_bisect(f, a: float, b: float, tol: float, depth: int) -> float:
    estimate, error = _cc_panel(f, a, b, tol=tol)
    if error <= tol:
        return estimate
    if depth == 0:
        warnings.warn(
            f"MagArea integral on [{a:.6g}, {b:.6g}] kept an estimated error of {error:.3g} "
            f"(budget {tol:.3g}) after {_MAX_BISECTIONS} bisections: magnitude is evaluated "
            "with round-off noise there (ill-conditioned Z), or has a pole or jump (distances "
            "not of negative type).",
            MagnitudeWarning,
            stacklevel=2,
        )
        return estimate
    middle = 0.5 * (a + b)
    return (_cc_bisect(f, a, middle, tol / math.sqrt(2), depth - 1)
            + _cc_bisect(f, middle, b, tol / math.sqrt(2), depth - 1))


def _cc_panel(f, a: float, b: float, tol: float = 0.0, rtol: float = 0.0):
    """Clenshaw–Curtis estimate of ∫_a^b f and its estimated absolute error, on nested grids of
    17, 33 and 65 Chebyshev points, stopping at the first whose error is below ``tol`` or
    ``rtol`` times the estimate.

    On the grid of N + 1 points the interpolant's Chebyshev coefficients a_k come from one DCT-I,
    and ∫T_k = 2 / (1 - k²) for even k. The quadrature error is Σ_{k>N} a_k (∫T_k - Q_N[T_k]),
    whose leading terms weigh coefficients of order N by about 8 / N², so it is estimated by the
    largest of the last four computed coefficients times 8 / N² (Trefethen, "Is Gauss quadrature
    better than Clenshaw–Curtis?", SIAM Review 2008). Measured on Euclidean, cityblock and cosine
    clouds, this overestimates the true error by factors of 3 to 100. (SciPy offers no nested
    Chebyshev rule with such an estimate, hence this function.)
    """
    values: dict[int, float] = {}  # index on the finest grid -> f(t)
    finest = _CC_LEVELS[-1]
    for n in _CC_LEVELS:
        stride = finest // n
        ts = a + 0.5 * (b - a) * (1.0 - np.cos(np.pi * np.arange(n + 1) / n))
        ts[-1] = b  # exactly: Mag(t_cut) is often known already
        # New scales from the largest down: CG converges best there, and once it fails at
        # some scale it is not tried again below it.
        for j in range(n, -1, -1):
            if j * stride not in values:
                values[j * stride] = f(float(ts[j]))
        fx = np.array([values[j * stride] for j in range(n + 1)])
        coef = dct(fx, type=1) / n
        coef[0] /= 2.0
        coef[-1] /= 2.0
        even = np.arange(0, n + 1, 2)
        estimate = 0.5 * (b - a) * float(np.sum(coef[even] * 2.0 / (1.0 - even.astype(float)**2)))
        error = 0.5 * (b - a) * 8.0 / n**2 * float(np.abs(coef[-4:]).max())
        if error <= max(tol, rtol * abs(estimate)):
            break
    return estimate, error
