"""The batch's solvers: Mag (and its derivatives) of many members of one size at their scales.

``_stacked_solve``: NumPy's stacked Cholesky for up to ``_STACKED_MAX_POINTS`` points (one C
call per chunk of matrices); ``_looped_values`` and ``_looped_slopes`` (also the second
derivative): member by member on one packed triangle through LAPACK without the GIL
(``_lapack``), MagArea's pairs of scales t, T - t formed from each other (``_complements``).
A group is any object with ``size``, ``D`` (stacked (G, m, m) for the stacked solver, a list of
(m, m) for the looped ones) and ``D_max`` (each member's largest distance, looped solvers
only): ``_batch._Group``.
"""

from __future__ import annotations

import numpy as np

from ._common import EXPONENT_FLOOR
from ._elementwise import _exp_inplace, _exponentials
from ._lapack import _gil_free_lapack, _scipy_lapack
from ._triangles import pair_sums

# Members of up to this many distinct points are solved by NumPy's stacked linear algebra (one
# call per chunk of matrices); above it, by SciPy's LAPACK wrappers one matrix at a time. At 10
# points a stacked Cholesky cost 0.4 µs per matrix and SciPy's dpotrf + dtrtrs 2.1 µs (call
# overhead); at 100 points the two were even, at 300 points SciPy's was 3 times faster.
_STACKED_MAX_POINTS = 64
# Similarity entries per stacked chunk: 8 MiB of float64, whatever the members' size.
_CHUNK_ENTRIES = 1 << 20


def _stacked_solve(group, rows, ts, *, order: int):
    """Mag of members ``rows`` of a group of small distance matrices (stacked) at scales ``ts``,
    with ``order`` − 1 derivatives (order 1 to 3; dMag/dt = wᵀ(D∘Z)w, d²Mag/dt² =
    2 vᵀZ⁻¹v − wᵀ(D²∘Z)w with v = (D∘Z)w), in chunks of ``_CHUNK_ENTRIES``; ``solved`` is
    False where a similarity matrix is not numerically positive definite (NumPy's Cholesky
    fails). Returns ``(values, derivatives or None, solved)``, ``derivatives`` of shape
    (order − 1, len(rows))."""
    D_all = group.D
    P, m = len(rows), D_all.shape[1]
    values = np.full(P, np.nan)
    derivatives = np.zeros((order - 1, P)) if order > 1 else None
    solved = np.ones(P, dtype=bool)
    chunk = max(1, _CHUNK_ENTRIES // (m * m))
    for start in range(0, P, chunk):
        part = slice(start, start + chunk)
        D = D_all[rows[part]]
        # exp(-tD) as the single-space fill forms it (exponent clamped at -345).
        Z = D * (-ts[part])[:, None, None]
        np.maximum(Z, -EXPONENT_FLOOR, out=Z)
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
        if not ok.any():
            continue
        sel = np.flatnonzero(ok) + start
        if not ok.all():
            D, Z = D[ok], Z[ok]
        w = np.linalg.solve(Z, np.ones((len(Z), m, 1)))[..., 0]
        values[sel] = w.sum(axis=1)
        if order > 1:
            DZ = D * Z
            derivatives[0, sel] = np.einsum("pi,pij,pj->p", w, DZ, w)
        if order > 2:
            v = np.einsum("pij,pj->pi", DZ, w)
            u = np.linalg.solve(Z, v[..., None])[..., 0]
            derivatives[1, sel] = 2.0 * np.einsum("pi,pi->p", v, u) \
                - np.einsum("pi,pij,pj->p", w, D * DZ, w)
    return values, derivatives, solved


def _group_pair_sums(group, rows, ts):
    """The first-order sums ``(S0, S1)`` (``_triangles.pair_sums``, bit for bit) of members ``rows``
    of a group at scales ``ts``: member by member for looped groups; stacked ones in chunks of
    ``_CHUNK_ENTRIES``, each member's exp(-tD) a contiguous (m, m) block with its strict upper
    triangle kept, summed as the single space sums its one block."""
    if group.size > _STACKED_MAX_POINTS:
        sums = np.array([pair_sums(group.D[r], t)
                         for r, t in zip(rows.tolist(), ts.tolist(), strict=True)])
        return sums[:, 0], sums[:, 1]
    m = group.size
    s0, s1 = np.empty(len(rows)), np.empty(len(rows))
    chunk = max(1, _CHUNK_ENTRIES // (m * m))
    for start in range(0, len(rows), chunk):
        part = slice(start, start + chunk)
        D = group.D[rows[part]]
        E = np.multiply(D, (-ts[part])[:, None, None])
        _exp_inplace(E)
        E = np.triu(E, 1)
        s0[part] = E.reshape(len(E), -1).sum(axis=1)
        E *= D
        s1[part] = E.reshape(len(E), -1).sum(axis=1)
    return 2.0 * s0, 2.0 * s1


def _looped_values(group, rows, ts, complement: float | None = None):
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
    where Z is well conditioned, and not where exp(-TD) meets its floor (``EXPONENT_FLOOR``),
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
            D, D_row = lapack_calls.trttf(group.D[r]), r
        if codes[p] == _PLAIN or complement * group.D_max[r] > EXPONENT_FLOOR:
            _exponentials(D, t, Z, clamp=t * group.D_max[r] > EXPONENT_FLOOR)
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



def _looped_slopes(group, rows, ts, *, order: int = 2):
    """Mag and dMag/dt (with ``order`` 3 also d²Mag/dt²) matrix by matrix, Z = exp(-tD) packed
    as in :func:`_looped_values`: ``w = L⁻ᵀ L⁻¹ 1`` (dpftrf, dtfsm), ``Mag = Σ w``,
    ``dMag/dt = wᵀ v`` with ``v = (D∘Z) w``, D∘Z formed packed and multiplied by w where it
    lies (``_lapack._packed_blocks``: two symmetric and two general BLAS products on the
    packed array's three blocks). The second derivative, ``2 ‖L⁻¹v‖² − wᵀ (D²∘Z) w``, takes
    one more triangular solve and one more such product. Against unpacking D∘Z to a full
    triangle (dtfttr) for NumPy's products, at 300 points on one thread here (200 cosine
    members at ten scales each, medians of four runs alternating): 0.74 against 0.89 ms a
    solve with the second derivative, 0.65 against 0.74 without; the results differ by
    round-off. Returns ``(values, derivatives, solved)`` as :func:`_stacked_solve`.
    """
    P, m = len(rows), group.size
    lapack_calls = _gil_free_lapack() or _scipy_lapack()
    values = np.full(P, np.nan)
    derivatives = np.zeros((order - 1, P))
    solved = np.ones(P, dtype=bool)
    packed = m * (m + 1) // 2
    Z, DZ = np.empty(packed), np.empty(packed)
    v, u = np.empty(m), np.empty(m)
    D_row = D = None
    for p in range(P):
        r, t = int(rows[p]), float(ts[p])
        if D_row != r:
            D, D_row = lapack_calls.trttf(group.D[r]), r
        _exponentials(D, t, Z, clamp=t * group.D_max[r] > EXPONENT_FLOOR)
        np.multiply(D, Z, out=DZ)
        if not lapack_calls.pftrf(Z, m):
            solved[p] = False
            continue
        w = lapack_calls.tfsm(Z, lapack_calls.tfsm(Z, np.ones(m), False), True)
        values[p] = w.sum()
        lapack_calls.sfmv(DZ, w, v)
        derivatives[0, p] = w @ v
        if order > 2:
            half = lapack_calls.tfsm(Z, v, False)
            np.multiply(D, DZ, out=DZ)
            derivatives[1, p] = 2.0 * (half @ half) - w @ lapack_calls.sfmv(DZ, w, u)
    return values, derivatives, solved


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

