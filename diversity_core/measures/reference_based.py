"""Reference-based metrics: precision, recall, density, coverage (PRDC) and MMD.

``real`` / ``Y`` is the reference set, ``fake`` / ``X`` the set being evaluated; both have shape
(n_points, n_features) in the same space. Distances are Euclidean and computed block by block, so
memory stays ``O(block · n)`` instead of ``O(n²)``: PRDC on 10,000 x 10,000 points of dimension
2048 peaks well under 2 GB (``benchmarks/bench_prdc.py``).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._validation import check_finite_result, check_pair, rescaled

__all__ = ["prdc", "mmd_rbf", "mmd_linear", "GGM_SIGMA_MULTIPLIERS"]

# Bandwidth multipliers of GGM-metrics (Thompson et al. 2022); sigma = multiplier * sqrt(mean
# squared distance between the two sets).
GGM_SIGMA_MULTIPLIERS = (0.01, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

# Distance values held at once per block (block_rows x n_columns float64, about 64 MB).
_BLOCK_VALUES = 8_000_000


def _block_rows(n_columns: int, block_size: int | None) -> int:
    if block_size is None:
        return max(1, _BLOCK_VALUES // max(n_columns, 1))
    if not isinstance(block_size, numbers.Integral) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer; got {block_size!r}.")
    return int(block_size)


def _sq_distance_blocks(A: np.ndarray, B: np.ndarray, block: int, *, same: bool = False):
    """Yield ``(start, stop, D2)``: squared Euclidean distances of rows start:stop of A to all of B.

    ``‖a‖² + ‖b‖² − 2 a·b`` (one matrix product per block), clipped at 0. With ``same=True``
    (B is A) the self-distances are set to exactly 0.
    """
    sq_a = np.einsum("ij,ij->i", A, A)
    sq_b = sq_a if same else np.einsum("ij,ij->i", B, B)
    for start in range(0, A.shape[0], block):
        stop = min(A.shape[0], start + block)
        D2 = A[start:stop] @ B.T
        D2 *= -2.0
        D2 += sq_a[start:stop, None]
        D2 += sq_b[None, :]
        np.maximum(D2, 0.0, out=D2)
        if same:
            rows = np.arange(stop - start)
            D2[rows, start + rows] = 0.0
        yield start, stop, D2


class _Space:
    """One point set prepared for fast, reliable squared-distance decisions.

    ``A`` is the float64 data as given; direct recomputations use it, so exact ties stay exact.
    The matrix products use ``(A − center) · scale`` (``scale`` a power of two, so that the largest
    coordinate is about 1 and float32 neither overflows nor underflows) in float32, or in float64
    for a block that needs it; ``sq`` holds the float64 squared norms of those rows.
    """

    def __init__(self, A: np.ndarray, center: np.ndarray, scale: float):
        self.A = A
        self.center = center
        self.scale = scale
        self._copies = {}
        self.sq = np.concatenate([np.einsum("ij,ij->i", c, c) for c in self._chunks()])
        self.max_sq = float(self.sq.max())

    def _chunks(self):
        step = max(1, _BLOCK_VALUES // self.A.shape[1])
        for s in range(0, self.A.shape[0], step):
            yield (self.A[s:s + step] - self.center) * self.scale

    def centred(self, dtype) -> np.ndarray:
        if dtype not in self._copies:
            self._copies[dtype] = np.concatenate([c.astype(dtype) for c in self._chunks()])
        return self._copies[dtype]

    def sq_as(self, dtype) -> np.ndarray:
        key = ("sq", dtype)
        if key not in self._copies:
            self._copies[key] = self.sq.astype(dtype)
        return self._copies[key]


def _error_coefficient(n_features: int, dtype) -> float:
    """c with ``|computed − true| <= c (‖a‖² + ‖b‖²)`` for a squared distance from the expansion.

    An inner product of length d of inputs rounded to ``dtype`` (unit round-off u) is off by at
    most ``γ_{d+2} ‖a‖‖b‖``, ``γ_m = m u / (1 − m u)``, in any summation order (Higham, Accuracy
    and Stability of Numerical Algorithms, §3.1), and ``2‖a‖‖b‖ <= ‖a‖² + ‖b‖²``; the three
    roundings of ``‖a‖² + ‖b‖² − 2a·b`` in ``dtype`` add at most ``6u (‖a‖² + ‖b‖²)``; the
    squared norms, summed in float64, are off by at most ``γ_{d+2}(float64)`` relatively (centring
    included). The factor 1.1 and the last term cover the float64 thresholds.
    """
    def gamma(m: int, dt) -> float:
        u = np.finfo(dt).eps / 2
        return m * u / (1 - m * u)

    u = np.finfo(dtype).eps / 2
    m = n_features + 2
    return (1.1 * (gamma(m, dtype) + 6 * u + gamma(m, np.float64))
            + 8 * np.finfo(np.float64).eps)


def _approx_block(P: _Space, Q: _Space, start: int, stop: int, dtype, *, same: bool):
    """Approximate squared distances (scaled units, ``dtype``) of rows start:stop of P to Q, and
    a per-row error bound ``tol`` (float64) valid for every entry of the row."""
    D2 = P.centred(dtype)[start:stop] @ Q.centred(dtype).T
    D2 *= -2
    D2 += P.sq_as(dtype)[start:stop, None]
    D2 += Q.sq_as(dtype)[None, :]
    if same:
        rows = np.arange(stop - start)
        D2[rows, start + rows] = 0
    tol = _error_coefficient(P.A.shape[1], dtype) * (P.sq[start:stop] + Q.max_sq)
    return D2, tol


def _round_up(x: np.ndarray, dtype) -> np.ndarray:
    y = x.astype(dtype)
    return np.where(y < x, np.nextafter(y, dtype(np.inf)), y)


def _round_down(x: np.ndarray, dtype) -> np.ndarray:
    y = x.astype(dtype)
    return np.where(y > x, np.nextafter(y, dtype(-np.inf)), y)


def _exact_sq_distances(P: _Space, Q: _Space, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``‖P.A[rows] − Q.A[cols]‖²`` directly: float64 differences, then the sum of squares."""
    out = np.empty(rows.size)
    chunk = max(1, _BLOCK_VALUES // (4 * P.A.shape[1]))
    for s in range(0, rows.size, chunk):
        diff = P.A[rows[s:s + chunk]] - Q.A[cols[s:s + chunk]]
        out[s:s + chunk] = np.einsum("ij,ij->i", diff, diff)
    return out


# A float32 block is redone in float64 when more than this share of its entries is undecided.
_MAX_UNDECIDED = 0.01


def _kth_neighbour_sq_radii(P: _Space, k: int, block: int) -> np.ndarray:
    """Squared distance (raw units) from each point of P to its k-th nearest neighbour in P,
    itself excluded: the (k+1)-th smallest entry of its row, the point itself (0) being first.

    With approximations within ``tol`` of the truth, the true (k+1)-th smallest value ``T*`` lies
    within ``tol`` of the approximate one ``v``; entries below ``v − 2 tol`` are certainly smaller
    than ``T*``, entries above ``v + 2 tol`` certainly larger. With ``c`` entries certainly
    smaller, ``T*`` is the (k+1−c)-th smallest exact value among the few entries in between.
    """
    n = P.A.shape[0]
    radii = np.empty(n)
    for start in range(0, n, block):
        stop = min(n, start + block)
        for dtype in (np.float32, np.float64):
            D2, tol = _approx_block(P, P, start, stop, dtype, same=True)
            v = np.partition(D2, k, axis=1)[:, k].astype(np.float64)
            below = D2 < _round_down(v - 2 * tol, dtype)[:, None]
            ambiguous = D2 <= _round_up(v + 2 * tol, dtype)[:, None]
            del D2
            ambiguous ^= below
            n_below = below.sum(axis=1)
            del below
            if dtype is np.float32 and ambiguous.sum() > _MAX_UNDECIDED * ambiguous.size:
                continue
            rows, cols = np.nonzero(ambiguous)
            del ambiguous
            values = _exact_sq_distances(P, P, rows + start, cols)
            order = np.lexsort((values, rows))
            first = np.searchsorted(rows[order], np.arange(stop - start))
            radii[start:stop] = values[order][first + k - n_below]
            break
    return radii


def _cross_block(P: _Space, Q: _Space, start: int, stop: int, r2_rows, r2_cols):
    """For rows start:stop of P against all of Q: the booleans ``d² < r2_rows[i]`` and
    ``d² < r2_cols[j]`` (raw units); entries the bound leaves undecided are recomputed directly
    in float64."""
    s2 = P.scale**2  # a power of two: thresholds convert to scaled units exactly
    for dtype in (np.float32, np.float64):
        D2, tol = _approx_block(P, Q, start, stop, dtype, same=False)
        in_rows = D2 < _round_down(r2_rows * s2 - tol, dtype)[:, None]
        undecided = D2 <= _round_up(r2_rows * s2 + tol, dtype)[:, None]
        undecided ^= in_rows
        tol_max = tol.max()
        in_cols = D2 < _round_down(r2_cols * s2 - tol_max, dtype)[None, :]
        undecided_cols = D2 <= _round_up(r2_cols * s2 + tol_max, dtype)[None, :]
        del D2
        undecided_cols ^= in_cols
        undecided |= undecided_cols
        del undecided_cols
        if dtype is np.float32 and undecided.sum() > _MAX_UNDECIDED * undecided.size:
            continue
        rows, cols = np.nonzero(undecided)
        exact = _exact_sq_distances(P, Q, rows + start, cols)
        in_rows[rows, cols] = exact < r2_rows[rows]
        in_cols[rows, cols] = exact < r2_cols[cols]
        return in_rows, in_cols
    raise AssertionError("unreachable")


def prdc(real, fake, k: int = 5, *, block_size: int | None = None) -> dict[str, float]:
    """Precision, recall, density and coverage (Naeem et al. 2020), as in their ``prdc`` package.

    With ``r_i`` the distance from real point ``x_i`` to its k-th nearest real neighbour (itself
    excluded), ``s_j`` the same for fake point ``y_j`` among the fake points, and ``d_ij`` the
    Euclidean distance between ``x_i`` and ``y_j`` (N real, M fake points):

    * precision = share of fake points inside some real ball: ``mean_j 1[∃i: d_ij < r_i]``;
    * recall = share of real points inside some fake ball: ``mean_i 1[∃j: d_ij < s_j]``;
    * density = ``(1 / kM) Σ_j Σ_i 1[d_ij < r_i]`` (can exceed 1);
    * coverage = share of real balls holding a fake point: ``mean_i 1[min_j d_ij < r_i]``.

    Parameters
    ----------
    real : array of shape (N, n_features)
        Reference ("real") embeddings, N > k.
    fake : array of shape (M, n_features)
        Evaluated ("fake", generated) embeddings, M > k.
    k : int >= 1
        Neighbourhood size (Naeem et al.: 5; the magnitude paper's image experiment: 10).
    block_size : int, optional
        Rows per block of the distance computations; default keeps each block near 64 MB.

    Returns
    -------
    dict with float values ``precision``, ``recall``, ``density``, ``coverage``.

    Notes
    -----
    The inequalities are strict, as in ``prdc`` 0.2, so a set of identical points has zero-radius
    balls that contain nothing (all four metrics 0, as in ``prdc``). ``k = N − 1`` is allowed (the
    package fails there, argpartition out of bounds), and data so large or small that squared
    distances would overflow or underflow float64 are rescaled by a power of two (exact).

    Unlike the package, no N x N or N x M matrix is ever held: radii and ball memberships are
    accumulated over row blocks, so peak memory is the inputs plus ``O(block · max(N, M))``. For
    speed, the distances of a block come from one float32 matrix product (of the data centred on
    the mean of both sets) together with a rigorous bound on its rounding error; every decision
    the bound leaves open (a distance too close to a radius, a possible k-th neighbour) is settled
    by recomputing that distance directly in float64 (differences, then the sum of squares), and a
    block with too many open decisions is redone with a float64 product first. Every comparison is
    thus that of a direct float64 distance: exact for ties between exactly representable
    distances (integer grids, duplicates) and otherwise more accurate than the package's float64
    expansion ``‖a‖² + ‖b‖² − 2a·b``, which loses digits far from the origin. The results agree
    with the package to round-off (up to distances within round-off of a radius).
    """
    real, fake = check_pair(real, fake, names=("real", "fake"))
    if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}.")
    for name, A in (("real", real), ("fake", fake)):
        if k >= A.shape[0]:
            raise ValueError(
                f"k={k} must be smaller than the number of points in {name} ({A.shape[0]}): the "
                "k-th nearest neighbour excluding the point itself must exist."
            )
    n_real, n_fake = real.shape[0], fake.shape[0]
    # Data of extreme scale (1e300: the sums below would overflow) are divided by a power of two
    # first: exact, and no comparison of distances changes.
    (real, fake), _ = rescaled(real, fake)
    # Distances do not change under translation; centring keeps |a|² + |b|² (and so the float32
    # error bound) of the order of the distances themselves.
    center = (real.sum(axis=0) + fake.sum(axis=0)) / (n_real + n_fake)
    largest = max(float(np.abs(np.r_[A.max(axis=0) - center, A.min(axis=0) - center]).max())
                  for A in (real, fake))
    if largest > 2.0**400 or 0 < largest < 2.0**-400:
        # Squared distances would overflow or underflow float64: rescale by a power of two,
        # which is exact and leaves every comparison of distances unchanged.
        factor = 2.0 ** -math.frexp(largest)[1]
        real, fake, center, largest = real * factor, fake * factor, center * factor, 0.5
    scale = 2.0 ** -math.frexp(largest)[1] if largest > 0 else 1.0
    real = _Space(real, center, scale)
    fake = _Space(fake, center, scale)
    r2_real = _kth_neighbour_sq_radii(real, k, _block_rows(n_real, block_size))
    r2_fake = _kth_neighbour_sq_radii(fake, k, _block_rows(n_fake, block_size))

    fake_in_real_ball = np.zeros(n_fake, dtype=bool)
    fake_ball_counts = np.zeros(n_fake, dtype=np.int64)
    real_in_fake_ball = np.zeros(n_real, dtype=bool)
    real_ball_covered = np.zeros(n_real, dtype=bool)
    block = _block_rows(n_fake, block_size)
    for start in range(0, n_real, block):
        stop = min(n_real, start + block)
        # inside_real[i, j]: fake_j in the ball of real_i; inside_fake[i, j]: real_i in fake_j's
        inside_real, inside_fake = _cross_block(real, fake, start, stop,
                                                r2_real[start:stop], r2_fake)
        fake_in_real_ball |= inside_real.any(axis=0)
        fake_ball_counts += inside_real.sum(axis=0)
        real_ball_covered[start:stop] = inside_real.any(axis=1)
        real_in_fake_ball[start:stop] = inside_fake.any(axis=1)
    return {
        "precision": float(fake_in_real_ball.mean()),
        "recall": float(real_in_fake_ball.mean()),
        "density": float(fake_ball_counts.sum() / (k * n_fake)),
        "coverage": float(real_ball_covered.mean()),
    }


def mmd_rbf(
    X,
    Y,
    *,
    sigma_multipliers=GGM_SIGMA_MULTIPLIERS,
    return_all: bool = False,
    block_size: int | None = None,
):
    """Squared MMD with Gaussian kernels, maximised over bandwidths (GGM-metrics convention).

    For each ``σ = m · √(mean_ij ‖x_i − y_j‖²)``, ``m`` in ``sigma_multipliers``, with
    ``k(a, b) = exp(−‖a − b‖² / (2σ²))``, the biased (V-statistic) estimator

    ``MMD²_σ = mean_ij k(x_i, x_j) + mean_ij k(y_i, y_j) − 2 mean_ij k(x_i, y_j)``

    (diagonal terms included), and the result is ``max_σ MMD²_σ`` (Thompson et al. 2022; it is
    MMD², not MMD).

    Parameters
    ----------
    X : array of shape (n, n_features)
        Evaluated (generated) set.
    Y : array of shape (m, n_features)
        Reference set.
    sigma_multipliers : sequence of float > 0
        Default: GGM-metrics' (0.01, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10).
    return_all : bool
        Also return the array of ``MMD²_σ`` per multiplier.
    block_size : int, optional
        Rows per block of the kernel sums.

    Returns
    -------
    float (>= 0), or ``(float, ndarray of shape (len(sigma_multipliers),))`` with ``return_all``.
    If every point of both sets coincides (zero cross distance), the two distributions are equal
    and the result is 0.

    Notes
    -----
    Like GGM-metrics (whose running maximum starts at 0) the result is clipped at 0: the biased
    estimator is non-negative in exact arithmetic, round-off can make it -1e-17.
    """
    X, Y = check_pair(X, Y, names=("X", "Y"))
    # MMD-RBF does not change with the scale of the data (the bandwidths follow it): extreme data
    # are divided by a power of two (exact) so that squared distances stay in float64's range.
    (X, Y), _ = rescaled(X, Y)
    mult = np.asarray(sigma_multipliers, dtype=np.float64).ravel()
    if mult.size == 0 or not np.all(np.isfinite(mult)) or np.any(mult <= 0):
        raise ValueError("sigma_multipliers must be a non-empty sequence of finite numbers > 0.")
    mean_cross = _mean_of_blocks(X, Y, block_size, lambda D2: D2.sum()) / (X.shape[0] * Y.shape[0])
    if mean_cross == 0:
        values = np.zeros(mult.size)
    else:
        gammas = 1.0 / (2.0 * (mult * math.sqrt(mean_cross)) ** 2)

        def kernel_means(A, B, same):
            total = np.zeros(gammas.size)
            for _, _, D2 in _sq_distance_blocks(A, B, _block_rows(B.shape[0], block_size),
                                                same=same):
                for i, g in enumerate(gammas):
                    total[i] += np.exp(-g * D2).sum()
            return total / (A.shape[0] * B.shape[0])

        values = kernel_means(X, X, True) + kernel_means(Y, Y, True) - 2 * kernel_means(X, Y, False)
    best = max(0.0, float(values.max()))
    return (best, values) if return_all else best


def _mean_of_blocks(A, B, block_size, reduce) -> float:
    return float(sum(reduce(D2) for _, _, D2 in
                     _sq_distance_blocks(A, B, _block_rows(B.shape[0], block_size))))


def mmd_linear(X, Y) -> float:
    """Squared MMD with the linear kernel: ``‖mean(X) − mean(Y)‖²``.

    Parameters
    ----------
    X : array of shape (n, n_features)
    Y : array of shape (m, n_features)

    Returns
    -------
    float >= 0
    """
    X, Y = check_pair(X, Y, names=("X", "Y"))
    (X, Y), e = rescaled(X, Y)
    diff = X.mean(axis=0) - Y.mean(axis=0)
    if not e:
        return float(diff @ diff)
    with np.errstate(over="ignore"):
        value = float(np.ldexp(diff @ diff, 2 * e))  # the squared units of the data as given
    return check_finite_result(value, "MMD² (linear)", hint="Rescale X and Y.")
