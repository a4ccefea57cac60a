"""Dense linear algebra of magnitude at one scale: ``Z_t w = 1`` for a distance matrix in memory.

:class:`_DenseSolver` answers ``Mag(t)``, the weighting and ``dMag/dt`` of one (de-duplicated)
space at a scale, by conjugate gradients (``_cg``; float32 iterations inside a float64
refinement), a float64 Cholesky factorisation, or, where ``Z_t`` is not numerically positive
definite, an LDLᵀ solve or a pseudo-inverse (recorded in :attr:`_DenseSolver.fallbacks` and
warned about). exp(-tD) comes from its :class:`~._similarity.SimilarityBuffer`. Everything here
is private; the public face is :class:`diversity_core.magnitude.MagnitudeSpace`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.linalg
from scipy.linalg import lapack

from .._threads import map_threads, single_threaded_if
from ._cg import (
    _conjugate_gradients,
    _conjugate_gradients_from,
    _symmetric_product,
    warm_start,
)
from ._common import (
    MagnitudeWarning,
)
from ._elementwise import (
    _exp_inplace,
    _row_blocks,
    _share_bounds,
    _weighted_row_sums,
)
from ._similarity import SimilarityBuffer
from ._triangles import pair_parts, triangle_block, triangle_rows

# float64 is the default: a single float32 factorisation is about twice as fast, but at large t
# it meets subnormal intermediates (20 times slower than float64 for 500 points), and measured
# end to end (convergence scale + MagArea, 1,000 to 2,000 points, quiet 2-core machine) the mixed
# path was 2.5 to 3 times slower with the direct solver and no faster with conjugate gradients.
PRECISIONS = ("double", "mixed")
SOLVERS = ("auto", "direct")
# Conjugate gradients are tried from this many distinct points on (see _solve_cg for the
# budget). Convergence scale + MagArea (rtol 1e-4) of clustered clouds, quiet 2-core machine,
# with CG / without: 500 points 27 / 32 ms, 700 points 48 / 64 ms, 1,000 points 84 / 137 ms;
# no difference at 400 points, and CG was slower at 300 (13 / 9 ms).
_CG_MIN_POINTS = 500
# Budget of float32 CG iterations per scale, all refinement steps together: n / 10 within
# [_CG_MIN_BUDGET, _CG_MAX_BUDGET]. One float64 factorisation cost as much as 73 to 93 iterations
# at n = 500, 118 to 254 at 1,000, 183 to 223 at 2,000 and 320 to 363 at 4,000 (one or two
# threads, 2-core machine), so a failed attempt costs 0.5 to 1.1 factorisations; of n / 10,
# n / 15 and n / 20, n / 10 was fastest end to end on clustered and on curvature clouds of 500 to
# 2,000 points (n / 20: 20% slower at 1,000 points). At 20,000 points one iteration takes about
# 40 ms and a single-threaded (see _POTRF_SINGLE_THREAD_FROM) factorisation about 40 s, hence the
# cap (with a cap of 500, the 20,000-point cosine benchmark needed one factorisation more and
# took 118 s instead of 80 s). A count, not a measured time, so that which solver answers a
# scale, and with it the last digits of every result, does not depend on the machine's load.
_CG_MIN_BUDGET = 25
_CG_MAX_BUDGET = 1000
_CG_POINTS_PER_ITERATION = 10
# Relative residual at which CG stops. Magnitude is taken as 1ᵀw + rᵀw, whose error rᵀZ⁻¹r is at
# most ‖r‖² / λ_min(Z) = 1e-18 n / λ_min: below 1e-12 of Mag wherever λ_min >= 1e-3 (measured:
# 0.008 at 0.004 t_conv for 1,000 clustered points, above 0.1 from 0.07 t_conv on), and 3e-11
# for 200 points at 1e-4 t_conv, where λ_min = 6e-6; the tests check agreement with the
# Cholesky path to 1e-10. (1ᵀw alone errs by 1ᵀZ⁻¹r, linearly in r: the former tolerance was
# 1e-10 for it.)
_CG_RTOL = 1e-9
# float32 iterations (inside the float64 refinement) from this many distinct points on; below,
# CG runs in float64 throughout (see _DenseSolver._solve_cg_double).
FLOAT32_CG_FROM = 6000
# Budget of float64 CG iterations per scale: n / 8 within [50, 250], about one factorisation
# (a float64 symv plus the loop's vector work cost 0.065 ms at n = 1,000 and 1.2 ms at 4,000,
# a factorisation 8 and 240 ms).
_CG64_MIN_BUDGET = 50
_CG64_MAX_BUDGET = 250
_CG64_POINTS_PER_ITERATION = 8
_CG_KEEP = 128  # CG solutions kept per space for warm starts (n floats each)
# Relative residual of each float32 CG solve inside the float64 refinement: two or three
# refinement steps reach _CG_RTOL, and float32 round-off (6e-8 times cond(Z)) stays below it
# wherever Z is well enough conditioned for CG to pay off.
_CG_INNER_RTOL = 1e-4
# Below this many distinct points, BLAS/LAPACK run single-threaded: convergence scale + MagArea
# took 9 ms on one thread and 16 ms on two for 300 points, the same for 400 to 600 points, and
# 51 / 48 ms for 700 points (1,000 points: 109 / 84 ms), and threads that spin-wait on an
# oversubscribed machine made a 300-point MagArea 100 times slower (11 s, 0.1 s).
_SINGLE_THREAD_BELOW = 700
# The multithreaded dpotrf of SciPy's bundled OpenBLAS (0.3.30, 32-bit integer interface; SciPy
# 1.17) crashes from about 16,000 points on (segmentation fault or "free(): invalid pointer" at
# 16,000, 16,384 and 20,000 points with 2 threads, also for the identity matrix; fine at 15,000,
# and single-threaded at 20,000). From this size on the factorisation runs on one thread, where
# n² float64 entries pass 2^30 bytes (the other LAPACK/BLAS calls used here were fine at 20,000).
_POTRF_SINGLE_THREAD_FROM = 11586


class _DenseSolver:
    """Solves ``Z_t w = 1`` for one de-duplicated (n, n) distance matrix ``D``, scale by scale.

    Parameters: see :class:`diversity_core.magnitude.MagnitudeSpace` (``precision``, ``solver``).
    Accuracy: every method answers to the solvers' full accuracy unless given ``atol`` > 0, the
    absolute error of ``Mag(t)`` a caller (MagArea's quadrature) allows; then conjugate
    gradients may stop on the estimated error of the magnitude itself, which
    :meth:`magnitude_with_error` returns.
    """

    def __init__(self, D: np.ndarray, *, precision: str, solver: str):
        self.D = D
        self.precision = precision
        self.n = D.shape[0]
        self._D_max = float(D.max()) if D.size else 0.0
        self._ones = np.ones(self.n)
        self.buffer = SimilarityBuffer(D, self._D_max)
        # The compiled form reads D as one C-contiguous float64 buffer.
        self._D_is_flat_float64 = D.dtype == np.float64 and D.flags.c_contiguous
        self._use_cg = solver == "auto" and self.n >= _CG_MIN_POINTS
        self._cg_floor = 0.0  # CG did not converge at this scale: not tried at or below it
        self._cg32_floor = 0.0  # the same for float32 CG
        self._cg_last = None  # last CG solution
        self._cg_solutions: dict[float, np.ndarray] = {}  # scale -> CG solution (warm starts)
        self._cg_budget = min(max(_CG_MIN_BUDGET, self.n // _CG_POINTS_PER_ITERATION),
                              _CG_MAX_BUDGET)
        self._cg64_budget = min(max(_CG64_MIN_BUDGET, self.n // _CG64_POINTS_PER_ITERATION),
                                _CG64_MAX_BUDGET)
        self.fallbacks: list[dict] = []  # see MagnitudeSpace.fallbacks

    @property
    def uses_cg(self) -> bool:
        """Whether conjugate gradients are tried (only they use an ``atol``)."""
        return self._use_cg

    @property
    def factors_in_float64(self) -> bool:
        """Whether a float64 Cholesky factor answers each scale (then d²Mag/dt² costs two
        triangular solves; MagArea's ``auto`` rule takes it)."""
        return not self._use_cg and self.precision == "double"

    def release(self) -> None:
        """Free the similarity buffers (they are allocated again on the next solve)."""
        self.buffer.release()

    def blas_threads(self):
        """The BLAS thread limit of this space's solves (a context manager)."""
        return single_threaded_if(self.n < _SINGLE_THREAD_BELOW)

    # -- solvers ------------------------------------------------------------------------------
    def _factor(self, t: float, *, keep_similarity: bool = False):
        """float64 Cholesky factor of Z_t, in place of the buffer's upper triangle (lower in the
        Fortran view), or None if Z_t is not numerically positive definite. With
        ``keep_similarity``, Z_t is also written to the strict lower triangle first, where it
        survives the factorisation (for the derivative; cheaper than exponentials afresh)."""
        Z = self.buffer.similarity(t, full=keep_similarity)
        self.buffer.invalidate()  # overwritten by the factor
        # clean=0 leaves the scratch triangle as it is.
        with single_threaded_if(self.n >= _POTRF_SINGLE_THREAD_FROM):
            L, info = lapack.dpotrf(Z.T, lower=1, clean=0, overwrite_a=1)
        return L if info == 0 else None

    def _solve_mixed(self, t: float, max_refinements: int = 8):
        """Weighting by a float32 Cholesky factor and float64 iterative refinement, or None.

        Refinement converges when cond(Z_t) · 6e-8 < 1; it stops at the float64 round-off floor
        of the residual, 64 eps (Z |w|). This is what LAPACK's dsposv does, but SciPy does not wrap
        dsposv, hence this loop.
        """
        Z = self.buffer.similarity(t)
        Z32 = self.buffer.float32_buffer()  # overwritten by the factor below

        # Products of entries below ~1e-19 are float32 subnormals, on which spotrf ran 35 times
        # slower (31 ms instead of 0.9 ms for 500 points at large t). Zeroing entries below
        # 1e-15 perturbs Z32 by a matrix of norm <= n·1e-15, far below float32's precision;
        # the refinement's float64 residuals see the exact Z.
        def copy(block) -> None:
            part = Z32[block]
            np.copyto(part, Z[block], casting="same_kind")
            part[part < 1e-15] = 0.0

        _row_blocks(self.n, full=True, threads=self.buffer.threads(), worker=lambda: copy)
        L32, info = lapack.spotrf(Z32.T, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return None
        w = lapack.spotrs(L32, self._ones.astype(np.float32), lower=1)[0].astype(np.float64)
        previous = np.inf
        for _ in range(max_refinements):
            residual = self._ones - _symmetric_product(Z, w)
            size = float(np.abs(residual).max())
            floor = 64 * np.finfo(np.float64).eps * float(_symmetric_product(Z, np.abs(w)).max())
            if size <= floor:
                return w
            if size > 0.5 * previous:  # stalled: float32 is not accurate enough for this Z
                return None
            previous = size
            w += lapack.spotrs(L32, residual.astype(np.float32), lower=1)[0]
        return None

    def _solve_fallback(self, t: float) -> np.ndarray:
        """Weighting for a similarity matrix that is not numerically positive definite
        (:func:`fallback_solve`), its record kept in :attr:`fallbacks`."""
        w, record = fallback_solve(self.D, t, stacklevel=6)
        self.fallbacks.append(record)
        return w

    def _solve_cg(self, t: float, atol: float = 0.0):
        """Weighting, its float64 residual and the estimated error of its magnitude
        ``(w, 1 − Z_t w, error)`` by conjugate gradients within their budgets, or None (then
        Cholesky answers); ``atol``: see :meth:`magnitude_with_error`.

        From ``FLOAT32_CG_FROM`` distinct points on, float32 iterations inside a float64
        refinement come first (:meth:`_solve_cg_mixed`); below that size, or at scales where
        float32 cannot resolve ``Z_t`` (small t), plain float64 CG (:meth:`_solve_cg_double`).
        A scale where neither converges marks the floor below which CG is not tried again.
        """
        if not self._use_cg or t <= self._cg_floor:
            return None
        solution = None
        if self.n >= FLOAT32_CG_FROM and t > self._cg32_floor:
            solution = self._solve_cg_mixed(t)
            if solution is None:
                self._cg32_floor = max(self._cg32_floor, t)
        if solution is None:
            solution = self._solve_cg_double(t, atol)
        if solution is None:
            self._cg_floor = max(self._cg_floor, t)
            return None
        self._cg_last = solution[0]
        if len(self._cg_solutions) < _CG_KEEP:
            self._cg_solutions[t] = solution[0]
        return solution

    def _solve_cg_mixed(self, t: float):
        """``(w, residual)`` by mixed-precision iterative refinement, or None.

        The residual ``r = 1 - Z_t w`` is formed in float64, the correction solves
        ``Z_t d = r`` by CG on the float32 copy of ``Z_t`` to a relative residual of
        ``_CG_INNER_RTOL``. A float32 symmetric matrix-vector product moves half the bytes and
        ran 1.8 to 3.2 times faster than the float64 one here (two threads: 0.032 against 0.103
        ms at n = 1,000, 0.59 against 1.19 ms at n = 4,000), while the refinement keeps the
        accuracy of float64: the loop ends when the float64 residual is below ``_CG_RTOL``. It
        is abandoned (None) when the budget of float32 iterations is spent, or when a
        refinement step fails to halve the residual (``Z_t`` too ill-conditioned for float32:
        small t), or as soon as the rate of the first refinement steps says the budget will not
        do.
        """
        Z32 = self.buffer.similarity(t, float32=True)  # both copies, in one pass if both are new
        Z = self.buffer.Z
        budget = self._cg_budget
        used = 0
        w, residual = self._warm_start(Z, t)
        goal = _CG_RTOL * math.sqrt(self.n)  # ‖1‖ = √n
        size = float(np.linalg.norm(residual))
        while size > goal:
            if used >= budget:
                break
            d, iterations = _conjugate_gradients(Z32, (residual / size).astype(np.float32),
                                                 _CG_INNER_RTOL, budget - used)
            used += iterations
            w += size * d
            residual = self._ones - _symmetric_product(Z, w)
            previous, size = size, float(np.linalg.norm(residual))
            if not size <= 0.5 * previous:  # also catches NaN
                break
            # Each refinement step costs about as many iterations as this one and divides the
            # residual by as much: give up now if that cannot end within the budget.
            steps_left = math.log(goal / size) / math.log(size / previous) if size > goal else 0
            if used + iterations * steps_left > budget:
                break
        if not size <= goal:
            return None
        return w, residual, 0.0

    def _solve_cg_double(self, t: float, atol: float = 0.0):
        """``(w, residual, error)`` by float64 conjugate gradients on ``Z_t`` itself, or None.

        Where float32 cannot resolve ``Z_t`` (at small t, cond(Z_t) ~ 1e5 for 1,000 clustered
        points: 6e-8 · 1e5 is no accuracy at all) float64 CG still converges, in 45 to 75
        iterations at 0.004 to 0.1 t_conv on clustered clouds of 1,000 points, i.e. at half the
        cost of a Cholesky factorisation; below ``FLOAT32_CG_FROM`` points it is also the
        faster choice at every scale (the float32 copy of Z_t costs more than its cheaper
        products save over the 5 to 25 iterations a scale takes there). Abandoned when its
        budget (about one factorisation) is spent or its rate says it will be. With ``atol``
        > 0 it may stop on the estimated error of the magnitude (``error``), else ``error`` is 0.
        """
        Z = self.buffer.similarity(t)
        w, residual = self._warm_start(Z, t)
        goal = _CG_RTOL * math.sqrt(self.n)
        x, r, iterations, estimate = _conjugate_gradients_from(
            Z, w, residual, goal, self._cg64_budget, energy_tol=atol)
        if x is None:
            return None
        residual = self._ones - _symmetric_product(Z, x)  # the true one, not the recursive one
        if atol > 0 and estimate <= 0.25 * atol:
            return x, residual, estimate
        if not float(np.linalg.norm(residual)) <= 10.0 * goal:
            return None
        return x, residual, 0.0

    def _warm_start(self, Z, t: float):
        """A first weighting at scale t (``_cg.warm_start`` through the solutions kept) and its
        residual."""
        w = warm_start(self._cg_solutions, t, self.n)
        return w, self._ones - _symmetric_product(Z, w)

    def _fast_solution(self, t: float, atol: float = 0.0):
        """``(w, residual or None, error)`` by CG or the mixed-precision factorisation, or None
        where neither applies."""
        solution = self._solve_cg(t, atol)
        if solution is None and self.precision == "mixed":
            w = self._solve_mixed(t)
            solution = None if w is None else (w, None, 0.0)
        return solution

    def magnitude_with_error(self, t: float, atol: float = 0.0) -> tuple[float, float]:
        """Mag(t) at one scale t > 0 (BLAS threads as set by the caller), and its estimated
        error where less than full accuracy was allowed (else 0).

        ``atol``: the absolute error of Mag(t) the caller allows (0: the solvers' full
        accuracy); conjugate gradients then stop on the estimated error of the magnitude itself
        (see ``MagnitudeSpace._integrate``). From an iterative weighting ``w`` with residual
        ``r = 1 − Z w``, ``Mag = 1ᵀw + rᵀw``: that is ``2·1ᵀw − wᵀZw``, which differs from
        ``1ᵀZ⁻¹1`` by ``rᵀZ⁻¹r`` only (the error is quadratic in the residual, where ``1ᵀw``
        alone errs by ``1ᵀZ⁻¹r``, linear in it)."""
        solution = self._fast_solution(t, atol)
        if solution is not None:
            w, residual, error = solution
            return float(w.sum() + (0.0 if residual is None else residual @ w)), error
        L = self._factor(t)
        if L is None:
            return float(self._solve_fallback(t).sum()), 0.0
        v, _ = lapack.dtrtrs(L, self._ones, lower=1)
        return float(v @ v), 0.0  # ‖L⁻¹1‖²: one triangular solve

    def magnitude(self, t: float) -> float:
        """Mag(t) at one scale t > 0, to full accuracy (see :meth:`magnitude_with_error`)."""
        return self.magnitude_with_error(t)[0]

    def weights(self, t: float, *, keep_similarity: bool = False) -> np.ndarray:
        """Weighting of the de-duplicated space at t > 0."""
        solution = self._fast_solution(t)
        if solution is not None:
            return solution[0]
        L = self._factor(t, keep_similarity=keep_similarity)
        if L is None:
            return self._solve_fallback(t)
        v, _ = lapack.dtrtrs(L, self._ones, lower=1)
        w, _ = lapack.dtrtrs(L, v, lower=1, trans=1)
        return w

    def weighted_distance_form(self, t: float, w: np.ndarray) -> float:
        """wᵀ (D ∘ exp(-tD)) w = 2 Σ_{i<j} w_i D_ij exp(-t D_ij) w_j (as D_ii = 0), over one
        triangle: by the compiled kernel where the buffer holds exp(-tD) (see
        :meth:`_compiled_form`), else in row blocks (see :meth:`_triangle_blocks`)."""
        if _weighted_row_sums is not None and self._D_is_flat_float64 \
                and t in (self.buffer.scale, self.buffer.lower_scale):
            return self._compiled_form(w, upper=self.buffer.scale == t)

        def form(E, Db, start, stop, cols) -> float:
            E *= Db
            return float(w[start:stop] @ (E @ w[cols]))

        total = 0.0
        for value in self._triangle_blocks(t, form):
            total += value
        return 2.0 * total

    def _compiled_form(self, w: np.ndarray, *, upper: bool) -> float:
        """wᵀ (D ∘ Z_t) w from the buffer's Z_t (its upper triangle, else its strict lower one)
        through ``_kernels.weighted_row_sums``: one pass over D and Z, where NumPy's row blocks
        take four (0.85 against 2.5 ms at 1,500 points, one thread). One call per elementwise
        thread of the buffer, on equal shares of the upper triangle's entries (of the lower
        one's rows: Z_t is there only after a factorisation, mostly below the size where those
        threads start); each row's sum has bits of its own, and NumPy's pairwise sum adds them,
        so the thread count changes no bit. (Calls on the fill's 1 MiB row blocks instead took
        14 to 30 % longer, from 1,500 to 2,600 points.)"""
        n = self.n
        sums = np.empty(n)
        w = np.ascontiguousarray(w, dtype=np.float64)
        threads = min(self.buffer.threads(), n)
        bounds = _share_bounds(n, threads, full=not upper)
        map_threads(lambda rows: _weighted_row_sums(self.buffer.Z, self.D, w, sums, upper, *rows),
                    list(zip(bounds[:-1], bounds[1:], strict=True)), threads)
        return 2.0 * float(np.add.reduce(w * sums))

    def pair_sums(self, t: float) -> tuple[float, float]:
        """``Σ_{i≠j} exp(-t D_ij)`` and ``Σ_{i≠j} D_ij exp(-t D_ij)`` (the first-order bound
        on Mag(t) and its slope, see ``_search.first_order_scale``), in one pass over one
        triangle (see :meth:`_triangle_blocks`)."""

        def sums(E, Db, start, stop, cols) -> tuple[float, float]:
            return pair_parts(E, Db)

        total = [0.0, 0.0]
        for similarity, weighted in self._triangle_blocks(t, sums):
            total[0] += similarity
            total[1] += weighted
        return 2.0 * total[0], 2.0 * total[1]

    def _triangle_blocks(self, t: float, reduce) -> list:
        """``reduce(E, Db, start, stop, cols)`` of each row block of one strict triangle of
        exp(-tD), in block order: ``E`` is the block's exp(-tD) (a fresh array, zero outside
        the strict triangle; the caller's to overwrite), ``Db`` = ``D[start:stop, cols]``.
        exp(-tD) is read from the buffer's upper triangle if it holds t (conjugate gradients
        leave it intact), else from its lower one if that does (see ``_factor``), else formed
        afresh; O(block · n) extra memory per thread.

        The blocks are shared among the buffer's elementwise threads (from 2,500 points on) in
        contiguous runs, and the values come back in block order, to be added on one thread:
        the bits do not depend on the thread count."""
        n = self.n
        rows = triangle_rows(n)
        Z = self.buffer.Z
        upper = self.buffer.scale == t
        lower = not upper and self.buffer.lower_scale == t

        def block(start: int):
            stop = min(start + rows, n)
            if not (upper or lower):
                return reduce(*triangle_block(self.D, t, start, stop), start, stop,
                              slice(start, n))
            cols = slice(0, stop) if lower else slice(start, n)
            Db = self.D[start:stop, cols]
            E = Z[start:stop, cols].copy()
            # Of the diagonal block, only the strict lower (upper) triangle belongs to the sum.
            if lower:
                E[:, start:stop] = np.tril(E[:, start:stop], -1)
            else:
                E[:, :stop - start] = np.triu(E[:, :stop - start], 1)
            return reduce(E, Db, start, stop, cols)

        starts = list(range(0, n, rows))
        threads = min(self.buffer.threads(), len(starts))
        bounds = np.linspace(0, len(starts), threads + 1).astype(int)
        shares = [starts[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        # BLAS on one thread inside the shares (no oversubscription; gemv's bits do not depend
        # on its thread count, each output entry being one dot product).
        with single_threaded_if(threads > 1):
            parts = map_threads(lambda share: [block(start) for start in share], shares, threads)
        return [value for part in parts for value in part]

    def magnitude_and_derivative(self, t: float, atol: float = 0.0) -> tuple[float, float, float]:
        """Mag(t), dMag/dt = wᵀ (D ∘ Z_t) w with the weighting w (Mag as in
        :meth:`magnitude_with_error` where CG answered), and the estimated error of Mag where
        ``atol`` > 0 let conjugate gradients stop on it (else 0). The derivative then comes from
        that weighting too: its error is linear in the weighting's (``2 eᵀ (D ∘ Z_t) w``, where
        Mag's is quadratic), hence the smaller allowance the Hermite rules give it
        (``_space._SLOPE_ATOL_SHARE``)."""
        solution = self._fast_solution(t, atol)
        error = 0.0
        if solution is not None and solution[1] is not None:
            w, residual, error = solution
            mag = float(w.sum() + residual @ w)
        else:
            w = solution[0] if solution is not None else self.weights(t, keep_similarity=True)
            mag = float(w.sum())
        return mag, self.weighted_distance_form(t, w), error

    def magnitude_and_derivatives(self, t: float, atol: float = 0.0,
                                  curvature_atol: float = 0.0) -> tuple[float, float, float,
                                                                        float]:
        """Mag(t), dMag/dt, d²Mag/dt² and Mag's estimated error (as
        :meth:`magnitude_and_derivative`). Differentiating Z_t w = 1 twice:
        ``Mag'' = 2 vᵀ Z_t⁻¹ v − wᵀ (D² ∘ Z_t) w`` with ``v = (D ∘ Z_t) w``. Z_t⁻¹ v takes two
        triangular solves where a Cholesky factor answered, else a second conjugate-gradient
        solve from zero (the factor where that does not converge within its budget), else the
        least-squares solve of a matrix that is not positive definite (see
        :meth:`_inverse_form`). ``curvature_atol``: the absolute error of d²Mag/dt² the caller
        allows where conjugate gradients answer (0: their full accuracy)."""
        solution = self._fast_solution(t, atol)
        error, L = 0.0, None
        if solution is not None:
            w, residual, error = solution
            mag = float(w.sum() + (0.0 if residual is None else residual @ w))
        else:
            L = self._factor(t, keep_similarity=True)
            if L is None:
                w = self._solve_fallback(t)
            else:
                v, _ = lapack.dtrtrs(L, self._ones, lower=1)
                w, _ = lapack.dtrtrs(L, v, lower=1, trans=1)
            mag = float(w.sum())
        v, curvature_form = self.distance_products(t, w)
        by_cg = solution is not None and solution[1] is not None
        energy = self._inverse_form(t, v, L, by_cg=by_cg, factorable=solution is not None,
                                    atol=0.5 * curvature_atol)
        return mag, float(w @ v), float(2.0 * energy - curvature_form), error

    def _inverse_form(self, t: float, v: np.ndarray, L, *, by_cg: bool, factorable: bool,
                      atol: float = 0.0) -> float:
        """vᵀ Z_t⁻¹ v after the weighting's solve at t: by its Cholesky factor ``L`` if any, by
        conjugate gradients from zero where they gave the weighting (``by_cg``; the
        variational estimate ``vᵀu + rᵀu`` of an approximate solution u with residual r, whose
        error is quadratic in r, stopping where its estimated error is below ``atol`` if
        positive), by the float64 factor where they do not converge or where the
        mixed-precision factor answered, and by least squares where Z_t is not positive
        definite (not ``factorable``, or the factor fails)."""
        if L is None and by_cg:
            u, r, _, _ = _conjugate_gradients_from(self.buffer.similarity(t), np.zeros(self.n),
                                                   v, _CG_RTOL * float(np.linalg.norm(v)),
                                                   self._cg64_budget, energy_tol=atol)
            if u is not None:
                return float(v @ u + r @ u)
        if L is None and factorable:
            L = self._factor(t)
        if L is None:
            return _least_squares_form(self.D, t, v)[0]
        half, _ = lapack.dtrtrs(L, v, lower=1)
        return float(half @ half)  # ‖L⁻¹v‖²

    def distance_products(self, t: float, w: np.ndarray) -> tuple[np.ndarray, float]:
        """``(D ∘ Z_t) w`` and ``wᵀ (D² ∘ Z_t) w`` in one pass over one triangle in row blocks
        (see :meth:`_triangle_blocks`; D's diagonal is 0)."""

        def products(E, Db, start, stop, cols):
            E *= Db
            rows_part, cols_part = E @ w[cols], w[start:stop] @ E
            E *= Db
            return start, stop, cols, rows_part, cols_part, float(w[start:stop] @ (E @ w[cols]))

        v = np.zeros(self.n)
        form = 0.0
        for start, stop, cols, rows_part, cols_part, part in self._triangle_blocks(t, products):
            v[start:stop] += rows_part
            v[cols] += cols_part
            form += part
        return v, 2.0 * form


def fallback_derivatives(D: np.ndarray, t: float, w: np.ndarray) -> tuple[float, float]:
    """dMag/dt and d²Mag/dt² (see ``_DenseSolver.magnitude_and_derivatives``) from the weighting
    ``w`` that :func:`fallback_solve` gave where Z_t is not positive definite: the products in
    full and Z_t⁻¹v by least squares (for the torch paths, whose fallback runs on the host)."""
    DZ = np.multiply(D, -t)
    _exp_inplace(DZ)
    DZ *= D
    v = DZ @ w
    inverse_form, _ = _least_squares_form(D, t, v)
    return float(w @ v), 2.0 * inverse_form - float(w @ ((D * DZ) @ w))


def _least_squares_form(D: np.ndarray, t: float, v: np.ndarray) -> tuple[float, np.ndarray]:
    """vᵀ Z_t⁻¹ v by the least-squares solution u of Z_t u = v (Z_t = exp(-tD) not positive
    definite, perhaps singular), and u."""
    Z = np.multiply(D, -t)
    _exp_inplace(Z)
    u = np.linalg.lstsq(Z, v, rcond=None)[0]
    return float(v @ u), u


def fallback_solve(D: np.ndarray, t: float, *, stacklevel: int = 2) -> tuple[np.ndarray, dict]:
    """Weighting ``w`` of ``Z_t = exp(-tD)`` where Cholesky failed (not numerically positive
    definite), and the record of the solve; a :class:`MagnitudeWarning` names the scale. The
    one fallback of every path (the dense solver, the batch's members, the torch path's scales,
    solved on the host).

    A symmetric indefinite LDLᵀ solve, else (singular ``Z``) the pseudo-inverse. The record:
    ``t``, ``solver`` (``ldl``/``pinv``), ``relative_residual`` ``‖1 − Z w‖ / ‖1‖`` and
    ``mag_error_bound``: the computed ``w`` solves ``Z w = 1 − r`` exactly, so
    ``Mag(t) − 1ᵀw = w*ᵀ r`` with ``w* = Z⁻¹1``, and ``|w*ᵀ r| <= ‖w‖ ‖r‖`` to first order in
    ``r`` (``w* = w + Z⁻¹ r``); for the pseudo-inverse plus how much ``1ᵀw`` changes when the
    eigenvalue cutoff is raised tenfold (the singular part of ``Z`` has no exact value to
    compare with; the magnitude reported is that of the subspace where ``Z`` is invertible),
    and ``dropped_eigenvalues``.
    """
    n = D.shape[0]
    ones = np.ones(n)
    Z = np.multiply(D, -t)
    _exp_inplace(Z)

    def record(solver: str, w, sensitivity: float) -> dict:
        residual = ones - Z @ w
        return {"t": float(t), "solver": solver,
                "relative_residual": float(np.linalg.norm(residual) / math.sqrt(n)),
                "mag_error_bound": float(np.linalg.norm(w) * np.linalg.norm(residual))
                + sensitivity}

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
            w = scipy.linalg.solve(Z, ones, assume_a="sym", check_finite=False)
        found = record("ldl", w, 0.0)
        warnings.warn(
            f"similarity matrix exp(-tD) is not positive definite at t={t:.6g}; magnitude "
            "computed with a symmetric indefinite (LDLᵀ) solve (error <= "
            f"{found['mag_error_bound']:.2g}). This happens for distances that are not of "
            "negative type, where magnitude may be non-monotone, negative or have poles, and "
            "for numerically singular Z at very small t.",
            MagnitudeWarning,
            stacklevel=stacklevel,
        )
        return w, found
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
        pass
    evals, evecs = np.linalg.eigh(Z)
    cutoff = np.abs(evals).max() * n * np.finfo(float).eps
    projections = evecs.T @ ones

    def pseudo_inverse(threshold):
        keep = np.abs(evals) > threshold
        return keep, evecs[:, keep] @ (projections[keep] / evals[keep])

    keep, w = pseudo_inverse(cutoff)
    # How much the value depends on where the cutoff is drawn: with a cutoff 10 times
    # higher, eigenvalues just above round-off are dropped as well.
    _, w_coarse = pseudo_inverse(10.0 * cutoff)
    found = record("pinv", w, abs(float(w.sum() - w_coarse.sum())))
    found["dropped_eigenvalues"] = int((~keep).sum())
    warnings.warn(
        f"similarity matrix exp(-tD) is singular at t={t:.6g} "
        f"({int((~keep).sum())} eigenvalue(s) below {cutoff:.3g}); magnitude computed with "
        "the pseudo-inverse, i.e. on the subspace where Z is invertible (error <= "
        f"{found['mag_error_bound']:.2g}).",
        MagnitudeWarning,
        stacklevel=stacklevel,
    )
    return w, found
