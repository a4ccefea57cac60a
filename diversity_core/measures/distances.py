"""Pairwise distances between embeddings."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist, pdist, squareform

from .._threads import allowed_threads, map_threads, row_block_shares
from .._validation import check_embeddings, rescaled, unit_rows

__all__ = ["pairwise_distances", "METRICS", "ALGORITHMS"]

METRICS = ("euclidean", "cosine", "cityblock")
ALGORITHMS = ("exact", "gram")


def pairwise_distances(X, metric: str = "euclidean", *, Y=None,
                       algorithm: str = "exact") -> np.ndarray:
    """Distance matrix between the rows of ``X`` (and of ``Y`` if given).

    Parameters
    ----------
    X : array of shape (n_points, n_features)
    metric : {"euclidean", "cosine", "cityblock"}
        ``cosine`` is the cosine *distance* 1 - cos(x, y), in [0, 2]. It is not a metric (no
        triangle inequality), but its similarity matrix exp(-t D) is positive semi-definite
        (see :mod:`diversity_core.magnitude`), so magnitude is well defined for distinct
        directions. It does not depend on the length of the rows, at any finite scale (rows
        of 1e-300 or 1e300 included); values below its round-off (1e-12, more in over 1,000
        dimensions) are set to exactly 0: the same direction. A zero row raises
        ``ValueError``.
    Y : array of shape (m_points, n_features), optional
    algorithm : {"exact", "gram"}
        Euclidean distances of ``X`` with itself only. ``exact`` (default): every distance from
        the coordinate differences (SciPy's ``pdist``; ``cdist`` with ``Y`` or beyond 8,192
        points; from 2,048 points on, Euclidean and cityblock, cdist's row blocks over the
        allowed threads: the same bits). ``gram``: ``‖x‖² + ‖y‖² − 2⟨x, y⟩`` through one
        matrix product (BLAS), much faster in many dimensions (1,000 Inception features of
        dimension 2,048, say), exact up to a round-off of about 1e-7 relative to the squared
        norms; squared distances below 1e-12 of their scale are set to exactly 0, so that
        duplicates stay exact duplicates for magnitude's twin handling.

    Returns
    -------
    D : array of shape (n_points, n_points), or (n_points, m_points) if ``Y`` is given
        Exactly symmetric with a zero diagonal when ``Y`` is None. Euclidean and cityblock
        distances of data too large or small for float64 squares (beyond 2^±300) are computed
        on the data divided by a power of two and multiplied back (exact); distances beyond
        the float64 range raise ``ValueError``.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}.")
    if algorithm == "gram" and (metric != "euclidean" or Y is not None):
        raise ValueError("algorithm='gram' computes Euclidean distances of X with itself only.")
    X = check_embeddings(X, name="X")
    if Y is not None:
        Y = check_embeddings(Y, name="Y")
        if Y.shape[1] != X.shape[1]:
            raise ValueError(
                f"mismatched dimensions: X has {X.shape[1]} features, Y has {Y.shape[1]}."
            )
    if metric == "cosine":
        # Cosine distances do not depend on the length of each row: at extreme scales (1e200,
        # 1e-300) the rows are normalised safely first (see unit_rows).
        if Y is not None:
            D = cdist(_rows_by_powers_of_two(X, "X"), _rows_by_powers_of_two(Y, "Y"),
                      metric="cosine")
        else:
            D = _cosine_self_distances(X)
        D[D < _cosine_roundoff(X.shape[1])] = 0.0
        return D
    # Distances scale with the data: data too large or small for float64 squares are computed
    # divided by a power of two (exact) and multiplied back.
    (X, *rest), e = rescaled(X, *([] if Y is None else [Y]))
    threads = allowed_threads() if len(X) >= _THREADED_FROM_POINTS else 1
    if Y is not None:
        D = cdist(X, rest[0], metric=metric) if threads == 1 else _threaded_cdist(
            X, rest[0], metric, threads)
    elif algorithm == "gram":
        D = _euclidean_gram_distances(X)
    elif threads > 1:
        D = _threaded_self_distances(X, metric, threads)
    elif len(X) <= _CONDENSED_MAX_POINTS:
        # Each pair once (pdist), mirrored (squareform): exactly symmetric, with an exact zero
        # diagonal and exact zeros between duplicates, bit for bit cdist(X, X) (the same
        # arithmetic per pair; tests/magnitude/test_magnitude.py checks it) at half the work: 5.1
        # against 9.7 ms for 300 points in 384 dimensions, the model experiment's sets.
        D = squareform(pdist(X, metric=metric))
    else:
        # The condensed vector would add half a matrix of memory: cdist, which also evaluates
        # d(x_i, x_j) and d(x_j, x_i) by the same arithmetic.
        D = cdist(X, X, metric=metric)
    if e:
        with np.errstate(over="ignore"):
            D = np.ldexp(D, e)
        if not np.all(np.isfinite(D)):
            raise ValueError(
                f"the {metric} distances of X exceed the float64 range (1.8e308; the largest "
                f"coordinate is {np.ldexp(np.abs(X).max(), e):.3g}): rescale the data."
            )
    return D


# Exact self-distances of up to this many points go through SciPy's condensed form (see
# pairwise_distances): its vector of n(n - 1)/2 distances is 268 MB here.
_CONDENSED_MAX_POINTS = 8192
# Exact Euclidean and cityblock distances of this many points on are split over the allowed
# threads (SciPy's cdist releases the GIL): blocks of this many rows, each pair computed by
# cdist's own arithmetic, so the bits are pdist's and cdist's whatever the threads. Measured
# (2-core machine, idle): 10,000 points in 64 dimensions 4.9–5.0 s on one thread, 2.3–2.5 s on two
# (the NumPy engine's build at 10,000 points: 4.4 s of its 26 s on two cores, all of it on one
# before); below 2,048 points a set takes milliseconds and runs as before.
_THREADED_FROM_POINTS = 2048
_BLOCK_ROWS = 256


def _threaded_self_distances(X: np.ndarray, metric: str, threads: int) -> np.ndarray:
    """The exact self-distances of ``pairwise_distances`` in row blocks over ``threads``: each
    block's pairs with itself and every later row (cdist), its upper triangle mirrored, as
    squareform mirrors pdist (row blocks dealt round-robin). The blocks write disjoint parts of
    ``D``."""
    n = len(X)
    D = np.empty((n, n))

    def share(mine) -> None:
        for start in mine:
            stop = min(n, start + _BLOCK_ROWS)
            R = cdist(X[start:stop], X[start:], metric=metric)
            inside = np.triu(R[:, :stop - start], 1)
            D[start:stop, start:stop] = inside + inside.T
            D[start:stop, stop:] = R[:, stop - start:]
            D[stop:, start:stop] = R[:, stop - start:].T

    map_threads(share, row_block_shares(n, _BLOCK_ROWS, threads), threads)
    return D


def _threaded_cdist(X: np.ndarray, Y: np.ndarray, metric: str, threads: int) -> np.ndarray:
    """``cdist(X, Y)`` in row blocks of ``X`` over ``threads`` (the same bits)."""
    D = np.empty((len(X), len(Y)))

    def share(mine) -> None:
        for start in mine:
            D[start:start + _BLOCK_ROWS] = cdist(X[start:start + _BLOCK_ROWS], Y, metric=metric)

    map_threads(share, row_block_shares(len(X), _BLOCK_ROWS, threads), threads)
    return D


def _cosine_self_distances(X: np.ndarray, block: int = 2048) -> np.ndarray:
    """1 - <x̂_i, x̂_j> through BLAS (cdist's cosine is a scalar loop: 50 times slower for 20,000
    points in 384 dimensions), made exactly symmetric by mirroring the upper triangle block by
    block, with no full-size temporary (n = 20,000 is a 3.2 GB matrix)."""
    U = unit_rows(X, name="X", what="the cosine distance")
    n = len(U)
    D = np.empty((n, n))
    for start in range(0, n, block):
        rows = slice(start, start + block)
        np.matmul(U[rows], U[start:].T, out=D[rows, start:])
        np.subtract(1.0, D[rows, start:], out=D[rows, start:])
        D[start:, rows] = D[rows, start:].T
    np.clip(D, 0.0, 2.0, out=D)
    np.fill_diagonal(D, 0.0)
    return D


def _euclidean_gram_distances(X: np.ndarray) -> np.ndarray:
    """Euclidean distances through the Gram matrix: exactly symmetric, zero diagonal."""
    sq = np.einsum("ij,ij->i", X, X)
    scale = sq[:, None] + sq[None, :]
    D2 = scale - 2.0 * (X @ X.T)
    # Below the expansion's round-off, points are identical: an exact 0 (Fashion-MNIST holds a
    # few duplicate images, and magnitude merges exact duplicates only).
    D2[D2 <= 1e-12 * scale] = 0.0
    D = np.sqrt(D2, out=D2)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D


def _cosine_roundoff(n_features: int) -> float:
    """Cosine distances below this are round-off: the same direction, set to exactly 0.

    ``1 − ⟨x̂, ŷ⟩`` is computed with an absolute error of a few ``n_features · eps`` whatever
    the angle, so a distance of 1e-16 between two copies of a point means nothing; left as it
    is, magnitude would see two distinct points 1e-16 apart (and a convergence scale of 1e16).
    Below 1e-12 a cosine distance has lost at least three of its digits in any case."""
    return max(1e-12, 4 * n_features * np.finfo(np.float64).eps)


def _rows_by_powers_of_two(X: np.ndarray, name: str) -> np.ndarray:
    """Each row divided by a power of two (exact) so its largest entry lies in [0.5, 1): the
    cosine distances are unchanged, bit for bit, and their norms cannot overflow or underflow."""
    amax = np.abs(X).max(axis=1)
    if np.any(amax == 0):
        unit_rows(X, name=name, what="the cosine distance")  # raises, naming the zero rows
    return np.ldexp(X, -np.frexp(amax)[1][:, None])
