"""Batches of spaces: convergence scales, magnitude functions and MagAreas of many spaces at once.

The text-temperature experiment scores thousands of sets of 10 responses, the model-
distinguishing experiment hundreds of sets of 300 documents. One space at a time, Python's
overhead and one LAPACK call per scale dominate such small spaces. Here:

* members are validated together (one vectorised pass per size for spaces of up to
  ``_STACKED_MAX_POINTS`` points; larger ones one by one) and de-duplicated as
  :class:`~diversity_core.magnitude.MagnitudeSpace` does;
* members are grouped by their number of distinct points, and every evaluation the batch needs at
  a time (one scale per member during the convergence-scale search, one level of Chebyshev
  nodes shared by all members during the integral) is one stack of similarity matrices per
  group: exponentials of the whole stack at once, NumPy's stacked Cholesky factorisation and
  solve for up to ``_STACKED_MAX_POINTS`` points (one C call per chunk, no Python per member),
  and LAPACK member by member above that, through SciPy's Cython table without the GIL (3 times
  as fast per matrix as NumPy's stacked routines at 300 points: 0.30 against 0.95 ms), on one
  packed triangle (:func:`_looped_values`), MagArea's pairs of scales t, T - t formed from each
  other;
* members prepared once for a sequence of batch calls on the same matrices
  (:func:`_prepared_batch`);
* the convergence-scale searches advance together, each by the same safeguarded Newton steps as
  a single space (``_search._ScaleSearch``), and the Clenshaw–Curtis levels of the integral are
  the single space's (``_quadrature``), evaluated for all members sharing ``t_cut`` at once;
* members of ``_BATCH_MAX_POINTS`` distinct points or more take the single-space path unchanged
  (conjugate gradients pay off there), and so does any member whose similarity matrix is not
  numerically positive definite at some scale (the fallback solvers, their warning naming the
  member, and the record in that member's ``fallbacks``).

Results agree with the single-space functions to round-off (the tests check 1e-10 relative).
A member without a result (invalid input, a single distinct point for a convergence scale, a
search that does not converge) does not stop the others: see :class:`MagnitudeBatchError`.
"""

from __future__ import annotations

import ctypes
import functools
import os
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.linalg import lapack

from .._validation import check_scales
from ._quadrature import (
    _CC_LEVELS,
    INTEGRATION_METHODS,
    _cc_nodes,
    _cc_refine,
    _cc_rule,
    _integrate,
)
from ._search import _initial_scale, _no_convergence_scale, _ScaleSearch
from ._solver import (
    _CG_MIN_POINTS,
    _EXPONENT_FLOOR,
    MagnitudeWarning,
    _executor,
    _exp_inplace,
    _exponentials,
    _single_threaded_if,
    _threadpools,
)
from ._space import (
    _CACHE_BYTES,
    _DUPLICATE_RTOL,
    MagnitudeSpace,
    _content_key,
    _prepared_batches,
    _prepared_lock,
)

# Members of up to this many distinct points are solved by NumPy's stacked linear algebra (one
# call per chunk of matrices); above it, by SciPy's LAPACK wrappers one matrix at a time. At 10
# points a stacked Cholesky cost 0.4 µs per matrix and SciPy's dpotrf + dtrtrs 2.1 µs (call
# overhead); at 100 points the two were even, at 300 points SciPy's was 3 times faster.
_STACKED_MAX_POINTS = 64
# From this many distinct points on, a member takes the single-space path (conjugate gradients,
# see _solver), which is faster there than any stacking.
_BATCH_MAX_POINTS = _CG_MIN_POINTS
# Similarity entries per stacked chunk: 8 MiB of float64, whatever the members' size.
_CHUNK_ENTRIES = 1 << 20
# Work (matrices × size³) below which a batch evaluation stays on one thread.
_MIN_WORK = 1 << 22
ERRORS = ("raise", "nan")


class MagnitudeBatchError(ValueError):
    """Some members of a batch have no result; every other member has one.

    Attributes
    ----------
    values : array
        The batch's result, NaN where a member failed (shape as the function returns).
    failures : dict int -> str
        Index of each failed member -> why (the message the single-space function raises).
    """

    def __init__(self, values: np.ndarray, failures: dict[int, str]):
        self.values = values
        self.failures = dict(sorted(failures.items()))
        first, why = next(iter(self.failures.items()))
        more = len(self.failures) - 1
        super().__init__(f"member {first}: {why}"
                         + (f" (and {more} more failed member{'s' if more > 1 else ''})"
                            if more else ""))


class _Group:
    """The kernel members of one size: their distance matrices, stacked (G, m, m) for the
    stacked solver, a list for the looped one (which takes them one at a time: no copy)."""

    def __init__(self, size: int, members: list[int], matrices: list[np.ndarray]):
        self.size = size
        self.members = np.asarray(members, dtype=np.intp)
        self.D = np.stack(matrices) if size <= _STACKED_MAX_POINTS else matrices
        # For the looped solver, each member's largest distance (whether exp(-tD) needs its
        # floor), read once here rather than at every scale: a pass over the matrix was 6% of
        # a 300-point solve. (The stacked solver applies the floor to every chunk.)
        self.D_max = None if size <= _STACKED_MAX_POINTS else np.array(
            [float(D.max()) for D in matrices])

    def initial_scales(self) -> np.ndarray:
        """``_search._initial_scale`` of every member: the same minima and medians."""
        if self.size > _STACKED_MAX_POINTS:
            return np.array([_initial_scale(D) for D in self.D])
        off = self.D.copy()
        off[:, np.arange(self.size), np.arange(self.size)] = np.inf
        return 5.0 / np.median(off.min(axis=2), axis=1)


class _Batch:
    """The members of a batch, validated and de-duplicated, and how to evaluate them."""

    def __init__(self, spaces):
        if isinstance(spaces, MagnitudeSpace) or (isinstance(spaces, np.ndarray)
                                                   and spaces.ndim != 3):
            raise ValueError("spaces must be a sequence of distance matrices or MagnitudeSpaces "
                             "(or an array of shape (m, n, n)); got a single space: wrap it in "
                             "a list.")
        spaces = list(spaces)
        self.m = len(spaces)
        if self.m == 0:
            raise ValueError("an empty batch: no spaces.")
        self.failures: dict[int, str] = {}
        self.spaces: list[MagnitudeSpace | None] = [None] * self.m
        self.given = [isinstance(S, MagnitudeSpace) for S in spaces]
        self.D: list[np.ndarray | None] = [None] * self.m
        self.n_points = np.zeros(self.m, dtype=np.intp)
        self.n_unique = np.zeros(self.m, dtype=np.intp)
        self._prepare(spaces)
        self.ok = np.array([i not in self.failures for i in range(self.m)])
        # Kernel members by size; the rest (large ones) take the single-space path.
        by_size: dict[int, list[int]] = {}
        self.single = []
        for i in np.flatnonzero(self.ok):
            if self.n_unique[i] >= _BATCH_MAX_POINTS:
                self.single.append(int(i))
            else:
                by_size.setdefault(int(self.n_unique[i]), []).append(int(i))
        self.groups = [_Group(size, members, [self.D[i] for i in members])
                       for size, members in sorted(by_size.items())]
        self.group_of = np.full(self.m, -1, dtype=np.intp)
        self.row_of = np.full(self.m, -1, dtype=np.intp)
        for g, group in enumerate(self.groups):
            self.group_of[group.members] = g
            self.row_of[group.members] = np.arange(len(group.members))

    # -- preparation ------------------------------------------------------------------------
    def _prepare(self, spaces) -> None:
        small: dict[int, list[tuple[int, np.ndarray]]] = {}
        for i, S in enumerate(spaces):
            if isinstance(S, MagnitudeSpace):
                self._take(i, S)
                continue
            A = np.asarray(S)
            if (A.ndim == 2 and A.shape[0] == A.shape[1] and 0 < A.shape[0] <= _STACKED_MAX_POINTS
                    and A.dtype != object and np.issubdtype(A.dtype, np.number)
                    and not np.iscomplexobj(A)):
                small.setdefault(A.shape[0], []).append((i, A))
            else:
                self._construct(i, A)
        for n, items in small.items():
            self._prepare_small(n, items)

    def _take(self, i: int, space: MagnitudeSpace) -> None:
        self.spaces[i] = space
        self.D[i] = space.D
        self.n_points[i], self.n_unique[i] = space.n_points, space.n_unique

    def _construct(self, i: int, A) -> None:
        try:
            self._take(i, MagnitudeSpace(A))
        except ValueError as exc:
            self.failures[i] = str(exc)

    def _prepare_small(self, n: int, items) -> None:
        """The checks of ``check_distance_matrix`` and the duplicate search of MagnitudeSpace,
        vectorised over same-sized small matrices; members they flag go through the
        constructor itself (for its message, or to be de-duplicated)."""
        Ds = np.stack([A for _, A in items]).astype(np.float64, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):
            finite = np.isfinite(Ds).all(axis=(1, 2))
            D_max = np.where(finite, Ds.max(axis=(1, 2)), 0.0)
            scale = np.where(D_max > 0, D_max, 1.0)
            diag = np.abs(np.diagonal(Ds, axis1=1, axis2=2)).max(axis=1)
            asym = np.abs(Ds - Ds.transpose(0, 2, 1)).max(axis=(1, 2))
            valid = (finite & (Ds.min(axis=(1, 2)) >= 0) & (diag <= 1e-10 * scale)
                     & (asym <= 1e-10 * scale))
            close = Ds <= (_DUPLICATE_RTOL * D_max)[:, None, None]
        close[:, np.arange(n), np.arange(n)] = False
        plain = valid & ~close.any(axis=(1, 2))
        for k, (i, A) in enumerate(items):
            if plain[k]:
                self.D[i] = np.ascontiguousarray(Ds[k])
                self.n_points[i] = self.n_unique[i] = n
            else:
                self._construct(i, A)

    # -- evaluation -------------------------------------------------------------------------
    def space(self, i: int) -> MagnitudeSpace:
        """Member i as a prepared space (made from its de-duplicated matrix on first need)."""
        if self.spaces[i] is None:
            self.spaces[i] = MagnitudeSpace(self.D[i])
        return self.spaces[i]

    def evaluate(self, idx, ts, *, derivative: bool = False, complement: float | None = None):
        """Mag (and dMag/dt) of member ``idx[k]`` at scale ``ts[k] > 0``, arrays of len(idx).

        ``complement``: a scale T for which the scales of a member come in pairs t, T - t (the
        Chebyshev nodes of [0, T]), which the looped solver forms from each other (see
        :func:`_looped_values`). Members of the single-space path are evaluated in the order
        given."""
        idx = np.asarray(idx, dtype=np.intp)
        ts = np.asarray(ts, dtype=np.float64)
        mag = np.empty(len(idx))
        dmag = np.empty(len(idx)) if derivative else None
        kernel = self.group_of[idx] >= 0
        for g in np.unique(self.group_of[idx[kernel]]):
            sel = np.flatnonzero(self.group_of[idx] == g)
            values, slopes, solved = self._evaluate_group(self.groups[g], self.row_of[idx[sel]],
                                                          ts[sel], derivative, complement)
            mag[sel] = values
            if derivative:
                dmag[sel] = slopes
            for k in sel[~solved]:  # not positive definite: the member's own fallback solvers
                mag[k], d = self._evaluate_single(int(idx[k]), float(ts[k]), derivative)
                if derivative:
                    dmag[k] = d
        for k in np.flatnonzero(~kernel):
            mag[k], d = self._evaluate_single(int(idx[k]), float(ts[k]), derivative)
            if derivative:
                dmag[k] = d
        for k, i in enumerate(idx):  # what the caller's own spaces evaluated, they remember
            if self.given[i]:
                self.spaces[i]._cache.setdefault(float(ts[k]), float(mag[k]))
        return mag, dmag

    def _evaluate_single(self, i: int, t: float, derivative: bool):
        space = self.space(i)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = (space.magnitude_and_derivative(t) if derivative
                      else (space.magnitude(t), None))
        for w in caught:  # the member's warnings, naming the member
            warnings.warn_explicit(f"member {i}: {w.message}", w.category, w.filename, w.lineno)
        return result

    def _evaluate_group(self, group: _Group, rows, ts, derivative: bool, complement):
        """Mag (dMag/dt) of the group's members ``rows`` at ``ts``, and which were solved."""
        if group.size <= _STACKED_MAX_POINTS:
            solve = functools.partial(_stacked_solve, derivative=derivative)
        elif derivative:
            solve = _looped_slopes
        else:
            solve = functools.partial(_looped_values, complement=complement)
        # Contiguous shares of the work on the allowed threads: NumPy's stacked routines and
        # ufuncs release the GIL, and so do the ctypes calls of the looped solvers. A share ends
        # where a member's run of scales does (its pairs of scales stay together).
        threads = min(_thread_count(), max(1, len(rows) * group.size**3 // _MIN_WORK))
        bounds = np.linspace(0, len(rows), threads + 1).astype(int)
        for k in range(1, threads):
            while 0 < bounds[k] < len(rows) and rows[bounds[k]] == rows[bounds[k] - 1]:
                bounds[k] += 1
        parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
        with _single_threaded_if(True):  # small matrices: one BLAS thread each is fastest
            if len(parts) == 1:
                results = [solve(group, rows, ts)]
            else:
                results = list(_executor(os.getpid()).map(
                    lambda part: solve(group, rows[part], ts[part]), parts))
        values = np.concatenate([r[0] for r in results])
        slopes = np.concatenate([r[1] for r in results]) if derivative else None
        solved = np.concatenate([r[2] for r in results])
        return values, slopes, solved


def _prepared_batch(spaces) -> _Batch:
    """The :class:`_Batch` of ``spaces``: the last one prepared if it had the same inputs.

    The reference-free protocol calls ``convergence_scales`` and then ``mag_areas`` on the same
    matrices; preparing them (checks, duplicates, groups) cost 0.08 to 0.1 s of about 3 for 200
    members of 300 points. A batch is reused for the same arrays (the same memory) with the same
    contents: XXH3 digests, as the cache of single spaces keeps them (7 ms for those 200
    members), so a matrix changed in place in between is prepared afresh. Only plain float64
    matrices, up to ``_CACHE_BYTES`` in all, and one batch at a time.
    """
    if isinstance(spaces, MagnitudeSpace) or (isinstance(spaces, np.ndarray)
                                               and spaces.ndim != 3):
        return _Batch(spaces)  # which says why not
    inputs = list(spaces)
    if not inputs or sum(getattr(S, "nbytes", 0) for S in inputs) > _CACHE_BYTES or not all(
            type(S) is np.ndarray and S.ndim == 2 and S.dtype == np.float64 for S in inputs):
        return _Batch(inputs)
    key = tuple((S.__array_interface__["data"][0], S.strides, _content_key(S)) for S in inputs)
    with _prepared_lock:
        batch = _prepared_batches.get(key)
    if batch is None:
        batch = _Batch(inputs)
        with _prepared_lock:
            _prepared_batches.clear()
            _prepared_batches[key] = batch
    return batch


def _thread_count() -> int:
    """Threads a batch may use: as many as BLAS is allowed (a Snakemake job's ``threads``, an
    OMP_NUM_THREADS), which the caller's limits set."""
    return max((c.num_threads for c in _threadpools().select(user_api="blas").lib_controllers),
               default=1)


def _stacked_solve(group: _Group, rows, ts, *, derivative: bool):
    """Mag (and wᵀ(D∘Z)w) of members ``rows`` of a group of small distance matrices (stacked)
    at scales ``ts``, in chunks of ``_CHUNK_ENTRIES``; ``solved`` is False where a similarity
    matrix is not numerically positive definite (NumPy's Cholesky fails)."""
    D_all = group.D
    P, m = len(rows), D_all.shape[1]
    values = np.full(P, np.nan)
    slopes = np.zeros(P) if derivative else None
    solved = np.ones(P, dtype=bool)
    chunk = max(1, _CHUNK_ENTRIES // (m * m))
    for start in range(0, P, chunk):
        part = slice(start, start + chunk)
        D = D_all[rows[part]]
        # exp(-tD) as the single-space fill forms it (exponent clamped at -345).
        Z = D * (-ts[part])[:, None, None]
        np.maximum(Z, -_EXPONENT_FLOOR, out=Z)
        _exp_inplace(Z)
        ok = np.ones(len(Z), dtype=bool)
        try:
            np.linalg.cholesky(Z)
        except np.linalg.LinAlgError:  # which ones? (the stacked call does not say)
            for p in range(len(Z)):
                try:
                    np.linalg.cholesky(Z[p])
                except np.linalg.LinAlgError:
                    ok[p] = False
        solved[part] = ok
        if ok.all():
            w = np.linalg.solve(Z, np.ones((len(Z), m, 1)))[..., 0]
            values[part] = w.sum(axis=1)
            if derivative:
                slopes[part] = np.einsum("pi,pij,pj->p", w, D * Z, w)
        elif ok.any():
            w = np.linalg.solve(Z[ok], np.ones((int(ok.sum()), m, 1)))[..., 0]
            values[part][ok] = w.sum(axis=1)
            if derivative:
                slopes[part][ok] = np.einsum("pi,pij,pj->p", w, D[ok] * Z[ok], w)
    return values, slopes, solved


def _looped_values(group: _Group, rows, ts, complement: float | None = None):
    """As :func:`_stacked_solve` without the derivative, matrix by matrix: ``Mag = ‖L⁻¹1‖²``
    with the Cholesky factor L of Z = exp(-tD) in rectangular full packed format (LAPACK's
    dpftrf and dtfsm), the n(n + 1)/2 entries of one triangle in one contiguous array.

    Why packed: exponentials are much of a solve's cost where NumPy's float64 exp is scalar
    (without AVX-512: 6 to 8 ns an entry here, against 0.4 ms for the factorisation of 300
    points), and the packed triangle is formed by one product and one exp over exactly half the
    entries, in a buffer that stays in cache for its factorisation. A solve is six calls that
    release the GIL instead of thirty (the row blocks of a full-storage triangle), which is what
    two threads contend on: at 300 points, 0.55 against 0.73 ms a matrix on two threads here
    (dpftrf itself took 0.36 against dpotrf's 0.41 ms). The results differ from full storage's
    by round-off (at most 7e-16 relative in the magnitudes of 300-point cosine sets).

    ``complement`` T: the scales of a member come in pairs t, T - t about T/2 (MagArea's
    Chebyshev nodes of [0, T]). Then exp(-(T - t)D) = exp(-TD) / exp(-tD), one division an entry
    instead of an exponential, and exp(-TD/2) = sqrt(exp(-TD)). Those entries are off the
    exponential's by a few units in the last place; only scales of T/2 and above are formed so,
    where Z is well conditioned, and not where exp(-TD) meets its floor (``_EXPONENT_FLOOR``),
    which would break the identity.
    """
    P, m = len(rows), group.size
    lapack_calls = _gil_free_lapack() or _scipy_lapack()
    values = np.full(P, np.nan)
    solved = np.ones(P, dtype=bool)
    done = np.zeros(P, dtype=bool)
    codes = (_complements(rows, ts, complement) if complement is not None
             else np.full(P, _PLAIN, dtype=np.intp))
    packed = m * (m + 1) // 2
    Z, Z_pair = np.empty(packed), np.empty(packed)
    Z_T = Z_T_row = D_row = D = None

    def solve(p: int, Z: np.ndarray) -> None:  # Z is overwritten by its factor
        done[p] = True
        if not lapack_calls.pftrf(Z, m):
            solved[p] = False
            return
        v = lapack_calls.tfsm(Z, np.ones(m), False)
        values[p] = v @ v

    for p in range(P):
        if done[p]:  # as the partner of an earlier scale
            continue
        r, t = int(rows[p]), float(ts[p])
        if D_row != r:
            D, D_row = _packed(group.D[r]), r
        if codes[p] == _PLAIN or complement * group.D_max[r] > _EXPONENT_FLOOR:
            _exponentials(D, t, Z, clamp=t * group.D_max[r] > _EXPONENT_FLOOR)
            solve(p, Z)
            continue
        if Z_T_row != r:
            Z_T = np.empty(packed) if Z_T is None else Z_T
            _exponentials(D, complement, Z_T, clamp=False)
            Z_T_row = r
        q = codes[p]
        if q == _WHOLE:
            np.copyto(Z_pair, Z_T)
            solve(p, Z_pair)
        elif q == _HALF:
            np.sqrt(Z_T, out=Z_pair)
            solve(p, Z_pair)
        else:  # the smaller of t, T - t by exponentials, the larger by division
            low, high = (p, q) if t < ts[q] else (q, p)
            _exponentials(D, float(ts[low]), Z, clamp=False)
            np.divide(Z_T, Z, out=Z_pair)
            solve(low, Z)
            solve(high, Z_pair)
    return values, None, solved


def _packed(D: np.ndarray) -> np.ndarray:
    """The upper triangle (C order) of D in rectangular full packed format: LAPACK's "L"
    triangle of the Fortran view, with TRANSR = "N"."""
    packed, info = lapack.dtrttf(D.T, transr="N", uplo="L")
    if info != 0:
        raise RuntimeError(f"LAPACK dtrttf failed (info={info}).")
    return packed


def _looped_slopes(group: _Group, rows, ts):
    """Mag and dMag/dt matrix by matrix, Z = exp(-tD) packed as in :func:`_looped_values`:
    ``w = L⁻ᵀ L⁻¹ 1`` (dpftrf, dtfsm), ``Mag = Σ w``, ``dMag/dt = wᵀ (D∘Z) w`` with D∘Z formed
    packed and unpacked to one triangle (dtfttr): ``wᵀ A w = 2 wᵀ U w − Σ A_ii w_i²`` for the
    upper triangle U of a symmetric A. Against full storage (exponentials of both triangles,
    dpotrf, dtrtrs): 0.75 against 0.86 ms a solve at 300 points on two threads here (medians of
    10 alternating runs of 200 members); the results differ by round-off.
    """
    P, m = len(rows), group.size
    lapack_calls = _gil_free_lapack() or _scipy_lapack()
    values = np.full(P, np.nan)
    slopes = np.zeros(P)
    solved = np.ones(P, dtype=bool)
    packed = m * (m + 1) // 2
    Z, DZ = np.empty(packed), np.empty(packed)
    DZ_upper = np.zeros((m, m))  # unpacked D∘Z: its strict lower triangle stays 0
    D_row = D = None
    for p in range(P):
        r, t = int(rows[p]), float(ts[p])
        if D_row != r:
            D, D_row = _packed(group.D[r]), r
        _exponentials(D, t, Z, clamp=t * group.D_max[r] > _EXPONENT_FLOOR)
        np.multiply(D, Z, out=DZ)
        if not lapack_calls.pftrf(Z, m):
            solved[p] = False
            continue
        w = lapack_calls.tfsm(Z, lapack_calls.tfsm(Z, np.ones(m), False), True)
        values[p] = w.sum()
        lapack_calls.tfttr(DZ, DZ_upper)
        slopes[p] = 2.0 * (w @ (DZ_upper @ w)) - np.diagonal(DZ_upper) @ (w * w)
    return values, slopes, solved


# Codes of _complements besides a partner's index.
_PLAIN, _WHOLE, _HALF = -1, -2, -3


def _complements(rows, ts, T: float) -> np.ndarray:
    """For each scale, the index of the same member's scale T - t (the two within a few units in
    the last place of T), or ``_WHOLE`` where t = T, ``_HALF`` where t = T/2, ``_PLAIN`` else."""
    codes = np.full(len(ts), _PLAIN, dtype=np.intp)
    tol = 8 * np.spacing(T)
    by_row: dict[int, list[int]] = {}
    for p, r in enumerate(rows.tolist()):
        by_row.setdefault(r, []).append(p)
    for items in by_row.values():
        items.sort(key=lambda p: ts[p])
        lo, hi = 0, len(items) - 1
        while lo < hi:  # the smallest and largest left: a pair, or one of them has none
            a, b = items[lo], items[hi]
            gap = ts[a] + ts[b] - T
            if abs(gap) <= tol:
                codes[a], codes[b] = b, a
                lo, hi = lo + 1, hi - 1
            elif gap < 0:
                lo += 1
            else:
                hi -= 1
        for p in items:
            if codes[p] == _PLAIN and ts[p] == T:
                codes[p] = _WHOLE
            elif codes[p] == _PLAIN and abs(2 * ts[p] - T) <= tol:
                codes[p] = _HALF
    return codes


class _LapackCalls(NamedTuple):
    """The LAPACK routines of the looped solvers, on a C-ordered buffer (see their callers)."""

    pftrf: Callable  # pftrf(Z, n) -> bool: Cholesky in place, packed (see _packed)
    tfsm: Callable  # tfsm(L, b, transpose) -> x: L x = b (Lᵀ x = b), L packed; b overwritten
    tfttr: Callable  # tfttr(Z, out): packed Z -> the upper triangle (C order) of out


def _scipy_lapack() -> _LapackCalls:
    """The routines through SciPy's wrappers (which hold the GIL)."""

    def pftrf(Z, n):
        _, info = lapack.dpftrf(n, Z, transr="N", uplo="L", overwrite_a=1)
        return info == 0

    def tfsm(L, b, transpose):
        return lapack.dtfsm(1.0, L, b[:, None], transr="N", side="L", uplo="L",
                            trans="T" if transpose else "N", diag="N", overwrite_b=1)[:, 0]

    def tfttr(Z, out):
        full, _ = lapack.dtfttr(len(out), Z, transr="N", uplo="L")
        out[...] = np.triu(full.T)

    return _LapackCalls(pftrf, tfsm, tfttr)


@functools.cache
def _gil_free_lapack() -> _LapackCalls | None:
    """The routines of SciPy's own LAPACK called through ctypes, or None.

    SciPy's Python wrappers hold the GIL (two threads factorising 300-point matrices took as
    long as one); ctypes releases it. The functions come from SciPy's Cython LAPACK table
    (``scipy.linalg.cython_lapack``, the interface SciPy documents for compiled callers): the
    same library and routines as the wrappers, so the results are bit for bit theirs, and
    200 factorisations of 300 points took 32 to 39 ms on two threads against 62 ms on one. If
    that table cannot be read, the wrappers are used on one thread.
    """
    try:
        from scipy.linalg import cython_lapack

        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

        def function(name, *argtypes):
            capsule = cython_lapack.__pyx_capi__[name]
            pointer = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
            return ctypes.CFUNCTYPE(None, *argtypes)(pointer)

        int_p, char_p, ptr = ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_void_p
        dpftrf = function("dpftrf", char_p, char_p, int_p, ptr, int_p)
        dtfsm = function("dtfsm", char_p, char_p, char_p, char_p, char_p, int_p, int_p,
                         ctypes.POINTER(ctypes.c_double), ptr, ptr, int_p)
        dtfttr = function("dtfttr", char_p, char_p, int_p, ptr, ptr, int_p, int_p)
    except Exception:  # noqa: BLE001 - any failure: fall back to the wrappers
        return None
    one, unit = ctypes.c_int(1), ctypes.c_double(1.0)

    def pftrf(Z, n):
        n, info = ctypes.c_int(n), ctypes.c_int(0)
        dpftrf(b"N", b"L", ctypes.byref(n), Z.ctypes.data, ctypes.byref(info))
        return info.value == 0

    def tfsm(L, b, transpose):
        n = ctypes.c_int(len(b))
        dtfsm(b"N", b"L", b"L", b"T" if transpose else b"N", b"N", ctypes.byref(n),
              ctypes.byref(one), ctypes.byref(unit), L.ctypes.data, b.ctypes.data,
              ctypes.byref(n))
        return b

    def tfttr(Z, out):
        n, info = ctypes.c_int(len(out)), ctypes.c_int(0)
        dtfttr(b"N", b"L", ctypes.byref(n), Z.ctypes.data, out.ctypes.data, ctypes.byref(n),
               ctypes.byref(info))

    return _LapackCalls(pftrf, tfsm, tfttr)


# ----------------------------------------------------------------------------------------------
# The batch functions
# ----------------------------------------------------------------------------------------------


def _finish(values: np.ndarray, failures: dict[int, str], errors: str) -> np.ndarray:
    if failures:
        if errors == "raise":
            raise MagnitudeBatchError(values, failures)
        warnings.warn(f"{len(failures)} member(s) of the batch have no result (NaN): "
                      + "; ".join(f"member {i}: {why}" for i, why in sorted(failures.items())),
                      MagnitudeWarning, stacklevel=3)
    return values


def _check_errors(errors: str) -> None:
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {ERRORS}; got {errors!r}.")


def convergence_scales(spaces, target: float, *, rtol: float, max_iter: int = 100,
                       errors: str = "raise") -> np.ndarray:
    """Batch version of :func:`~diversity_core.magnitude.convergence_scale` (see
    :mod:`diversity_core.magnitude.api` for the documented signature)."""
    _check_errors(errors)
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must lie in (0, 1); got {target}.")
    batch = _prepared_batch(spaces)
    failures = dict(batch.failures)
    out = np.full(batch.m, np.nan)
    searches: dict[int, _ScaleSearch] = {}
    for group in batch.groups:
        if group.size == 1:
            for i in group.members:
                failures[int(i)] = _no_convergence_scale(int(batch.n_points[i]))
            continue
        for i, t in zip(group.members, group.initial_scales(), strict=True):
            n = int(batch.n_unique[i])
            searches[int(i)] = _ScaleSearch(n, target * n, t, rtol=rtol, max_iter=max_iter)
    for i in batch.single:
        n = int(batch.n_unique[i])
        searches[i] = _ScaleSearch(n, target * n, _initial_scale(batch.D[i]), rtol=rtol,
                                   max_iter=max_iter)
    while searches:
        idx = np.fromiter(searches, dtype=np.intp, count=len(searches))
        mag, dmag = batch.evaluate(idx, [searches[i].t for i in idx], derivative=True)
        for k, i in enumerate(idx.tolist()):
            try:
                result = searches[i].step(float(mag[k]), float(dmag[k]))
            except RuntimeError as exc:
                failures[i] = str(exc)
                del searches[i]
                continue
            if result is not None:
                out[i] = result
                del searches[i]
    return _finish(out, failures, errors)


def magnitude_functions(spaces, ts, *, errors: str = "raise") -> np.ndarray:
    """Batch version of :func:`~diversity_core.magnitude.magnitude_function`."""
    _check_errors(errors)
    ts = check_scales(ts)
    batch = _prepared_batch(spaces)
    out = np.full((batch.m, len(ts)), np.nan)
    members = np.flatnonzero(batch.ok)
    out[members] = 1.0  # Mag(0) := 1
    positive = np.unique(ts[ts > 0])[::-1]  # largest first, as a single space sweeps them
    if members.size and positive.size:
        idx = np.repeat(members, positive.size)
        scales = np.tile(positive, members.size)
        mag, _ = batch.evaluate(idx, scales)
        column = {t: k for k, t in enumerate(positive.tolist())}
        table = mag.reshape(members.size, positive.size)
        for j, t in enumerate(ts.tolist()):
            if t > 0:
                out[members, j] = table[:, column[t]]
    return _finish(out, dict(batch.failures), errors)


def mag_areas(spaces, t_cut, *, method: str, rtol: float, n_ts: int,
              errors: str = "raise") -> np.ndarray:
    """Batch version of :func:`~diversity_core.magnitude.mag_area`."""
    _check_errors(errors)
    if method not in INTEGRATION_METHODS:
        raise ValueError(f"method must be one of {INTEGRATION_METHODS}; got {method!r}.")
    batch = _prepared_batch(spaces)
    t_cuts = np.broadcast_to(check_scales(t_cut, name="t_cut"), (batch.m,)) \
        if np.ndim(t_cut) == 0 else check_scales(t_cut, name="t_cut")
    if t_cuts.shape != (batch.m,):
        raise ValueError(f"t_cut must be one scale or one per space ({batch.m}); got "
                         f"{t_cuts.shape[0]}.")
    failures = dict(batch.failures)
    out = np.full(batch.m, np.nan)
    members = np.flatnonzero(batch.ok)
    if method == "chebyshev" and not rtol > 0:
        raise ValueError(f"rtol must be positive; got {rtol}.")
    single = np.zeros(batch.m, dtype=bool)
    single[batch.single] = True
    for i in members[single[members]]:  # large members: their own single-space integral
        out[i] = batch.space(int(i))._integrate(float(t_cuts[i]), method=method, rtol=rtol,
                                                n_ts=n_ts)
    members = members[~single[members]]
    for T in np.unique(t_cuts[members]):
        group = members[t_cuts[members] == T]
        if T == 0.0:
            out[group] = 0.0
        elif method == "chebyshev":
            out[group] = _chebyshev_areas(batch, group, float(T), rtol)
        elif method == "trapezoid":
            if n_ts < 2:
                raise ValueError(f"the trapezoid rule needs n_ts >= 2 scales; got {n_ts}.")
            ts = np.linspace(0.0, float(T), n_ts)
            values = np.ones((len(group), n_ts))
            idx = np.repeat(group, n_ts - 1)
            scales = np.tile(ts[1:][::-1], len(group))
            values[:, 1:] = batch.evaluate(idx, scales)[0].reshape(len(group), -1)[:, ::-1]
            out[group] = np.trapezoid(values, ts, axis=1)
        else:
            for i in group:
                out[i] = _integrate(lambda t, i=i: _one(batch, i, t), float(T), method=method,
                                    rtol=rtol, n_ts=n_ts)
    return _finish(out, failures, errors)


def _one(batch: _Batch, i: int, t: float) -> float:
    return 1.0 if t == 0.0 else float(batch.evaluate([i], [t])[0][0])


def _chebyshev_areas(batch: _Batch, members: np.ndarray, t_cut: float, rtol: float):
    """The single-space Clenshaw–Curtis integral (``_integrate_chebyshev``) of many members on
    one [0, t_cut]: the first panel's nested levels evaluated for all unfinished members at
    once (the same nodes), then bisection member by member where a panel is not enough."""
    finest = _CC_LEVELS[-1]
    values = np.full((len(members), finest + 1), np.nan)
    values[:, 0] = 1.0  # Mag(0)
    for k, i in enumerate(members):  # scales a member's own space has evaluated already
        if batch.given[i] and t_cut in batch.spaces[i]._cache:
            values[k, finest] = batch.spaces[i]._cache[t_cut]
    estimate = np.full(len(members), np.nan)
    error = np.full(len(members), np.nan)
    active = np.arange(len(members))
    for n in _CC_LEVELS:
        stride = finest // n
        ts = _cc_nodes(0.0, t_cut, n)
        # New scales from the largest down, member by member, as _cc_panel takes them.
        pairs = [(k, j) for k in active for j in range(n, -1, -1)
                 if np.isnan(values[k, j * stride])]
        if pairs:
            rows, nodes = np.array(pairs).T
            values[rows, nodes * stride] = batch.evaluate(members[rows], ts[nodes],
                                                          complement=t_cut)[0]
        est, err = _cc_rule(values[np.ix_(active, np.arange(n + 1) * stride)], 0.0, t_cut)
        estimate[active], error[active] = est, err
        active = active[~(err <= rtol * np.abs(est))]
        if not active.size:
            break
    areas = estimate.copy()
    for k in active:  # bisection, as for a single space
        i = int(members[k])
        areas[k] = _cc_refine(lambda t, i=i: _one(batch, i, t), t_cut, float(estimate[k]), rtol)
    return areas
