"""The prepared space: a distance matrix validated and de-duplicated once, with a memory of every
scale evaluated; and the small cache through which the plain functions share such spaces."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import xxhash
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .._validation import check_distance_matrix, check_scales
from ._solver import PRECISIONS, SOLVERS, _DenseSolver

# Points closer than this (relative to the largest distance) are treated as duplicates: their
# rows of Z_t agree to machine precision at every scale, so Z_t is numerically singular anyway.
_DUPLICATE_RTOL = 1e-12


class _Operations:
    """What every prepared space offers on top of ``magnitude(t)`` and ``unique_weights(t)``
    (:class:`MagnitudeSpace` and :class:`~diversity_core.magnitude.LargeMagnitudeSpace`)."""

    def weights(self, t: float) -> np.ndarray:
        """Weighting of the input points at t > 0; see :func:`magnitude_weights`."""
        return self.expand_weights(self.unique_weights(t))

    def expand_weights(self, w_unique: np.ndarray) -> np.ndarray:
        """Weights of the input points: a duplicated point's weight shared among its copies."""
        if self.group_of_point is None:
            return w_unique
        return (w_unique / self.multiplicity)[self.group_of_point]

    def magnitude_function(self, ts) -> np.ndarray:
        """Mag(t) for each scale; see :func:`magnitude_function`."""
        ts = check_scales(ts)
        # From the largest scale down: conjugate gradients converge best there, and once they
        # fail at some scale they are not tried again below it (an ascending sweep would pay
        # for a failed attempt at every small scale).
        for t in sorted(set(ts.tolist()), reverse=True):
            self.magnitude(t)
        return np.array([self._cache[float(t)] for t in ts])

    def convergence_scale(self, target: float | None = None, **kwargs) -> float:
        """See :func:`convergence_scale`."""
        from .api import DEFAULT_TARGET, convergence_scale

        return convergence_scale(self, DEFAULT_TARGET if target is None else target, **kwargs)

    def mag_area(self, t_cut: float, **kwargs) -> float:
        """See :func:`mag_area`."""
        from .api import mag_area

        return mag_area(self, t_cut, **kwargs)


class MagnitudeSpace(_Operations):
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
        in float64. The result is a float64-accurate weighting either way.
    solver : {"auto", "direct"}
        ``auto`` (default): for spaces of at least 500 distinct points, first try conjugate
        gradients (O(n²) per iteration, warm-started from the solutions at the nearest solved
        scales): float64 up to 6,000 points, float32 iterations inside a float64 iterative
        refinement from there on; magnitude is the variational estimate ``1ᵀw + rᵀw``, accurate
        to 1e-10 or better at a relative residual of 1e-9 (inside a MagArea, to the accuracy the
        integral needs). Each attempt has a budget of about one factorisation; where CG does not
        converge (the smallest scales of some spaces) the Cholesky factorisation answers that
        scale and every smaller one. ``direct``: Cholesky only.

    Attributes
    ----------
    n_points : int
        Number of input points, duplicates included.
    n_unique : int
        Number of distinct points (the twin property merges exact duplicates).
    D : array of shape (n_unique, n_unique)
        The de-duplicated distance matrix.
    fallbacks : list of dict
        One record per scale at which ``Z_t`` was not numerically positive definite and a
        fallback solver answered (besides the :class:`MagnitudeWarning`): ``t``, ``solver``
        (``"ldl"``: symmetric indefinite solve; ``"pinv"``: pseudo-inverse, then also
        ``dropped_eigenvalues``), ``relative_residual`` ``‖1 − Z_t w‖ / ‖1‖`` and
        ``mag_error_bound``, a first-order bound on the error of ``Mag(t)`` (see
        :meth:`fallback_summary` for the integral's share).

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
        given = D
        D = check_distance_matrix(D, name=name)
        self.n_points = D.shape[0]
        # Merging duplicates removes no distance value: the largest one stays (up to tol).
        D_max = float(D.max())
        # Relative, as documented at _DUPLICATE_RTOL: an absolute floor would merge every point
        # of a space whose distances are all tiny (data scaled by 1e-300 became one point).
        tol = _DUPLICATE_RTOL * D_max
        near = D <= tol
        # Duplicates are off-diagonal near-zero distances; without any (the common case) the
        # graph below is not needed (it cost 0.4 ms of 0.6 at 300 points).
        if np.count_nonzero(near) > np.count_nonzero(np.diagonal(near)):
            # Sparse graph of near-zero distances: a dense input would make csgraph copy D.
            rows, cols = np.nonzero(near)
            close = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=D.shape)
            n_groups, labels = connected_components(close, directed=False)
        else:
            n_groups = self.n_points
        del near
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
        self.D = np.ascontiguousarray(D)
        # Whether self.D is the caller's memory, which the caller may change (see _as_space).
        self._shares_input = isinstance(given, np.ndarray) and np.shares_memory(self.D, given)
        self.n_unique = D.shape[0]
        self._solver = _DenseSolver(self.D, precision=precision, solver=solver)
        self._cache: dict[float, float] = {0.0: 1.0}  # scale -> Mag; Mag(0) := 1
        # scale -> estimated error of the cached Mag, where a MagArea asked for less than full
        # accuracy (see _integrate); absent: full accuracy
        self._cache_error: dict[float, float] = {}

    @property
    def fallbacks(self) -> list[dict]:
        return self._solver.fallbacks

    def fallback_summary(self) -> list[dict]:
        """The fallback records grouped by solver: for each, the scales' range ``t_min``,
        ``t_max``, their ``count``, the largest ``relative_residual`` and ``mag_error_bound``.

        A MagArea over ``[0, t_cut]`` errs by at most ``t_cut`` times the largest
        ``mag_error_bound`` of the scales inside it, on top of its quadrature tolerance (the
        quadrature weights are positive and sum to ``t_cut``)."""
        summary = []
        for solver in dict.fromkeys(r["solver"] for r in self.fallbacks):
            records = [r for r in self.fallbacks if r["solver"] == solver]
            ts = [r["t"] for r in records]
            summary.append({"solver": solver, "t_min": min(ts), "t_max": max(ts),
                            "count": len(records),
                            "relative_residual": max(r["relative_residual"] for r in records),
                            "mag_error_bound": max(r["mag_error_bound"] for r in records)})
        return summary

    # -- evaluations ------------------------------------------------------------------------
    def magnitude(self, t: float) -> float:
        """Mag(t) at one scale t >= 0 (effective number of points)."""
        t = float(t)
        if self._needs_solve(t):
            with self._solver.blas_threads():
                self._cache[t] = self._solver.magnitude(t)
            if self._solver.last_error > 0:
                self._cache_error[t] = self._solver.last_error
            else:
                self._cache_error.pop(t, None)
        return self._cache[t]

    def _needs_solve(self, t: float) -> bool:
        """Whether :meth:`magnitude` at t asks the solver: not cached, or cached less accurately
        than the current MagArea asks."""
        return t not in self._cache or self._cache_error.get(t, 0.0) > self._solver.atol

    def unique_weights(self, t: float) -> np.ndarray:
        """Weighting of the de-duplicated space (shape (n_unique,)); t > 0."""
        with self._solver.blas_threads():
            return self._solver.weights(float(t))

    def magnitude_and_derivative(self, t: float) -> tuple[float, float]:
        """Mag(t) and dMag/dt = wᵀ (D ∘ Z_t) w."""
        with self._solver.blas_threads():
            mag, dmag = self._solver.magnitude_and_derivative(float(t))
        if float(t) not in self._cache or float(t) in self._cache_error:
            self._cache[float(t)] = mag
            self._cache_error.pop(float(t), None)
        return mag, dmag

    def _integrate(self, t_cut: float, *, method: str, rtol: float, n_ts: int) -> float:
        """MagArea, its scales solved only as accurately as the integral needs.

        Clenshaw–Curtis weights are positive and sum to t_cut, so errors of at most
        ``rtol · Mag(t_cut) / 16`` at every scale change the integral by at most
        ``rtol · t_cut · Mag(t_cut) / 16``: a sixteenth of rtol for a mean height of Mag(t_cut)
        (about half of it on [0, t_conv]: an eighth of the budget). Conjugate gradients then stop
        on the estimated error of the magnitude itself instead of a residual of 1e-9; at small t,
        where Mag is small and Z ill-conditioned, that halved their iterations. Mag(t_cut) itself,
        and every scale outside an integral, are solved to full accuracy."""
        from ._quadrature import _integrate

        t_cut = float(check_scales(t_cut, name="t_cut")[0])
        if method != "chebyshev" or t_cut == 0.0:
            return _integrate(self.magnitude, t_cut, method=method, rtol=rtol, n_ts=n_ts)
        if self._solver._use_cg:
            self._solver.atol = rtol * abs(self.magnitude(t_cut)) / 16
        try:
            return _integrate(self.magnitude, t_cut, method=method, rtol=rtol, n_ts=n_ts,
                              announce=self._announce_pairs)
        finally:
            self._solver.atol = 0.0
            self._solver.expect_pairs([], None, None)

    def _announce_pairs(self, pairs, total: float, half) -> None:
        """Tell the solver the quadrature's next pairs of scales (see
        ``_DenseSolver.expect_pairs``), those of them it will be asked to solve."""
        pending = self._needs_solve
        self._solver.expect_pairs([(hi, lo) for hi, lo in pairs if pending(hi) and pending(lo)],
                                  total, half if half is not None and pending(half) else None)


# ----------------------------------------------------------------------------------------------
# Prepared spaces shared by the plain functions
# ----------------------------------------------------------------------------------------------

# The plain functions (convergence_scale(D), then mag_area(D, t), say) take a distance matrix;
# each would validate and de-duplicate it again and forget the scales the other evaluated. They
# look prepared spaces up here instead, by the matrix's *content*: a 128-bit XXH3 digest of its
# bytes, never id(), which Python reuses once an array is freed and which says nothing of in-place
# changes. XXH3 rather than SHA-256: the digest only tells apart the handful of matrices of one
# process (no adversary, nothing stored), and it ran at 60 GB/s here against SHA-256's 1.9 GB/s
# (0.13 against 4.4 ms for a 1,000-point matrix; two digests were 10 ms of the 73 ms a default
# convergence scale + MagArea took). A cached space may share the caller's memory (copying 128 MB
# at n = 4,000 cost 0.16 s); when a lookup with another array finds it, the space's own matrix is
# hashed again, so that a change made in place since cannot go unnoticed. Bounded:
# _CACHE_ENTRIES spaces and _CACHE_BYTES of distance matrices; the similarity buffers of all but
# the most recent space are freed.
_CACHE_ENTRIES = 8
_CACHE_BYTES = 512 * 2**20
_prepared: OrderedDict[tuple, MagnitudeSpace] = OrderedDict()
_prepared_lock = threading.Lock()
# The last batch of spaces the batch functions prepared, by its inputs (see
# _batch._prepared_batch); emptied with the cache above.
_prepared_batches: dict[tuple, object] = {}


def _content_key(A: np.ndarray) -> tuple:
    """(shape, dtype, XXH3-128 digest of the bytes) of an array."""
    A = np.ascontiguousarray(A)
    return A.shape, A.dtype.str, xxhash.xxh3_128_digest(A.reshape(-1).view(np.uint8))


def _as_space(D, name: str = "D") -> MagnitudeSpace:
    """``D`` itself if it is a prepared space, else the cached space of its content, else a new
    one (cached)."""
    if isinstance(D, _Operations):
        return D
    A = np.asarray(D)
    if A.dtype == object or not np.issubdtype(A.dtype, np.number) or A.ndim != 2 \
            or A.nbytes > _CACHE_BYTES:
        return MagnitudeSpace(A, name=name)  # the constructor says what is wrong, if anything
    key = _content_key(A)
    with _prepared_lock:
        space = _prepared.get(key)
    if space is not None and (not space._shares_input or np.shares_memory(space.D, A)
                              or _content_key(space.D) == key):
        with _prepared_lock:
            if key in _prepared:
                _prepared.move_to_end(key)
        return space
    space = MagnitudeSpace(A, name=name)
    with _prepared_lock:
        for older in _prepared.values():
            older._solver.release()
        _prepared[key] = space
        while len(_prepared) > _CACHE_ENTRIES or (
                len(_prepared) > 1
                and sum(s.D.nbytes for s in _prepared.values()) > _CACHE_BYTES):
            _prepared.popitem(last=False)
    return space


def clear_cache() -> None:
    """Forget the prepared spaces the plain functions share, and the last prepared batch of the
    batch functions (frees their memory)."""
    with _prepared_lock:
        _prepared.clear()
        _prepared_batches.clear()
