"""The prepared space: a distance matrix validated and de-duplicated once, with a memory of every
scale evaluated; and the small cache through which the plain functions share such spaces."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections import OrderedDict

import numpy as np
import xxhash

from .._threads import allowed_threads, map_threads, row_block_shares
from .._validation import check_distance_matrix, check_scales
from ._common import (
    DEFAULT_INTEGRATION,
    DEFAULT_INTEGRATION_RTOL,
    DEFAULT_MAX_ITER,
    DEFAULT_N_TS,
    DEFAULT_T_CONV_RTOL,
    DEFAULT_TARGET,
    DUPLICATE_RTOL,
    duplicate_groups,
    summarise_fallbacks,
)
from ._quadrature import _integrate, path_rule
from ._search import _initial_scale, find_convergence_scale
from ._solver import PRECISIONS, SOLVERS, _DenseSolver


class _Operations:
    """What every prepared space offers on top of ``magnitude(t)`` and ``unique_weights(t)``
    (:class:`MagnitudeSpace`, :class:`~diversity_core.magnitude.LargeMagnitudeSpace` and
    :class:`~diversity_core.magnitude.TorchMagnitudeSpace`).

    ``_phase``: what the space's next evaluations are for (``convergence_scale``, ``mag_area``
    or ``other``), for the spaces that count their evaluations by phase (``evaluations``: the
    large-n path and the torch path); a space's ``_integrate`` sets ``mag_area`` (it is called
    by :func:`mag_area` and the batches without :meth:`mag_area`)."""

    _phase = "other"

    @contextlib.contextmanager
    def _phase_of(self, phase: str):
        previous, self._phase = self._phase, phase
        try:
            yield
        finally:
            self._phase = previous

    def initial_scale(self) -> float:
        """The convergence-scale search's first scale (``_search._initial_scale``)."""
        return _initial_scale(self.D)

    def search_accuracy(self, goal: float) -> float:
        """The relative accuracy of ``Mag`` near ``goal`` that a convergence-scale search may
        ask of this space: the dense solvers' 1e-10."""
        return 1e-10

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

    def convergence_scale(self, target: float | None = None, *,
                          rtol: float = DEFAULT_T_CONV_RTOL,
                          max_iter: int = DEFAULT_MAX_ITER) -> float:
        """See :func:`convergence_scale`."""
        with self._phase_of("convergence_scale"):
            return find_convergence_scale(self, DEFAULT_TARGET if target is None else target,
                                          rtol=rtol, max_iter=max_iter)

    def mag_area(self, t_cut: float, *, method: str = DEFAULT_INTEGRATION,
                 rtol: float = DEFAULT_INTEGRATION_RTOL, n_ts: int = DEFAULT_N_TS) -> float:
        """See :func:`mag_area` (each kind of space integrates itself: ``_integrate``)."""
        return self._integrate(t_cut, method=method, rtol=rtol, n_ts=n_ts)


# From this many points on, the search for duplicates runs in row blocks over the allowed threads
# (the same decision: exact comparisons with the same tolerance).
_THREADED_SEARCH_FROM = 2048
_SEARCH_ROWS = 256


def _close_pairs_tolerance(D: np.ndarray) -> float | None:
    """``DUPLICATE_RTOL`` times the largest distance of ``D`` if two distinct points lie within
    it (an off-diagonal entry that small), else None: in row blocks over the allowed threads
    from ``_THREADED_SEARCH_FROM`` points on, with no (n, n) mask."""
    n = D.shape[0]
    threads = allowed_threads() if n >= _THREADED_SEARCH_FROM else 1
    shares = row_block_shares(n, _SEARCH_ROWS, threads)
    tol = DUPLICATE_RTOL * max(map_threads(
        lambda mine: max(float(D[i:i + _SEARCH_ROWS].max()) for i in mine), shares, threads))

    def close(mine) -> int:
        return sum(int(np.count_nonzero(D[i:i + _SEARCH_ROWS] <= tol)) for i in mine)

    closes = sum(map_threads(close, shares, threads))
    return tol if closes > int(np.count_nonzero(np.diagonal(D) <= tol)) else None


# The share of a MagArea's allowed error per scale (see MagnitudeSpace._integrate) at which
# conjugate gradients stop where a Hermite rule also takes dMag/dt from the weighting: the
# derivative errs linearly in the weighting's error, Mag quadratically. On clustered cosine
# clouds of 600 and 2,000 points (target 0.5), a quarter of the allowance brought hermite_log's
# true errors about ten times below those of the whole one, in as much time.
_SLOPE_ATOL_SHARE = 0.25


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
        # Relative, as documented at DUPLICATE_RTOL. Duplicates are off-diagonal near-zero
        # distances; without any (the common case) the graph of duplicate_groups is not needed
        # (it cost 0.4 ms of 0.6 at 300 points).
        keep = None
        tol = _close_pairs_tolerance(D)
        if tol is not None:
            keep, group = duplicate_groups(self.n_points, *np.nonzero(D <= tol))
        if keep is not None and len(keep) < self.n_points:
            self.group_of_point = group
            self.multiplicity = np.bincount(group, minlength=len(keep))
            D = np.ascontiguousarray(D[np.ix_(keep, keep)])
        else:
            self.group_of_point = None
            self.multiplicity = None
        self.D = np.ascontiguousarray(D)
        # Whether self.D is the caller's memory, which the caller may change (see as_space).
        self._shares_input = isinstance(given, np.ndarray) and np.shares_memory(self.D, given)
        self.n_unique = D.shape[0]
        self._solver = _DenseSolver(self.D, precision=precision, solver=solver)
        self._cache: dict[float, float] = {0.0: 1.0}  # scale -> Mag; Mag(0) := 1
        # scale -> estimated error of the cached Mag, where a MagArea asked for less than full
        # accuracy (see _integrate); absent: full accuracy
        self._cache_error: dict[float, float] = {}
        # scale -> dMag/dt, as magnitude_and_derivative computed it (read by the Hermite rules),
        # and the estimated error of the Mag solved with it where an integral allowed one
        self._slopes: dict[float, float] = {}
        self._slope_error: dict[float, float] = {}
        # scale -> d²Mag/dt², computed with the slope of the same weighting (hermite_d2)
        self._curvatures: dict[float, float] = {}

    @property
    def fallbacks(self) -> list[dict]:
        return self._solver.fallbacks

    @functools.cached_property
    def diameter(self) -> float:
        """The largest distance (sets the ``hermite_log`` rule's change of variable)."""
        return float(self.D.max())

    def fallback_summary(self) -> list[dict]:
        """The fallback records grouped by solver (:func:`._common.summarise_fallbacks`: the
        scales' range, their count, the largest residual and error bound)."""
        return summarise_fallbacks(self.fallbacks)

    # -- evaluations ------------------------------------------------------------------------
    def magnitude(self, t: float, *, atol: float = 0.0) -> float:
        """Mag(t) at one scale t >= 0 (effective number of points).

        ``atol``: the absolute error the caller allows (0, the default: the solvers' full
        accuracy); a MagArea passes its share of the integral's tolerance (see
        :meth:`_integrate`). A cached value is reused if it is at least that accurate."""
        t = float(t)
        if self._needs_solve(t, atol):
            with self._solver.blas_threads():
                self._cache[t], error = self._solver.magnitude_with_error(t, atol)
            if error > 0:
                self._cache_error[t] = error
            else:
                self._cache_error.pop(t, None)
        return self._cache[t]

    def _needs_solve(self, t: float, atol: float = 0.0) -> bool:
        """Whether :meth:`magnitude` at t with ``atol`` asks the solver: not cached, or cached
        less accurately than ``atol``."""
        return t not in self._cache or self._cache_error.get(t, 0.0) > atol

    def known_magnitude(self, t: float) -> float | None:
        """Mag(t) if this space has evaluated it (or was told it, :meth:`record_magnitude`),
        else None; evaluates nothing. A scale solved inside a MagArea may be known only to that
        integral's accuracy (``rtol · Mag(t_cut) / 16``), good enough for any MagArea of the
        same tolerance."""
        return self._cache.get(float(t))

    def record_magnitude(self, t: float, mag: float) -> None:
        """Remember Mag(t) computed elsewhere, to full accuracy (by a batch that solved this
        space's matrix), unless this space knows Mag(t) already."""
        self._cache.setdefault(float(t), float(mag))

    def unique_weights(self, t: float) -> np.ndarray:
        """Weighting of the de-duplicated space (shape (n_unique,)); t > 0."""
        with self._solver.blas_threads():
            return self._solver.weights(float(t))

    def pair_sums(self, t: float) -> tuple[float, float]:
        """``Σ_{i≠j} exp(-t D_ij)`` and ``Σ_{i≠j} D_ij exp(-t D_ij)``: the first-order bound
        from which a convergence-scale search starts (``_search.first_order_scale``)."""
        with self._solver.blas_threads():
            return self._solver.pair_sums(float(t))

    def magnitude_and_derivative(self, t: float, *, atol: float = 0.0) -> tuple[float, float]:
        """Mag(t) and dMag/dt = wᵀ (D ∘ Z_t) w; ``atol`` as for :meth:`magnitude` (the
        derivative then comes from the same less accurate weighting)."""
        t = float(t)
        with self._solver.blas_threads():
            mag, dmag, error = self._solver.magnitude_and_derivative(t, atol)
        self._remember(t, mag, error, dmag)
        return mag, dmag

    def magnitude_and_derivatives(self, t: float, *, atol: float = 0.0,
                                  curvature_atol: float = 0.0) -> tuple[float, float, float]:
        """Mag(t), dMag/dt and d²Mag/dt² (``_solver._DenseSolver.magnitude_and_derivatives``);
        ``atol`` as for :meth:`magnitude_and_derivative`, ``curvature_atol`` the error of
        d²Mag/dt² allowed likewise."""
        t = float(t)
        with self._solver.blas_threads():
            mag, dmag, ddmag, error = self._solver.magnitude_and_derivatives(t, atol,
                                                                             curvature_atol)
        self._remember(t, mag, error, dmag, ddmag)
        return mag, dmag, ddmag

    def _remember(self, t: float, mag: float, error: float, dmag: float,
                  ddmag: float | None = None) -> None:
        """Keep what one weighting gave at t: Mag unless known at least this accurately
        already, and its derivatives (a second derivative only with the slope it came with)."""
        if self._needs_solve(t, error):
            self._cache[t] = mag
            if error > 0:
                self._cache_error[t] = error
            else:
                self._cache_error.pop(t, None)
        self._slopes[t] = dmag
        if error > 0:
            self._slope_error[t] = error
        else:
            self._slope_error.pop(t, None)
        if ddmag is None:
            self._curvatures.pop(t, None)
        else:
            self._curvatures[t] = ddmag

    def _known_slope(self, t: float, *, atol: float = 0.0) -> tuple[float, float]:
        """Mag(t) and dMag/dt, solved only if this space has not computed both at t to the
        accuracy ``atol`` allows already (to full accuracy by default; MagArea's t_cut where
        the convergence-scale search ended on a solve there)."""
        t = float(t)
        if t in self._slopes and self._slope_error.get(t, 0.0) <= atol \
                and not self._needs_solve(t, atol):
            return self._cache[t], self._slopes[t]
        return self.magnitude_and_derivative(t, atol=atol)

    def _known_derivatives(self, t: float, order: int, *, atol: float = 0.0,
                           curvature_atol: float = 0.0) -> tuple:
        """Mag(t) and its first ``order`` − 1 derivatives (order 2 or 3), solved only where not
        known to the accuracy ``atol`` allows (see :meth:`_known_slope`; a second derivative
        known is reused whatever ``curvature_atol`` says, it was solved for the same
        integral or to full accuracy)."""
        if order == 2:
            return self._known_slope(t, atol=atol)
        t = float(t)
        if t in self._curvatures and self._slope_error.get(t, 0.0) <= atol \
                and not self._needs_solve(t, atol):
            return self._cache[t], self._slopes[t], self._curvatures[t]
        return self.magnitude_and_derivatives(t, atol=atol, curvature_atol=curvature_atol)

    def _integrate(self, t_cut: float, *, method: str, rtol: float, n_ts: int) -> float:
        """MagArea, its scales solved only as accurately as the integral needs.

        Clenshaw–Curtis weights are positive and sum to t_cut, so errors of at most
        ``rtol · Mag(t_cut) / 16`` at every scale change the integral by at most
        ``rtol · t_cut · Mag(t_cut) / 16``: a sixteenth of rtol for a mean height of Mag(t_cut)
        (about half of it on [0, t_conv]: an eighth of the budget). Conjugate gradients then stop
        on the estimated error of the magnitude itself instead of a residual of 1e-9; at small t,
        where Mag is small and Z ill-conditioned, that halved their iterations. Mag(t_cut) itself,
        and every scale outside an integral, are solved to full accuracy (the allowed error is
        an argument of :meth:`magnitude`, not a state of the solver)."""
        t_cut = float(check_scales(t_cut, name="t_cut")[0])
        method = path_rule(method, factored=self._solver.factors_in_float64,
                           diameter=self.diameter)
        if method not in ("chebyshev", "hermite", "hermite_log", "hermite_d2") or t_cut == 0.0:
            return _integrate(self.magnitude, t_cut, method=method, rtol=rtol, n_ts=n_ts)
        # Only conjugate gradients can use a looser accuracy. The Hermite rules' scales take a
        # share of it (_SLOPE_ATOL_SHARE): their derivatives come from the same weighting,
        # whose error enters dMag/dt linearly; it saves most at the small scales hermite_log
        # crowds its nodes into, where Z_t is ill-conditioned and conjugate gradients are
        # slowest (``benchmarks/results/magnitude_vs_magnipy.csv`` holds the integrals'
        # errors, ours_rel_error).
        top = self._known_slope(t_cut)[0] if method != "chebyshev" else self.magnitude(t_cut)
        atol = rtol * abs(top) / 16 if self._solver.uses_cg else 0.0

        def magnitude(t: float) -> float:
            return self.magnitude(t, atol=atol)

        # hermite_d2 weighs a second derivative by at most 1.1e-4 (t_cut² du³ ≤ 31 t_cut²)
        # against a value's 0.16 du: an error of atol / t_cut² in it counts less than a
        # hundredth of a value's atol (full accuracy where that ratio is not a number).
        curvature_atol = atol / t_cut / t_cut
        if not math.isfinite(curvature_atol):
            curvature_atol = 0.0

        def announce(pairs, total: float, half) -> None:
            # The quadrature's next pairs of scales (see SimilarityBuffer.announce_pairs),
            # those of them the solver will be asked to solve.
            def pending(t):
                return self._needs_solve(t, atol)
            self._solver.buffer.announce_pairs(
                [(hi, lo) for hi, lo in pairs if pending(hi) and pending(lo)], total,
                half if half is not None and pending(half) else None)

        try:
            return _integrate(magnitude, t_cut, method=method, rtol=rtol, n_ts=n_ts,
                              announce=announce,
                              slope=functools.partial(self._known_slope,
                                                      atol=_SLOPE_ATOL_SHARE * atol),
                              derivatives=functools.partial(
                                  self._known_derivatives, atol=_SLOPE_ATOL_SHARE * atol,
                                  curvature_atol=curvature_atol),
                              diameter=self.diameter)
        finally:
            self._solver.buffer.announce_pairs([], None, None)


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
# _CACHE_ENTRIES spaces and CACHE_BYTES of distance matrices; the similarity buffers of all but
# the most recent space are freed.
_CACHE_ENTRIES = 8
CACHE_BYTES = 512 * 2**20
_prepared: OrderedDict[tuple, MagnitudeSpace] = OrderedDict()
_prepared_lock = threading.Lock()
# The last batch of spaces the batch functions prepared, by its inputs (see
# _batch._prepared_batch and cached_batch); emptied with the cache above.
_prepared_batches: dict[tuple, object] = {}


def cached_batch(key: tuple, make):
    """The batch prepared for the inputs ``key``, else ``make()``, kept as the one cached batch
    (the batch functions' cache lives beside the spaces' so that :func:`clear_cache` empties
    both; its dictionary and lock are this module's own)."""
    with _prepared_lock:
        batch = _prepared_batches.get(key)
    if batch is None:
        batch = make()
        with _prepared_lock:
            _prepared_batches.clear()
            _prepared_batches[key] = batch
    return batch


def content_key(A: np.ndarray) -> tuple:
    """(shape, dtype, XXH3-128 digest of the bytes) of an array."""
    A = np.ascontiguousarray(A)
    return A.shape, A.dtype.str, xxhash.xxh3_128_digest(A.reshape(-1).view(np.uint8))


def as_space(D, name: str = "D") -> MagnitudeSpace:
    """``D`` itself if it is a prepared space, else the cached space of its content, else a new
    one (cached)."""
    if isinstance(D, _Operations):
        return D
    A = np.asarray(D)
    if A.dtype == object or not np.issubdtype(A.dtype, np.number) or A.ndim != 2 \
            or A.nbytes > CACHE_BYTES:
        return MagnitudeSpace(A, name=name)  # the constructor says what is wrong, if anything
    key = content_key(A)
    with _prepared_lock:
        space = _prepared.get(key)
    if space is not None and (not space._shares_input or np.shares_memory(space.D, A)
                              or content_key(space.D) == key):
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
                and sum(s.D.nbytes for s in _prepared.values()) > CACHE_BYTES):
            _prepared.popitem(last=False)
    return space


def clear_cache() -> None:
    """Forget the prepared spaces the plain functions share, and the last prepared batch of the
    batch functions (frees their memory)."""
    with _prepared_lock:
        _prepared.clear()
        _prepared_batches.clear()
