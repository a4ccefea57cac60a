"""Dense linear algebra of magnitude at one scale: ``Z_t w = 1`` for a distance matrix in memory.

:class:`_DenseSolver` owns the similarity buffers of one (de-duplicated) space and answers
``Mag(t)``, the weighting and ``dMag/dt`` at a scale, by conjugate gradients (float32 iterations
inside a float64 refinement), a float64 Cholesky factorisation, or, where ``Z_t`` is not
numerically positive definite, an LDLᵀ solve or a pseudo-inverse (recorded in
:attr:`_DenseSolver.fallbacks` and warned about). Everything here is private; the public face is
:class:`diversity_core.magnitude.MagnitudeSpace`.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg
from scipy.linalg import blas, lapack
from threadpoolctl import ThreadpoolController

try:  # glibc's vector exp (see _vexp.c): absent where the extension was not built
    from ._vexp import VECTORISED as _VEXP_VECTORISED
    from ._vexp import exp_inplace as _vexp_inplace
except ImportError:
    _vexp_inplace, _VEXP_VECTORISED = None, False

# Which routine exponentiates the similarity matrices (the last bits of every magnitude depend
# on it): glibc's AVX2 vector exp through _vexp ("libmvec-avx2"), glibc's scalar exp through
# _vexp on a CPU without AVX2 ("glibc-scalar"), or NumPy's exp where _vexp was not built.
EXPONENTIAL = ("numpy" if _vexp_inplace is None
               else "libmvec-avx2" if _VEXP_VECTORISED else "glibc-scalar")

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
_FLOAT32_CG_FROM = 6000
# Budget of float64 CG iterations per scale: n / 8 within [50, 250], about one factorisation
# (a float64 symv plus the loop's vector work cost 0.065 ms at n = 1,000 and 1.2 ms at 4,000,
# a factorisation 8 and 240 ms).
_CG64_MIN_BUDGET = 50
_CG64_MAX_BUDGET = 250
_CG64_POINTS_PER_ITERATION = 8
# Decrements of the CG energy error summed for its estimate (see _conjugate_gradients_from).
_CG_DELAY = 8
_CG_KEEP = 128  # CG solutions kept per space for warm starts (n floats each)
# Warm starts: the polynomial through the solutions at up to this many scales nearest the new
# one, fewer where its coefficients would amplify their errors more than this (see
# _DenseSolver._warm_start). CG iterations of a default convergence scale + MagArea at the
# benchmark's 1,000 points: 378 from the straight line between the neighbours; through 4, 5
# and 6 scales without a bound 317, 313 and 305; through 4 with a bound of 100, 10 and 4: 327,
# 326 and 333 (the bound matters next to the search's nearly coincident scales).
_WARM_START_SCALES = 4
_WARM_START_GAIN = 100.0
# Relative residual of each float32 CG solve inside the float64 refinement: two or three
# refinement steps reach _CG_RTOL, and float32 round-off (6e-8 times cond(Z)) stays below it
# wherever Z is well enough conditioned for CG to pay off.
_CG_INNER_RTOL = 1e-4
# Below this many distinct points, BLAS/LAPACK run single-threaded: convergence scale + MagArea
# took 9 ms on one thread and 16 ms on two for 300 points, the same for 400 to 600 points, and
# 51 / 48 ms for 700 points (1,000 points: 109 / 84 ms), and threads that spin-wait on an
# oversubscribed machine made a 300-point MagArea 100 times slower (11 s, 0.1 s).
_SINGLE_THREAD_BELOW = 700
# exp(-tD) is formed on one thread below this many distinct points: convergence scale + MagArea
# of the benchmark clouds took 80 against 96 ms at n = 1,000 and 326 against 342 ms at 2,000
# (the pool's hand-offs cost more than the second core saves there).
_FILL_SINGLE_THREAD_BELOW = 2500
# The multithreaded dpotrf of SciPy's bundled OpenBLAS (0.3.30, 32-bit integer interface; SciPy
# 1.17) crashes from about 16,000 points on (segmentation fault or "free(): invalid pointer" at
# 16,000, 16,384 and 20,000 points with 2 threads, also for the identity matrix; fine at 15,000,
# and single-threaded at 20,000). From this size on the factorisation runs on one thread, where
# n² float64 entries pass 2^30 bytes (the other LAPACK/BLAS calls used here were fine at 20,000).
_POTRF_SINGLE_THREAD_FROM = 11586
# Elementwise work (exp(-tD), the float32 copy) runs in row blocks of this many entries, which
# stay in a core's cache between steps: 1 MiB of float64 (filling exp(-tD) for 2,000 points took
# 8.0, 8.3 and 9.7 ms with blocks of 1 MiB, 256 KiB and 64 KiB on one thread).
_BLOCK_ENTRIES = 131072
_EXPONENT_FLOOR = 345.0  # exp(-345) = 1e-150: see _fill_similarity
# exp(-tD) is formed from the buffer's exp(-sD) where |t - s|·max(D) is at most this (see
# _DenseSolver._shifted_similarity): 2^-12, where a Taylor polynomial of degree 4 is exact.
_SHIFT_LIMIT = 2.0**-12
# MagArea's scales in pairs t, T - t (see _DenseSolver.expect_pairs): from this many distinct
# points on (below, the batch's stacked solves answer, and bookkeeping would outweigh the
# exponentials saved), where the two extra buffers (exp(-TD) and a smaller partner's
# exp(-tD)) take at most this much memory (up to 5,792 points).
_PAIR_MIN_POINTS = 65
_PAIR_BUFFER_BYTES = 512 * 2**20
_FLOAT32_FLOOR = 1e-20  # smaller entries are zero in the float32 copy: see _fill_similarity


class MagnitudeWarning(UserWarning):
    """The similarity matrix was not positive definite; a fallback solver was used."""


@functools.cache
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()


def _single_threaded_if(condition: bool):
    """A context in which BLAS/LAPACK run on one thread if ``condition``, else unchanged."""
    if condition:
        return _threadpools().limit(limits=1, user_api="blas")
    return contextlib.nullcontext()


class _DenseSolver:
    """Solves ``Z_t w = 1`` for one de-duplicated (n, n) distance matrix ``D``, scale by scale.

    Only the upper triangle (row <= column, C order) of the reusable buffer ``_Z`` holds
    exp(-tD): Z is symmetric, and LAPACK's Cholesky and BLAS's symv read one triangle, so the
    other is never computed (half the exponentials; a symmetric matrix-vector product reads half
    the memory of a general one and ran 1.6 to 3.8 times faster here). The strict lower triangle
    is scratch. ``Z.T`` is the same matrix in Fortran order with the upper triangle as its
    *lower* one: that is the view handed to LAPACK and BLAS (no copy).

    Parameters: see :class:`diversity_core.magnitude.MagnitudeSpace` (``precision``, ``solver``).
    """

    def __init__(self, D: np.ndarray, *, precision: str, solver: str):
        self.D = D
        self.precision = precision
        self.n = D.shape[0]
        self._D_max = float(D.max()) if D.size else 0.0
        self._ones = np.ones(self.n)
        self._Z = None  # float64 buffer, allocated on first use
        self._Z_scale = None  # the t whose exp(-tD) the buffer's upper triangle holds, if any
        self._Z_lower_scale = None  # the same for its strict lower triangle (see _factor)
        self._Z32 = None  # float32 buffer, allocated on first use (CG, mixed precision)
        self._Z32_scale = None  # the t whose exp(-tD) the float32 buffer holds intact, if any
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
        # Pairs of scales announced by the quadrature (see expect_pairs): the larger scale ->
        # its smaller partner, the scale T whose exp(-TD) divides, its half, the buffer holding
        # exp(-TD) in its upper triangle (valid for _pair_total), the smaller partner's exp(-tD)
        # formed with its larger one (scale -> buffer; one at a time), and a buffer to reuse.
        self._pair_partners: dict[float, float] = {}
        self._pair_total = self._pair_half = None
        self._E_total = None
        self._E_total_valid = False
        self._stash: dict[float, np.ndarray] = {}
        self._spare: list[np.ndarray] = []
        # Absolute accuracy a MagArea asks of Mag(t) (0: to the solvers' full accuracy), and
        # the estimated error of the last magnitude computed under it (0 when exact).
        self.atol = 0.0
        self.last_error = 0.0

    # -- buffers ------------------------------------------------------------------------------
    def release(self) -> None:
        """Free the similarity buffers (they are allocated again on the next solve)."""
        self._Z = self._Z32 = None
        self._Z_scale = self._Z_lower_scale = self._Z32_scale = None
        self.expect_pairs([], None, None)

    # -- scales in pairs ----------------------------------------------------------------------
    def expect_pairs(self, pairs, total, half) -> None:
        """Announce the next scales (see ``_quadrature._cc_panel``): ``pairs`` of scales
        (larger, smaller) summing to ``total`` up to round-off, the two of a pair asked for one
        after the other, the larger first, and ``half`` = total / 2 (or None); no pairs frees
        the buffers.

        Then exp(-tD) of a larger scale is exp(-total·D) / exp(-sD), with exp(-sD) of its
        smaller partner s formed now and kept for its turn, and exp(-half·D) is
        sqrt(exp(-total·D)): one division or square root an entry instead of an exponential
        (7 to 11 ns an entry where NumPy's float64 exp is scalar, without AVX-512): 13 of the
        23 new scales of a 25-scale MagArea (the larger of 11 pairs, total / 2, and a smaller
        partner total / 4 as the square root of that) without exponentials of their own,
        exp(-total·D) copied where the similarity buffer holds it (the convergence scale's last
        solve). The entries differ from the exponential's by a few units in the last place, as
        much as the exponential's own rounding; apart from total / 4, only scales of total / 2
        and above are formed so, where Z is well conditioned, and not where exp(-total·D)
        meets its floor (``_EXPONENT_FLOOR``), which would break the identity. The batch does
        the same for its looped members
        (``_batch._looped_values``)."""
        self._spare.extend(self._stash.values())
        self._stash.clear()
        self._pair_partners = {}
        self._pair_half = None
        usable = (total is not None and _pair_memory(self.n) > 0
                  and total * self._D_max <= _EXPONENT_FLOOR)
        if not usable or not (pairs or half is not None):
            self._pair_total = None
            self._E_total = None
            self._E_total_valid = False
            self._spare.clear()
            return
        if total != self._pair_total:
            self._pair_total, self._E_total_valid = total, False
        self._pair_partners = dict(pairs)
        self._pair_half = half

    def _paired_similarity(self, t: float) -> bool:
        """exp(-tD) in the upper triangle of the buffer from an announced pair, if t is one of
        its scales (see :meth:`expect_pairs`); False where it must be formed by exponentials."""
        if t in self._stash:  # a smaller partner, formed with its larger one: the buffers swap
            self._spare.append(self._Z)
            self._Z = self._stash.pop(t)
            return True
        smaller = self._pair_partners.pop(t, None)
        half = t == self._pair_half
        if smaller is None and not half:
            return False
        if smaller is not None and self._stash:
            # A partner still waits (the pairs were not asked for one after the other, as
            # _quadrature._paired_order has them): no memory for another, both by exponentials.
            return False
        E_total = self._total_similarity()
        if half:
            _row_blocks(self.n, full=False, threads=1,
                        worker=lambda: lambda rows: np.sqrt(E_total[rows], out=self._Z[rows]))
            return True
        E_smaller = self._spare.pop() if self._spare else np.zeros(self.D.shape)
        if abs(smaller - 0.25 * self._pair_total) <= 8 * np.finfo(float).eps * self._pair_total:
            # The first level's t_N/4 = T/4 (Chebyshev node cos(π/3) = 1/2): exp(-TD/4) is
            # sqrt(sqrt(exp(-TD))), two square roots an entry instead of an exponential (the
            # pair's fill 4.0 against 5.4 to 7.9 ms at n = 1,000 here).
            def quarter(rows) -> None:
                np.sqrt(E_total[rows], out=E_smaller[rows])
                np.sqrt(E_smaller[rows], out=E_smaller[rows])
                np.divide(E_total[rows], E_smaller[rows], out=self._Z[rows])
            _row_blocks(self.n, full=False, threads=1, worker=lambda: quarter)
        else:
            _fill_similarity(self.D, smaller, E_smaller, None, fill64=True, full=False,
                             clamp=False, threads=self._elementwise_threads(),
                             quotient=(E_total, self._Z))
        self._stash[smaller] = E_smaller
        return True

    def _shifted_similarity(self, t: float) -> bool:
        """exp(-tD) in the upper triangle of the buffer from the exp(-sD) it holds, where s is
        within ``_SHIFT_LIMIT`` / max(D) of t (the convergence scale's last Newton step, about
        1e-6 t, or a MagArea up to a convergence scale that the search returned without solving
        at it), as exp(-sD) ∘ exp(-(t - s)D) with the second factor by its Taylor polynomial
        (see :func:`_shift_similarity`); False otherwise."""
        s = self._Z_scale
        if s is None or not abs(t - s) * self._D_max <= _SHIFT_LIMIT \
                or max(s, t) * self._D_max > _EXPONENT_FLOOR:  # clamped entries: no identity
            return False
        _shift_similarity(self.D, t - s, self._Z, threads=self._elementwise_threads())
        return True

    def _total_similarity(self) -> np.ndarray:
        """exp(-TD) for the announced pairs' T, in the upper triangle of its own buffer (a copy
        of the similarity buffer's where that holds it)."""
        if not self._E_total_valid:
            if self._E_total is None:
                self._E_total = np.zeros(self.D.shape)
            if self._Z_scale == self._pair_total:
                _row_blocks(self.n, full=False, threads=1,
                            worker=lambda: lambda rows: np.copyto(self._E_total[rows],
                                                                  self._Z[rows]))
            else:
                _fill_similarity(self.D, self._pair_total, self._E_total, None, fill64=True,
                                 full=False, clamp=False, threads=self._elementwise_threads())
            self._E_total_valid = True
        return self._E_total

    def _similarity(self, t: float, *, float32: bool = False, full: bool = False) -> np.ndarray:
        """exp(-tD) in the upper triangle of the reusable float64 buffer, in its lower triangle
        too if ``full``, and in the upper triangle of the float32 buffer if ``float32``."""
        if self._Z is None:
            self._Z = np.zeros(self.D.shape)  # zeros: the scratch triangle stays finite
        fill64 = self._Z_scale != t or (full and self._Z_lower_scale != t)
        fill32 = float32 and self._Z32_scale != t
        if fill32 and self._Z32 is None:
            self._Z32 = np.empty(self.D.shape, dtype=np.float32)
        if fill64 and not full and (self._paired_similarity(t) or self._shifted_similarity(t)):
            fill64 = False
            self._Z_scale, self._Z_lower_scale = t, None
        if fill64 or fill32:
            _fill_similarity(self.D, t, self._Z, self._Z32 if fill32 else None,
                             fill64=fill64, full=full,
                             clamp=t * self._D_max > _EXPONENT_FLOOR,
                             threads=self._elementwise_threads())
            self._Z_scale = t
            if fill64:
                # An upper fill also writes some of the lower triangle (in diagonal blocks).
                self._Z_lower_scale = t if full else None
            if fill32:
                self._Z32_scale = t
        return self._Z32 if float32 else self._Z

    def _elementwise_threads(self) -> int:
        if self.n < _FILL_SINGLE_THREAD_BELOW:
            return 1
        return max((c.num_threads for c in _threadpools().select(user_api="blas").lib_controllers),
                   default=1)

    def blas_threads(self):
        """The BLAS thread limit of this space's solves (a context manager)."""
        return _single_threaded_if(self.n < _SINGLE_THREAD_BELOW)

    # -- solvers ------------------------------------------------------------------------------
    def _factor(self, t: float, *, keep_similarity: bool = False):
        """float64 Cholesky factor of Z_t, in place of the buffer's upper triangle (lower in the
        Fortran view), or None if Z_t is not numerically positive definite. With
        ``keep_similarity``, Z_t is also written to the strict lower triangle first, where it
        survives the factorisation (for the derivative; cheaper than exponentials afresh)."""
        Z = self._similarity(t, full=keep_similarity)
        self._Z_scale = None  # overwritten by the factor
        # clean=0 leaves the scratch triangle as it is.
        with _single_threaded_if(self.n >= _POTRF_SINGLE_THREAD_FROM):
            L, info = lapack.dpotrf(Z.T, lower=1, clean=0, overwrite_a=1)
        return L if info == 0 else None

    def _solve_mixed(self, t: float, max_refinements: int = 8):
        """Weighting by a float32 Cholesky factor and float64 iterative refinement, or None.

        Refinement converges when cond(Z_t) · 6e-8 < 1; it stops at the float64 round-off floor
        of the residual, 64 eps (Z |w|). This is what LAPACK's dsposv does, but SciPy does not wrap
        dsposv, hence this loop.
        """
        Z = self._similarity(t)
        if self._Z32 is None:
            self._Z32 = np.empty(Z.shape, dtype=np.float32)
        Z32 = self._Z32
        np.copyto(Z32, Z, casting="same_kind")
        self._Z32_scale = None  # overwritten by the factor below
        # Products of entries below ~1e-19 are float32 subnormals, on which spotrf ran 35 times
        # slower (31 ms instead of 0.9 ms for 500 points at large t). Zeroing entries below
        # 1e-15 perturbs Z32 by a matrix of norm <= n·1e-15, far below float32's precision;
        # the refinement's float64 residuals see the exact Z.
        Z32[Z32 < 1e-15] = 0.0
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
        """Weighting for a similarity matrix that is not numerically positive definite.

        Records the scale, the solver and what the solve implies for the error of ``Mag(t)``
        in :attr:`fallbacks` (see :meth:`_record_fallback`), and warns."""
        Z = np.multiply(self.D, -t)
        _exp_inplace(Z)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
                w = scipy.linalg.solve(Z, self._ones, assume_a="sym", check_finite=False)
            record = self._record_fallback(t, "ldl", Z, w, 0.0)
            warnings.warn(
                f"similarity matrix exp(-tD) is not positive definite at t={t:.6g}; magnitude "
                "computed with a symmetric indefinite (LDLᵀ) solve (error <= "
                f"{record['mag_error_bound']:.2g}). This happens for distances that are not of "
                "negative type, where magnitude may be non-monotone, negative or have poles, and "
                "for numerically singular Z at very small t.",
                MagnitudeWarning,
                stacklevel=5,
            )
            return w
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
            pass
        evals, evecs = np.linalg.eigh(Z)
        cutoff = np.abs(evals).max() * self.n * np.finfo(float).eps
        projections = evecs.T @ self._ones

        def pseudo_inverse(threshold):
            keep = np.abs(evals) > threshold
            return keep, evecs[:, keep] @ (projections[keep] / evals[keep])

        keep, w = pseudo_inverse(cutoff)
        # How much the value depends on where the cutoff is drawn: with a cutoff 10 times
        # higher, eigenvalues just above round-off are dropped as well.
        _, w_coarse = pseudo_inverse(10.0 * cutoff)
        record = self._record_fallback(t, "pinv", Z, w, abs(float(w.sum() - w_coarse.sum())))
        record["dropped_eigenvalues"] = int((~keep).sum())
        warnings.warn(
            f"similarity matrix exp(-tD) is singular at t={t:.6g} "
            f"({int((~keep).sum())} eigenvalue(s) below {cutoff:.3g}); magnitude computed with "
            "the pseudo-inverse, i.e. on the subspace where Z is invertible (error <= "
            f"{record['mag_error_bound']:.2g}).",
            MagnitudeWarning,
            stacklevel=5,
        )
        return w

    def _record_fallback(self, t: float, solver: str, Z, w, sensitivity: float) -> dict:
        """Append the record of a fallback solve to :attr:`fallbacks` and return it.

        ``relative_residual`` is ``‖1 − Z w‖ / ‖1‖``. The computed ``w`` solves ``Z w = 1 − r``
        exactly, so ``Mag(t) − 1ᵀw = w*ᵀ r`` with ``w* = Z⁻¹1``, and ``|w*ᵀ r| <= ‖w‖ ‖r‖`` to
        first order in ``r`` (``w* = w + Z⁻¹ r``): ``mag_error_bound`` is that term, plus, for
        the pseudo-inverse, ``sensitivity``: how much ``1ᵀw`` changes when the eigenvalue
        cutoff is raised tenfold (the singular part of ``Z`` has no exact value to compare
        with; the magnitude reported is that of the subspace where ``Z`` is invertible).
        """
        residual = self._ones - Z @ w
        rel_residual = float(np.linalg.norm(residual) / math.sqrt(self.n))
        bound = float(np.linalg.norm(w) * np.linalg.norm(residual)) + sensitivity
        record = {"t": float(t), "solver": solver, "relative_residual": rel_residual,
                  "mag_error_bound": bound}
        self.fallbacks.append(record)
        return record

    def _solve_cg(self, t: float):
        """Weighting and its float64 residual ``(w, 1 − Z_t w)`` by conjugate gradients within
        their budgets, or None (then Cholesky answers).

        From ``_FLOAT32_CG_FROM`` distinct points on, float32 iterations inside a float64
        refinement come first (:meth:`_solve_cg_mixed`); below that size, or at scales where
        float32 cannot resolve ``Z_t`` (small t), plain float64 CG (:meth:`_solve_cg_double`).
        A scale where neither converges marks the floor below which CG is not tried again.
        """
        if not self._use_cg or t <= self._cg_floor:
            return None
        solution = None
        if self.n >= _FLOAT32_CG_FROM and t > self._cg32_floor:
            solution = self._solve_cg_mixed(t)
            if solution is None:
                self._cg32_floor = max(self._cg32_floor, t)
        if solution is None:
            solution = self._solve_cg_double(t)
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
        Z32 = self._similarity(t, float32=True)  # both copies, in one pass if both are new
        Z = self._Z
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
        return w, residual

    def _solve_cg_double(self, t: float):
        """``(w, residual)`` by float64 conjugate gradients on ``Z_t`` itself, or None.

        Where float32 cannot resolve ``Z_t`` (at small t, cond(Z_t) ~ 1e5 for 1,000 clustered
        points: 6e-8 · 1e5 is no accuracy at all) float64 CG still converges, in 45 to 75
        iterations at 0.004 to 0.1 t_conv on clustered clouds of 1,000 points, i.e. at half the
        cost of a Cholesky factorisation; below ``_FLOAT32_CG_FROM`` points it is also the
        faster choice at every scale (the float32 copy of Z_t costs more than its cheaper
        products save over the 5 to 25 iterations a scale takes there). Abandoned when its
        budget (about one factorisation) is spent or its rate says it will be.
        """
        Z = self._similarity(t)
        w, residual = self._warm_start(Z, t)
        goal = _CG_RTOL * math.sqrt(self.n)
        x, r, iterations, estimate = _conjugate_gradients_from(
            Z, w, residual, goal, self._cg64_budget, energy_tol=self.atol)
        if x is None:
            return None
        residual = self._ones - _symmetric_product(Z, x)  # the true one, not the recursive one
        if self.atol > 0 and estimate <= 0.25 * self.atol:
            self.last_error = estimate
            return x, residual
        if not float(np.linalg.norm(residual)) <= 10.0 * goal:
            return None
        return x, residual

    def _warm_start(self, Z, t: float):
        """A first weighting at scale t and its residual: the polynomial in t through the
        solutions at the ``_WARM_START_SCALES`` scales nearest t (in log t), evaluated at t
        (Lagrange's form), of the highest degree whose coefficients sum to at most
        ``_WARM_START_GAIN`` in absolute value (else fewer scales; one: that solution), or zero
        without any solution. The Clenshaw–Curtis levels put most new scales between solved
        ones; against the straight line between the two neighbours (the former start), the
        cubic took 13 to 23% fewer CG iterations for a convergence scale + MagArea of clustered,
        uniform and cosine clouds of 1,000 to 2,000 points (378 against 326 at the benchmark's
        1,000 points)."""
        if not self._cg_solutions:
            return np.zeros(self.n), self._ones.copy()
        scales = np.fromiter(self._cg_solutions, dtype=float)
        nearest = scales[np.argsort(np.abs(np.log(scales / t)), kind="stable")]
        for count in range(min(_WARM_START_SCALES, nearest.size), 0, -1):
            coefficients = _lagrange_coefficients(nearest[:count], t)
            if np.abs(coefficients).sum() <= _WARM_START_GAIN:
                break
        w = np.zeros(self.n)
        for coefficient, s in zip(coefficients, nearest[:count], strict=True):
            w += coefficient * self._cg_solutions[float(s)]
        return w, self._ones - _symmetric_product(Z, w)

    def _fast_solution(self, t: float):
        """``(w, residual or None)`` by CG or the mixed-precision factorisation, or None where
        neither applies."""
        solution = self._solve_cg(t)
        if solution is None and self.precision == "mixed":
            w = self._solve_mixed(t)
            solution = None if w is None else (w, None)
        return solution

    def magnitude(self, t: float) -> float:
        """Mag(t) at one scale t > 0 (BLAS threads as set by the caller).

        From an iterative weighting ``w`` with residual ``r = 1 − Z w``, ``Mag = 1ᵀw + rᵀw``:
        that is ``2·1ᵀw − wᵀZw``, which differs from ``1ᵀZ⁻¹1`` by ``rᵀZ⁻¹r`` only (the error
        is quadratic in the residual, where ``1ᵀw`` alone errs by ``1ᵀZ⁻¹r``, linear in it)."""
        self.last_error = 0.0
        solution = self._fast_solution(t)
        if solution is not None:
            w, residual = solution
            return float(w.sum() + (0.0 if residual is None else residual @ w))
        L = self._factor(t)
        if L is None:
            return float(self._solve_fallback(t).sum())
        v, _ = lapack.dtrtrs(L, self._ones, lower=1)
        return float(v @ v)  # ‖L⁻¹1‖²: one triangular solve

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
        triangle in row blocks: the buffer's upper triangle if it holds exp(-tD) (conjugate
        gradients leave it intact), else its lower one if that does (see ``_factor``), else
        exponentials afresh; O(block · n) extra memory."""
        n = self.n
        # Short blocks: the diagonal block's triangle is cut out with a copy (np.tril/triu),
        # which cost as much as the rest of the product when the block was the whole matrix.
        rows = max(1, min(64, _BLOCK_ENTRIES // n))
        upper = self._Z_scale == t
        lower = not upper and self._Z_lower_scale == t
        total = 0.0
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            cols = slice(0, stop) if lower else slice(start, n)
            Db = self.D[start:stop, cols]
            if upper or lower:
                Mb = Db * self._Z[start:stop, cols]
            else:
                Mb = np.multiply(Db, -t)
                _exp_inplace(Mb)
                Mb *= Db
            # Of the diagonal block, only the strict lower (upper) triangle belongs to the sum.
            if lower:
                Mb[:, start:stop] = np.tril(Mb[:, start:stop], -1)
            else:
                Mb[:, :stop - start] = np.triu(Mb[:, :stop - start], 1)
            total += float(w[start:stop] @ (Mb @ w[cols]))
        return 2.0 * total

    def magnitude_and_derivative(self, t: float) -> tuple[float, float]:
        """Mag(t) and dMag/dt = wᵀ (D ∘ Z_t) w, with the weighting w (Mag as in
        :meth:`magnitude` where CG answered)."""
        solution = self._fast_solution(t)
        if solution is not None and solution[1] is not None:
            w, residual = solution
            mag = float(w.sum() + residual @ w)
        else:
            w = solution[0] if solution is not None else self.weights(t, keep_similarity=True)
            mag = float(w.sum())
        return mag, self.weighted_distance_form(t, w)


def _fill_similarity(D, t: float, Z, Z32, *, fill64: bool, full: bool, clamp: bool,
                     threads: int, quotient=None) -> None:
    """Upper triangles (C order; all of it if ``full``) of Z = exp(-tD) (if ``fill64``; else Z
    holds it already) and of its float32 copy Z32 (if given), and, with ``quotient`` =
    (A, out), of out = A / exp(-tD) (see ``_DenseSolver.expect_pairs``; in the same pass, while
    the block is in cache: 5 to 7 against 8 ms for both at n = 1,000 here).

    Row blocks of ``_BLOCK_ENTRIES`` go through every step while they are in cache, split among
    ``threads`` Python threads (NumPy releases the GIL in ufuncs): each full pass over a
    1,000-point matrix cost 0.3 to 0.7 ms here, about as much as a float32 matrix-vector product.

    Entries are kept >= exp(-345) = 1e-150 (``clamp``; not needed where t·max(D) <= 345), so
    that products of two of them, as formed by the factorisation, stay normal floats:
    subnormals make LAPACK orders of magnitude slower. Next to the diagonal 1 the change is nil
    (norm <= n·1e-150). In float32, entries below ``_FLOAT32_FLOOR`` = 1e-20 are set to zero
    for the same reason: their products with the entries of a CG vector would fall below
    float32's smallest normal number (1.2e-38); with a floor of 1e-37 instead, 1,000-point CG
    solves at large t ran 5 times slower than their iteration count predicts. The change is a
    perturbation of norm <= n·1e-20, far below float32's precision, and the float64 residuals
    of the refinement see the exact Z anyway.
    """
    n = D.shape[0]

    def worker():
        # Exponentials of a contiguous scratch block: NumPy's exp on the strided rows of the
        # upper trapezoid took twice as long (0.98 against 0.83 ms at n = 1,000).
        scratch = np.empty(_block_rows(n) * n) if fill64 else None

        def fill(block) -> None:
            if fill64:
                z = _contiguous_block(scratch, block, n)
                _exponentials(D[block], t, z, clamp=clamp)
                Z[block] = z
            else:
                z = Z[block]
            if Z32 is not None:
                np.multiply(z, z >= _FLOAT32_FLOOR, out=Z32[block], casting="unsafe")
            if quotient is not None:
                np.divide(quotient[0][block], z, out=quotient[1][block])
        return fill

    _row_blocks(n, full=full, threads=threads, worker=worker)


def _shift_similarity(D, delta: float, Z, *, threads: int) -> None:
    """Upper triangle (C order) of Z = exp(-sD) multiplied by exp(-δD), |δ|·max(D) <=
    ``_SHIFT_LIMIT``, through the Taylor polynomial of degree 4 of exp(x), x = -δD: its remainder
    |x|⁵/120 <= 7e-21 lies below round-off, and the product differs from exp(-(s + δ)D) by a
    few units in the last place of the exponential's own argument t·D (measured at n = 1,000:
    1.5e-14 relative at t·max(D) = 78, 7.2e-14 at 300, where that argument's units are 1.4e-14
    and 5.7e-14). Nine elementwise passes over each row block while it is in cache: 2.4 to 2.9
    against 5.6 to 5.8 ms for the exponentials at n = 1,000 here."""
    n = D.shape[0]

    def worker():
        scratch = np.empty((2, _block_rows(n) * n))

        def shift(block) -> None:
            x, p = (_contiguous_block(a, block, n) for a in scratch)
            np.multiply(D[block], -delta, out=x)
            np.multiply(x, 1.0 / 24.0, out=p)
            p += 1.0 / 6.0
            for coefficient in (0.5, 1.0, 1.0):  # Horner
                p *= x
                p += coefficient
            Z[block] *= p
        return shift

    _row_blocks(n, full=False, threads=threads, worker=worker)


def _contiguous_block(scratch: np.ndarray, block, n: int) -> np.ndarray:
    """The leading part of a flat ``scratch`` buffer (at least ``_block_rows(n) · n`` entries) as
    a C-contiguous array of the shape of the (n, n) matrix's row block ``block``."""
    height, width = block[0].stop - block[0].start, n - block[1].start
    return scratch[:height * width].reshape(height, width)


def _block_rows(n: int) -> int:
    # At least 8 blocks, else the upper trapezoids add up to much more than the triangle.
    return max(1, min(_BLOCK_ENTRIES // n, -(-n // 8)))


def _row_blocks(n: int, *, full: bool, threads: int, worker) -> None:
    """Elementwise work on an (n, n) matrix's upper triangle (C order; all of it if ``full``)
    in row blocks of about ``_BLOCK_ENTRIES``: each block is the rows' part from the first
    row's diagonal on (the upper triangle, plus a little of the lower one inside the diagonal
    block). ``worker()`` returns the function that takes a block (a pair of slices); it is
    called once per thread, so that it may own scratch memory. The triangle is split among
    ``threads`` Python threads (NumPy releases the GIL in ufuncs) in shares of equal entries."""
    rows = _block_rows(n)

    def run(first: int, last: int) -> None:
        work = worker()
        for start in range(first, last, rows):
            work((slice(start, min(start + rows, last)), slice(0 if full else start, None)))

    n_blocks = -(-n // rows)
    threads = min(threads, n_blocks)
    if threads <= 1:
        run(0, n)
        return
    # Equal shares of the triangle's entries, not of its rows: row i has n - i of them.
    bounds = [0]
    for k in range(1, threads):
        row = n * k / threads if full else n * (1.0 - math.sqrt(1.0 - k / threads))
        bounds.append(min(n, rows * round(row / rows)))
    bounds.append(n)
    list(_executor(os.getpid()).map(run, bounds[:-1], bounds[1:]))


def _pair_memory(n: int) -> int:
    """Bytes of the two extra buffers of MagArea's paired scales for n distinct points (see
    :meth:`_DenseSolver.expect_pairs`), 0 where they are not used."""
    need = 2 * 8 * n * n
    return need if n >= _PAIR_MIN_POINTS and need <= _PAIR_BUFFER_BYTES else 0


def _exponentials(D: np.ndarray, t: float, out: np.ndarray, *, clamp: bool) -> None:
    """out = exp(-tD) entry by entry, the exponent clamped at -``_EXPONENT_FLOOR`` if ``clamp``
    (see :func:`_fill_similarity`); the batch solvers form their matrices with it too, so that
    the same scale gives the same bits on every path."""
    np.multiply(D, -t, out=out)
    if clamp:
        np.maximum(out, -_EXPONENT_FLOOR, out=out)
    _exp_inplace(out)


def _exp_inplace(a: np.ndarray) -> None:
    """a = exp(a) entry by entry, by :data:`EXPONENTIAL`'s routine: every path that forms
    exp(-tD) goes through here, so that an entry's bits depend on its value only.

    NumPy vectorises its float64 exp for AVX-512 only: on an AVX2 machine every entry took
    glibc's scalar routine, 7 to 9 ns, against 1.4 to 2.2 ns through libmvec (``_vexp.c``); at
    1,000 points that was a quarter of a default convergence scale + MagArea."""
    if _vexp_inplace is None or a.dtype != np.float64:
        np.exp(a, out=a)
    elif a.flags.c_contiguous:
        _vexp_inplace(a)
    else:
        b = np.ascontiguousarray(a)
        _vexp_inplace(b)
        a[...] = b


@functools.cache
def _executor(pid: int) -> ThreadPoolExecutor:
    """One thread pool per process: a pool inherited through fork has no threads behind it."""
    return ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                              thread_name_prefix="diversity_core")


def _symmetric_product(A, x, out=None):
    """A x for a symmetric A of which only the upper triangle (C order) is valid: BLAS symv on
    the Fortran view ``A.T`` (lower triangle), in the dtype of ``A`` (float32 or float64)."""
    symv = blas.ssymv if A.dtype == np.float32 else blas.dsymv
    x = x.astype(A.dtype, copy=False)
    if out is None:
        return symv(1.0, A.T, x, lower=1)
    return symv(1.0, A.T, x, beta=0.0, y=out, lower=1, overwrite_y=1)


def _lagrange_coefficients(nodes: np.ndarray, t: float) -> np.ndarray:
    """c with Σ c_i f(nodes_i) = p(t) for the polynomial p through (nodes_i, f(nodes_i))
    (distinct nodes; a handful, so plain products)."""
    return np.array([math.prod((t - b) / (a - b) for b in nodes if b != a) for a in nodes])


def _conjugate_gradients_from(A, x, r, goal: float, budget: int, energy_tol: float = 0.0):
    """Conjugate gradients for ``A x = b`` from ``x`` with residual ``r = b − A x`` (float64, ``A``
    as for :func:`_symmetric_product`) until ``‖r‖ <= goal``, or, with ``energy_tol > 0``, until
    the error of the variational estimate ``2 bᵀx − xᵀAx`` is estimated below it.

    That error is ``‖x* − x‖²_A``, and CG lowers it by exactly ``α_k ‖r_k‖²`` at step k: the
    sum of the last ``_CG_DELAY`` decrements is what the error was ``_CG_DELAY`` steps ago minus
    what it is now (Hestenes and Stiefel; Strakoš and Tichý, ETNA 2002), an estimate that is
    reliable once convergence is steady; the loop stops when that sum is below a quarter of
    ``energy_tol`` (a safety factor against slow, linear convergence, where the remaining error
    is a few times the window's decrease).

    Returns ``(x, r, iterations, estimate)`` with ``estimate`` the last window's sum (0 when the
    residual goal ended the loop before any window), or ``(None, None, iterations, inf)`` when
    ``budget`` iterations do not do, or when the rate of the first ten (checked every ten, when
    no energy tolerance is given) says they will not."""
    x = x.copy()
    r = r.copy()
    p = r.copy()
    q = np.empty_like(r)
    rr = float(r @ r)
    start = math.sqrt(rr)
    stop = goal * goal
    decrements = collections.deque(maxlen=_CG_DELAY)
    for iteration in range(1, budget + 1):
        if rr <= stop:
            return x, r, iteration - 1, float(sum(decrements))
        q = _symmetric_product(A, p, out=q)
        alpha = rr / float(p @ q)
        x += alpha * p
        r -= alpha * q
        decrements.append(alpha * rr)
        if energy_tol > 0 and len(decrements) == _CG_DELAY \
                and sum(decrements) <= 0.25 * energy_tol:
            return x, r, iteration, float(sum(decrements))
        rr_next = float(r @ r)
        if iteration % 10 == 0:
            size = math.sqrt(rr_next)
            if not size < start:  # no progress (or NaN)
                break
            if not energy_tol > 0 and size > goal and \
                    iteration * math.log(goal / size) / math.log(size / start) > budget - iteration:
                break
        p *= rr_next / rr
        p += r
        rr = rr_next
    if rr <= stop:
        return x, r, budget, float(sum(decrements))
    return None, None, budget, math.inf


def _conjugate_gradients(A, b, rtol: float, maxiter: int):
    """Conjugate gradients for ``A x = b`` from ``x = 0``, in the dtype of ``A`` and ``b``
    (``A`` as for :func:`_symmetric_product`).

    Returns ``(x, iterations)``; ``x`` satisfies ``‖b - A x‖ <= rtol ‖b‖`` (by the recursively
    updated residual) unless ``maxiter`` iterations were spent first. Written out rather than
    ``scipy.sparse.linalg.cg``: SciPy's loop wraps every product in a LinearOperator and checks
    in float64, which cost about as much as a 1,000-point float32 matrix-vector product itself.
    """
    x = np.zeros_like(b)
    r = b.copy()
    p = b.copy()
    q = np.empty_like(b)
    rr = float(r @ r)
    stop = rtol * rtol * rr
    for iteration in range(1, maxiter + 1):
        q = _symmetric_product(A, p, out=q)
        alpha = rr / float(p @ q)
        x += alpha * p
        r -= alpha * q
        rr_next = float(r @ r)
        if rr_next <= stop:
            return x, iteration
        p *= rr_next / rr
        p += r
        rr = rr_next
    return x, maxiter
