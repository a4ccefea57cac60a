"""Large spaces: magnitude of tens of thousands of points without any n × n float64 matrix.

A float64 distance matrix of 50,000 points takes 20 GB, its similarity matrix as much again. The
large-n path keeps only the upper triangle of the distance matrix, in float32 (5 GB at
n = 50,000), and never forms ``Z_t``: every product ``Z_t x`` computes ``exp(-t D)`` on the fly
and multiplies it at once (float32 for the conjugate-gradient iterations, float64 for
residuals, derivative and error bounds): entry by entry in registers by the compiled kernels
(``_kernels.panel_product32`` and ``panel_product64``, one read of each panel), else block by
block in a core's cache by NumPy. What it computes and how well:

* **The space.** Distances come from the float64 Gram matrix of the centred points (Euclidean)
  or of the unit rows (cosine) and are rounded to float32: the magnitude computed is that of
  distances with a relative error ``δ`` of at most ``2^-24`` plus the Gram matrix's round-off
  (bounded from the data at construction, :attr:`LargeMagnitudeSpace.distance_rtol`). To first
  order that changes ``Mag(t)`` by at most ``δ · t · |w|ᵀ (D ∘ Z_t) |w|`` (since
  ``∂Mag/∂D_ij = t w_i w_j Z_ij``), which every evaluation computes.
* **Each scale.** The weighting comes from conjugate gradients in float32 inside a float64
  iterative refinement, warm-started from the weightings of the nearest solved scales (the
  polynomial in t through them, ``_cg.warm_start``, as on the dense path: at 12,000 clustered
  points 310 float32 iterations for t_conv + MagArea against 504 from the last scale's
  weighting alone). Magnitude is the variational estimate
  ``1ᵀw + rᵀw`` (``r = 1 − Z_t w`` in float64), a lower bound of ``Mag(t)`` whose error is
  ``rᵀ Z_t⁻¹ r``. A refinement step solves ``Z_t d = r`` (to 1e-3), so it raises the estimate
  by about the whole error it had: once those gains shrink at least twofold from step to step,
  the last gain bounds the error left; and within a step, the inner CG's own energy decrements
  (Hestenes and Stiefel's estimate, as on the dense path) say what it leaves, so it stops as
  soon as that is small enough. Steps go on until the error is below ``solver_rtol · n``
  (absolute: small magnitudes at small t need no more absolute accuracy than large ones for
  MagArea).
* **MagArea** adds the quadrature's error estimate (the Clenshaw–Curtis rule of the dense path)
  and ``t_cut`` times the largest per-scale error (the quadrature weights are positive and sum
  to ``t_cut``); :meth:`LargeMagnitudeSpace.mag_area` records that total in
  :attr:`LargeMagnitudeSpace.area_error` and warns when it exceeds the requested tolerance.
* **The convergence scale** stops when ``|Mag − target·n| <= solver_rtol · n`` (or its bracket
  is below ``rtol``); its error enters a MagArea up to it as ``Mag(t_cut) · Δt``.

Duplicates are merged (the twin property), as on the dense path: identical rows, and points
whose distance is below 1e-12 of the largest one.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._threads import allowed_threads, map_threads, single_threaded_if
from .._validation import check_embeddings, unit_rows
from ._cg import conjugate_gradients, warm_start
from ._common import (
    DUPLICATE_RTOL,
    EXPONENT_FLOOR,
    FLOAT32_EXPONENT_FLOOR,
    MagnitudeWarning,
    duplicate_groups,
)
from ._elementwise import _panel_product32 as _compiled_panel_product32
from ._elementwise import _panel_product64 as _compiled_panel_product64
from ._quadrature import _integrate
from ._space import _Operations

LARGE_METRICS = ("euclidean", "cosine")
_PANEL_ROWS = 256  # rows of the distance matrix per stored panel (its upper trapezoid)
_CHUNK_COLUMNS = 2048  # columns per on-the-fly block: 256 x 2048 float32 = 2 MiB, in L2
# Exponents below -FLOAT32_EXPONENT_FLOOR (entries under 1e-20) are raised to it in float32
# blocks (see _common); the change is at most n · 1e-20 per row, 1e-15 at n = 100,000, far below
# float32's precision, and the float64 residuals of the refinement see the exact entries. Float64
# blocks are clamped at EXPONENT_FLOOR, as on the dense path.
DEFAULT_SOLVER_RTOL = 1e-7  # per-scale accuracy of Mag, in units of n (see the module docstring)
_INNER_RTOL = 1e-3  # relative residual of each float32 CG solve inside the refinement
_MAX_REFINEMENTS = 12
_MAX_INNER_ITERATIONS = 400
# A warm start whose float64 residual is this small (relative) is the weighting already: its
# error rᵀZ⁻¹r is at round-off level wherever CG converges at all.
_CONVERGED_RESIDUAL = 1e-10
_KEPT_WEIGHTINGS = 64  # weightings kept for warm starts (n floats each)


def large_memory(n_points: int, n_features: int) -> int:
    """Peak bytes of the large-n path (see :func:`diversity_core.magnitude.magnitude_memory`)."""
    n, d = int(n_points), int(n_features)
    panels = 4 * (n * (n + _PANEL_ROWS) // 2)  # float32 upper trapezoids
    points = 2 * 8 * n * d  # the caller's points (float64) and the centred / unit copy
    gram = 2 * 4 * 8 * _PANEL_ROWS * n  # a panel's Gram block and temporaries, per thread
    # CG vectors, per-thread accumulators, weights, nearest neighbours; the kept weightings
    vectors = (64 + _KEPT_WEIGHTINGS) * 8 * n
    blocks = 4 * 8 * _PANEL_ROWS * _CHUNK_COLUMNS  # per-thread on-the-fly blocks
    return panels + points + gram + vectors + blocks + _INTERPRETER_BYTES


_INTERPRETER_BYTES = 300 * 2**20  # Python, NumPy, SciPy and this package, resident


class LargeMagnitudeSpace(_Operations):
    """Points prepared for magnitude on the large-n path (see the module docstring).

    Parameters
    ----------
    X : array of shape (n_points, n_features)
    metric : {"euclidean", "cosine"}
    solver_rtol : float
        Accuracy of every ``Mag(t)``, in units of the number of distinct points: each scale's
        estimated solver error is below ``solver_rtol · n_unique`` (default 1e-7).
    threads : int, optional
        Threads of the on-the-fly products (default: as many as BLAS may use).

    Attributes
    ----------
    n_points, n_unique : int
    distance_rtol : float
        Bound on the relative error of the stored distances (float32 rounding and the Gram
        matrix's round-off).
    records : list of dict
        One per evaluated scale: ``t``, ``mag``, ``solver_error`` (estimated ``rᵀ Z⁻¹ r``),
        ``distance_error`` (first-order bound from ``distance_rtol``), ``refinements``,
        ``iterations`` (float32 CG products), ``relative_residual`` and ``phase`` (what asked
        for the scale: ``convergence_scale``, ``mag_area`` or ``other``).
    evaluations : dict
        How many scales each phase solved (:attr:`records` counted by ``phase``): the cost of a
        convergence scale and a MagArea in evaluations of ``Mag(t)``.
    area_error : dict or None
        Of the last :meth:`mag_area`: ``quadrature`` (estimated, absolute), ``evaluation``
        (``t_cut`` times the largest per-scale error), ``relative`` (their sum over the area).
    fallbacks : list
        Always empty (the large-n path has no fallback solver: see :meth:`magnitude`).
    """

    def __init__(self, X, metric: str = "euclidean", *, solver_rtol: float = DEFAULT_SOLVER_RTOL,
                 threads: int | None = None, name: str = "X"):
        if metric not in LARGE_METRICS:
            raise ValueError(f"the large-n path computes {' and '.join(LARGE_METRICS)} "
                             f"distances; got {metric!r}.")
        if not solver_rtol > 0:
            raise ValueError(f"solver_rtol must be positive; got {solver_rtol}.")
        X = check_embeddings(X, name=name)
        self.metric = metric
        self.solver_rtol = float(solver_rtol)
        self.threads = threads
        self.n_points, n_features = X.shape
        # Exact duplicate rows first (cheap): first occurrences, in input order.
        _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
        keep = np.sort(first)
        groups = np.empty(len(first), dtype=np.intp)
        groups[np.argsort(first)] = np.arange(len(first))
        labels = groups[inverse.ravel()]  # group of every input point, numbered in input order
        Y = X[keep]
        if metric == "cosine":
            Y = unit_rows(Y, name=name, what="the cosine distance")
            self._roundoff = max(1e-12, 4 * n_features * np.finfo(np.float64).eps)
        else:
            Y = Y - Y.mean(axis=0)
        self._Y = Y
        self._build(n_features)
        near = self._near_pairs
        if near:  # points within 1e-12 of the largest distance: merge them and start again
            kept, merged = duplicate_groups(len(Y), *np.array(near, dtype=np.intp).T)
            labels = merged[labels]
            self._Y = Y[kept]
            self._build(n_features)
        self.n_unique = len(self._Y)
        if self.n_unique < self.n_points:
            self.group_of_point = labels
            self.multiplicity = np.bincount(labels, minlength=self.n_unique)
        else:
            self.group_of_point = self.multiplicity = None
        self._cache: dict[float, float] = {0.0: 1.0}
        self._weightings: dict[float, np.ndarray] = {}  # scale -> weighting (warm starts)
        # scale -> solver error, and solver plus distance error, of the cached Mag
        self._solver_errors: dict[float, float] = {0.0: 0.0}
        self._errors: dict[float, float] = {0.0: 0.0}
        self.records: list[dict] = []
        self.area_error = None
        self.fallbacks: list[dict] = []

    # -- distances --------------------------------------------------------------------------
    def _build(self, n_features: int) -> None:
        """Float32 panels of the upper triangle of D, nearest-neighbour distances, the largest
        distance, pairs closer than the duplicate tolerance, and the distance error bound."""
        Y = self._Y
        n = len(Y)
        sq = np.einsum("ij,ij->i", Y, Y)
        # Upper bound of the largest distance (to collect candidate duplicates in one pass).
        bound = 2.0 if self.metric == "cosine" else 2.0 * math.sqrt(float(sq.max()))
        starts = list(range(0, n, self._panel_rows()))
        nn = np.full(n, np.inf)
        results = self._distance_panels(Y, sq, starts, 2 * DUPLICATE_RTOL * bound)
        self._panels = [r[0] for r in results]
        D_max = 0.0
        candidates = []
        for p, (_, row_min, col_min, pmax, pairs) in zip(starts, results, strict=True):
            nn[p:p + len(row_min)] = np.minimum(nn[p:p + len(row_min)], row_min)
            np.minimum(nn[p:], col_min, out=nn[p:])
            D_max = max(D_max, pmax)
            candidates += pairs
        self.D_max = D_max
        tol = DUPLICATE_RTOL * D_max
        self._near_pairs = [(i, j) for i, j, d in candidates if d <= tol]
        self._nn = nn
        # Relative error of the stored distances: float32 rounding, plus the Gram matrix's
        # round-off (a few eps times the squared norms, against the smallest squared distance).
        nonzero = nn[np.isfinite(nn) & (nn > 0)]
        d_min = float(nonzero.min()) if nonzero.size else 1.0
        eps = np.finfo(np.float64).eps
        if self.metric == "cosine":
            gram = 4 * n_features * eps / d_min
        else:
            gram = 4 * (n_features + 2) * eps * 2 * float(sq.max()) / d_min**2
        self.distance_rtol = 2.0**-24 + gram

    def _panel_rows(self) -> int:
        """Rows of the distance matrix per stored panel."""
        return _PANEL_ROWS

    def _distance_panels(self, Y, sq, starts, near_tol: float) -> list:
        """``_distance_panel`` of every panel start (on the space's threads)."""
        return self._map(lambda p: _distance_panel(Y, sq, p, self.metric,
                                                   getattr(self, "_roundoff", 0.0), near_tol),
                         starts)

    def _map(self, fn, items):
        """``fn`` over ``items`` on the space's threads (BLAS on one thread each)."""
        # Counted before BLAS is limited to one thread: the count reads BLAS's limit, and read
        # inside the limit it was always 1 (the large path ran on one core of 2 or 16).
        threads = self._thread_count()
        with single_threaded_if(True):
            return map_threads(fn, items, threads)

    def _thread_count(self) -> int:
        """``threads`` if given, else ``_common.allowed_threads()`` (BLAS's limit, at most the
        usable cores). The products' float32 sums over the shares depend on it (the
        engine's only results that do: ``_product32`` adds the threads' parts)."""
        if self.threads is not None:
            return max(1, int(self.threads))
        return allowed_threads()

    def initial_scale(self) -> float:
        """As the dense path: 5 / median nearest-neighbour distance."""
        return 5.0 / float(np.median(self._nn))

    def search_accuracy(self, goal: float) -> float:
        """Magnitude is solved to ``solver_rtol · n_unique``: a search ends at that accuracy."""
        return max(1e-10, self.solver_rtol * self.n_unique / goal)

    # -- products with Z_t ------------------------------------------------------------------
    def _shares(self):
        """Panel ranges of equal work, one per thread."""
        threads = self._thread_count()
        work = np.cumsum([p.size for p in self._panels])
        bounds = [0] + [int(np.searchsorted(work, work[-1] * k / threads))
                        for k in range(1, threads)] + [len(self._panels)]
        return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]

    def _product32(self, t: float, x: np.ndarray) -> np.ndarray:
        """exp(-tD) x in float32 (x float32): by the compiled kernel where it is built
        (``_kernels.panel_product32``: each distance read once, its exponential used at once
        for the panel's row and its mirror), else by NumPy's passes (:func:`_panel_product32`)."""
        n = len(x)
        clamp = t * self.D_max > FLOAT32_EXPONENT_FLOOR
        floor = -FLOAT32_EXPONENT_FLOOR if clamp else -math.inf

        def share(bounds):
            a, b = bounds
            y = np.zeros(n, dtype=np.float32)
            if _compiled_panel_product32 is not None:
                for k in range(a, b):
                    _compiled_panel_product32(self._panels[k], k * _PANEL_ROWS, -t, floor, x, y)
                return y
            block = np.empty(_PANEL_ROWS * _CHUNK_COLUMNS, dtype=np.float32)
            for k in range(a, b):
                _panel_product32(self._panels[k], k * _PANEL_ROWS, t, x, y, block, clamp)
            return y

        parts = self._map(share, self._shares())
        return parts[0] if len(parts) == 1 else np.sum(parts, axis=0)

    def _product64(self, t: float, x: np.ndarray, *, derivative: bool = False,
                   absolute: bool = False):
        """In float64: ``Z x``, and ``(D ∘ Z) x`` and ``(D ∘ Z) |x|`` if asked."""
        n = len(x)
        columns = [v for v, wanted in ((x, derivative), (np.abs(x), absolute)) if wanted]
        clamp = t * self.D_max > EXPONENT_FLOOR
        if _compiled_panel_product64 is not None:
            return self._compiled_product64(t, x, columns, clamp)
        V = np.stack(columns, axis=1) if columns else None

        def share(bounds):
            a, b = bounds
            out = [np.zeros(n), np.zeros((n, len(columns)))]
            block = np.empty(_PANEL_ROWS * _CHUNK_COLUMNS)
            weighted = np.empty(_PANEL_ROWS * _CHUNK_COLUMNS) if columns else None
            for k in range(a, b):
                _panel_product64(self._panels[k], k * _PANEL_ROWS, t, x, V, out, block,
                                 weighted, clamp)
            return out

        parts = self._map(share, self._shares())
        Zx = np.sum([part[0] for part in parts], axis=0)
        WV = np.sum([part[1] for part in parts], axis=0)
        return [Zx] + [WV[:, k] for k in range(len(columns))]

    def _compiled_product64(self, t: float, x: np.ndarray, columns: list, clamp: bool):
        """:meth:`_product64` by the compiled kernel (``_kernels.panel_product64``): each
        panel's distances read once, every exponential used at once for ``Z x`` and for each
        of ``columns``, rows and mirror."""
        n = len(x)
        x = np.ascontiguousarray(x, dtype=np.float64)
        V = np.array(columns, dtype=np.float64).reshape(len(columns), n)
        floor = -EXPONENT_FLOOR if clamp else -math.inf

        def share(bounds):
            a, b = bounds
            out = np.zeros((1 + len(columns), n))
            for k in range(a, b):
                _compiled_panel_product64(self._panels[k], k * _PANEL_ROWS, -t, floor, x, V, out)
            return out

        parts = self._map(share, self._shares())
        total = parts[0] if len(parts) == 1 else np.sum(parts, axis=0)
        return list(total)

    def _correction(self, t: float, b: np.ndarray, energy_tol: float):
        """The float32 CG solve of ``Z_t d = b`` inside a refinement step (:func:`_cg32`):
        ``(d, iterations, estimate)``, ``d`` a float32 NumPy vector."""
        return _cg32(lambda v, _: self._product32(t, v), b.astype(np.float32), _INNER_RTOL,
                     _MAX_INNER_ITERATIONS, energy_tol=energy_tol)

    # -- one scale ----------------------------------------------------------------------------
    def _solve(self, t: float, *, derivative: bool = False, atol: float = 0.0):
        """Weighting at scale t by float32 CG inside float64 refinement, to an absolute error of
        ``max(solver_rtol · n, atol)``; returns ``(mag, dmag or None, w)`` and appends the
        scale's record."""
        n = self.n_unique
        atol = max(self.solver_rtol * n, atol)
        ones = np.ones(n)
        solved_before = float(t) in self._weightings
        x = warm_start(self._weightings, t, n)
        # Every float64 pass also forms (D ∘ Z) x (if asked) and (D ∘ Z)|x| (the distance
        # bound): the last one's are the results, and no separate final pass is needed.
        Zx, *extra = self._product64(t, x, derivative=derivative, absolute=True)
        r = ones - Zx
        value = float(x.sum() + r @ x)
        error, iterations, steps = math.inf, 0, 0
        previous_r = float(np.linalg.norm(r))
        gain = math.inf  # what the last refinement step added to the estimate
        if previous_r <= _CONVERGED_RESIDUAL * math.sqrt(n):
            error = 0.0  # the warm start is this scale's weighting already
        elif solved_before:
            # The warm start is this scale's own weighting, solved before (a derivative asked
            # after the value): its error is the one recorded then. Refining it again makes no
            # progress that the loop below could take as a bound.
            error = self._solver_errors.get(t, math.inf)
        while steps < _MAX_REFINEMENTS and error > atol and previous_r > 0:
            size = previous_r
            # The correction solves Z d = r / ‖r‖: its energy, times ‖r‖², is what the step
            # adds to the estimate, so the inner CG may stop once what it leaves is below atol.
            d, used, left = self._correction(t, r / size, atol / size**2)
            iterations += used
            x_new = x + size * d.astype(np.float64)
            Zx, *extra_new = self._product64(t, x_new, derivative=derivative, absolute=True)
            r_new = ones - Zx
            value_new = float(x_new.sum() + r_new @ x_new)
            size_new = float(np.linalg.norm(r_new))
            steps += 1
            settled = left * size**2 <= 0.25 * atol  # the inner solve's estimate of what is left
            if not (value_new > value or settled):  # no progress: float32 cannot resolve Z_t
                break
            # A step solves Z d = r, i.e. it adds about the estimate's whole error rᵀZ⁻¹r
            # (the estimate is quadratic in the residual): what it added bounds what is left,
            # once the gains shrink (by half at least; a gain as large as the last one says
            # the inner solves capture little of the error, so nothing is concluded). A gain
            # below zero is round-off: the estimate had converged.
            gain, previous_gain = max(value_new - value, 0.0), gain
            if gain <= 0.5 * previous_gain:
                error = gain
            if settled:
                error = min(error, left * size**2)
            if value_new >= value:
                x, r, value, previous_r, extra = x_new, r_new, value_new, size_new, extra_new
        dmag = float(x @ extra[0]) if derivative else None
        distance_error = self.distance_rtol * t * float(np.abs(x) @ extra[-1])
        if solved_before or len(self._weightings) < _KEPT_WEIGHTINGS:
            self._weightings[float(t)] = x
        self._solver_errors[float(t)] = float(error)
        self._errors[float(t)] = float(error + distance_error)
        record = {"t": float(t), "mag": value, "solver_error": float(error),
                  "distance_error": distance_error, "refinements": steps,
                  "iterations": iterations,
                  "relative_residual": previous_r / math.sqrt(n), "phase": self._phase}
        self.records.append(record)
        if error > atol:
            warnings.warn(
                f"large-n magnitude at t={t:.6g}: estimated solver error {error:.3g} exceeds "
                f"{atol:.3g} after {steps} refinement steps (Z_t too ill-conditioned for float32 "
                "CG at this scale); the value is a lower bound.", MagnitudeWarning, stacklevel=3)
        return value, dmag, x

    @property
    def evaluations(self) -> dict:
        """Scales solved so far, by phase (``convergence_scale``, ``mag_area``, ``other``)."""
        counts = {"convergence_scale": 0, "mag_area": 0, "other": 0}
        for record in self.records:
            counts[record["phase"]] += 1
        return counts

    def magnitude(self, t: float, *, atol: float = 0.0) -> float:
        """Mag(t) at one scale t >= 0, to ``max(solver_rtol · n_unique, atol)`` (estimated;
        ``atol``: a looser absolute accuracy a MagArea allows, see :meth:`_integrate`); a scale
        evaluated before is solved again only if its error was larger than now allowed."""
        t = float(t)
        atol = max(self.solver_rtol * self.n_unique, atol)
        if t not in self._cache or self._solver_errors.get(t, 0.0) > atol:
            self._cache[t] = self._solve(t, atol=atol)[0]
        return self._cache[t]

    def pair_sums(self, t: float) -> tuple[float, float]:
        """``Σ_{i≠j} exp(-t D_ij)`` and ``Σ_{i≠j} D_ij exp(-t D_ij)`` (see
        ``_search.first_order_scale``): one float64 product with the vector of ones."""
        Z1, DZ1 = self._product64(float(t), np.ones(self.n_unique), derivative=True)
        return float(Z1.sum()) - self.n_unique, float(DZ1.sum())

    def magnitude_and_derivative(self, t: float) -> tuple[float, float]:
        mag, dmag, _ = self._solve(float(t), derivative=True)
        self._cache[float(t)] = mag  # _solve recorded its error
        return mag, dmag

    def unique_weights(self, t: float) -> np.ndarray:
        return self._solve(float(t))[2]

    def _integrate(self, t_cut: float, *, method: str, rtol: float, n_ts: int) -> float:
        """MagArea with its error budget (see :attr:`area_error`).

        The integral needs each Mag(t) to an absolute accuracy of a small share of the mean
        height of the area only, not to ``solver_rtol · n``: once Mag(t_cut) is known (the
        largest scale comes first), scales are solved to ``rtol · Mag(t_cut) / 16`` (a mean
        height of Mag(t_cut) / 2 or more, as on [0, t_conv], leaves half of rtol to the
        quadrature); the budget below checks what that gave."""
        with self._phase_of("mag_area"):
            return self._integrate_counted(float(t_cut), method=method, rtol=rtol, n_ts=n_ts)

    def _integrate_counted(self, t_cut: float, *, method: str, rtol: float, n_ts: int) -> float:
        atol = 0.0
        if t_cut > 0 and method != "trapezoid":
            atol = rtol * abs(self.magnitude(t_cut)) / 16

        def magnitude(t: float) -> float:
            return self.magnitude(t, atol=atol)

        area, quadrature = _integrate(magnitude, t_cut, method=method, rtol=rtol, n_ts=n_ts,
                                      return_error=True, slope=self.magnitude_and_derivative,
                                      diameter=float(self.D_max))
        # The errors of the values the integral used (those in the cache now).
        inside = [error for t, error in self._errors.items() if 0 < t <= t_cut]
        evaluation = t_cut * max(inside, default=0.0)
        relative = (quadrature + evaluation) / abs(area) if area else math.inf
        self.area_error = {"quadrature": float(quadrature), "evaluation": float(evaluation),
                           "relative": float(relative)}
        if method != "trapezoid" and relative > rtol:
            warnings.warn(
                f"large-n MagArea on [0, {t_cut:.6g}]: estimated relative error {relative:.2g} "
                f"(quadrature {quadrature:.2g}, evaluations {evaluation:.2g}) exceeds rtol="
                f"{rtol:g}; lower solver_rtol.", MagnitudeWarning, stacklevel=3)
        return area


def _distance_panel(Y, sq, p: int, metric: str, roundoff: float, near_tol: float):
    """Rows [p, p + _PANEL_ROWS) of the upper trapezoid of the distance matrix, in float32,
    from float64 Gram products; with their row and column minima (off the diagonal), their
    largest entry and the off-diagonal pairs below ``near_tol``."""
    rows = slice(p, min(p + _PANEL_ROWS, len(Y)))
    h = rows.stop - p
    G = Y[rows] @ Y[p:].T
    if metric == "cosine":
        np.subtract(1.0, G, out=G)
        np.clip(G, 0.0, 2.0, out=G)
        G[G < roundoff] = 0.0
    else:
        scale = sq[rows, None] + sq[None, p:]
        np.multiply(G, -2.0, out=G)
        G += scale
        G[G <= 1e-12 * scale] = 0.0  # as pairwise_distances(algorithm="gram"): duplicates exact
        np.sqrt(G, out=G)
    # The diagonal block holds both triangles: symmetric by construction of the mirror.
    block = G[:, :h]
    block[np.tril_indices(h, -1)] = block.T[np.tril_indices(h, -1)]
    np.fill_diagonal(block, 0.0)
    panel = G.astype(np.float32)
    np.fill_diagonal(G[:, :h], np.inf)
    row_min = G.min(axis=1)
    col_min = G.min(axis=0)
    np.fill_diagonal(G[:, :h], 0.0)
    i, j = np.nonzero(G <= near_tol)
    keep = i < j
    pairs = [(int(a) + p, int(b) + p, float(G[a, b])) for a, b in zip(i[keep], j[keep],
                                                                       strict=True)]
    return panel, row_min, col_min, float(G.max()), pairs


def _panel_product32(panel, p: int, t: float, x, y, block, clamp: bool) -> None:
    """``y += Z x`` over one panel (rows ``p:p + h``) and its mirror, in float32, by NumPy's
    passes over column blocks of ``block`` (where the compiled kernel is not built)."""
    h, width = panel.shape
    rows = slice(p, p + h)
    xr = x[rows]
    for c in range(0, width, _CHUNK_COLUMNS):
        D = panel[:, c:c + _CHUNK_COLUMNS]
        Z = block[:D.size].reshape(D.shape)
        np.multiply(D, -t, out=Z)
        if clamp:  # only where some t·D exceeds the floor (17% of a product's time)
            np.maximum(Z, -FLOAT32_EXPONENT_FLOOR, out=Z)
        np.exp(Z, out=Z)
        cols = slice(p + c, p + c + D.shape[1])
        y[rows] += Z @ x[cols]
        first = h if c == 0 else 0  # the diagonal block is stored whole: no mirror for it
        if D.shape[1] > first:
            y[p + c + first:cols.stop] += xr @ Z[:, first:]


def _panel_product64(panel, p: int, t: float, x, V, out, block, weighted, clamp: bool) -> None:
    """``out[0] += Z x`` and, if ``V`` (n, k) is given, ``out[1] += (D ∘ Z) V`` (k columns: the
    weighting for the derivative, its absolute values for the distance bound; one matrix product
    for both reads the block once instead of twice)."""
    h, width = panel.shape
    rows = slice(p, p + h)
    for c in range(0, width, _CHUNK_COLUMNS):
        D32 = panel[:, c:c + _CHUNK_COLUMNS]
        Z = block[:D32.size].reshape(D32.shape)
        np.multiply(D32, -t, out=Z, dtype=np.float64)
        if clamp:
            np.maximum(Z, -EXPONENT_FLOOR, out=Z)
        np.exp(Z, out=Z)
        cols = slice(p + c, p + c + D32.shape[1])
        first = h if c == 0 else 0  # the diagonal block is stored whole: no mirror for it
        mirror = slice(p + c + first, cols.stop)
        out[0][rows] += Z @ x[cols]
        if D32.shape[1] > first:
            out[0][mirror] += x[rows] @ Z[:, first:]
        if V is not None:
            W = weighted[:D32.size].reshape(D32.shape)
            np.multiply(D32, Z, out=W, dtype=np.float64)
            out[1][rows] += W @ V[cols]
            if D32.shape[1] > first:
                out[1][mirror] += (V[rows].T @ W[:, first:]).T


def _cg32(product, b, rtol: float, maxiter: int, energy_tol: float = 0.0):
    """Conjugate gradients in float32 for ``Z d = b`` from 0 (``_cg.conjugate_gradients``,
    the dense path's routine; ``product(v, out)``: float32 Z v), until the residual is ``rtol``
    times ``b`` or, with ``energy_tol``, until the Hestenes–Stiefel estimate of the energy
    error left is below a quarter of it.

    Returns ``(d, iterations, estimate)``, ``estimate`` the energy error's estimate where the
    energy criterion stopped the loop, else infinity."""
    result = conjugate_gradients(product, np.zeros_like(b), b,
                                 stop=rtol * rtol * float(b @ b), budget=maxiter,
                                 energy_tol=energy_tol)
    return result.x, result.iterations, (result.estimate if result.stop == "energy"
                                         else math.inf)
