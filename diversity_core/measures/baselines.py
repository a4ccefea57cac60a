"""Reference-free baseline diversity measures: Vendi Score, IsoScore, DCScore, AvgSim, GMStds.

Each function takes embeddings ``X`` of shape (n_points, n_features) and returns a float. They are
the published measures, checked against the reference implementations (``vendi-score`` 0.0.3,
``IsoScore`` 2.0.1) in ``tests/measures/test_baselines.py``; where a reference implementation is
wrong, the docstring says what we do differently.

Higher means more diverse for every measure except :func:`avg_sim`, a *similarity*: the diversity
score of Tevet & Berant (2021) is ``-avg_sim(X)``.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.linalg
from scipy.special import logsumexp

from .._validation import (
    check_embeddings,
    check_finite_result,
    power_of_two_exponent,
    rescaled,
    unit_rows,
)

__all__ = ["vendi_score", "iso_score", "dc_score", "avg_sim", "gm_stds"]

VENDI_METRICS = ("cosine", "precomputed")
DC_KERNELS = ("cosine", "linear", "rbf")

# Rows of the n x n kernel that DCScore holds at once (block x n float64 values, about 64 MB).
_BLOCK_VALUES = 8_000_000


def _normalise_rows(X: np.ndarray, name: str) -> np.ndarray:
    # Safe at every finite scale (1e200 overflowed the norms, 1e-300 underflowed them to zero).
    return unit_rows(X, name=name, what="the cosine kernel")


def _hill_number(p: np.ndarray, q: float) -> float:
    """exp(Rényi entropy of order q) of a probability vector (zeros allowed)."""
    p = p[p > 0]
    if q == 1:
        return float(np.exp(-np.sum(p * np.log(p))))
    if q == 0:
        return float(p.size)
    if math.isinf(q):
        return float(1.0 / p.max())
    return float(np.sum(p**q) ** (1.0 / (1.0 - q)))


def vendi_score(X, metric: str = "cosine", q: float = 1) -> float:
    """Vendi Score (Friedman & Dieng 2023): the exponential of the entropy of a kernel's spectrum.

    ``VS_q = exp(H_q(λ))`` where ``λ`` are the eigenvalues of ``K / n``, ``K`` a positive
    semi-definite kernel matrix with ``k(x, x) = 1`` and ``H_q`` the Rényi entropy of order ``q``
    (``q = 1``: Shannon). ``VS`` lies in ``[1, n]``: 1 for identical points, ``n`` for mutually
    orthogonal ones (cosine kernel).

    Parameters
    ----------
    X : array of shape (n_points, n_features), or (n_points, n_points) if ``metric="precomputed"``
        Embeddings; for ``"precomputed"`` a symmetric kernel matrix with unit diagonal.
    metric : {"cosine", "precomputed"}
        ``cosine``: ``K = X̂ X̂ᵀ`` with L2-normalised rows ``X̂`` (the Vendi Score of embeddings).
    q : float >= 0 or ``numpy.inf``
        Order of the entropy. ``q = 0`` counts the non-zero eigenvalues (the kernel's numerical
        rank), ``q = inf`` gives ``1 / max λ``.

    Returns
    -------
    float, in [1, n_points]

    Notes
    -----
    Exact. For the cosine kernel the non-zero eigenvalues of ``X̂ X̂ᵀ / n`` (n x n) equal those of
    ``X̂ᵀ X̂ / n`` (d x d); we diagonalise whichever is smaller, so the cost is
    ``O(n d min(n, d) + min(n, d)³)``.

    Differences from ``vendi-score`` 0.0.3: eigenvalues that round-off makes slightly negative are
    clipped to zero and the spectrum is renormalised to sum to 1 (the package only drops them);
    eigenvalues below ``min(n, d) · eps · max λ`` count as zero (needed for ``q = 0``); ``q`` is
    honoured on every path (the package's ``score_X`` ignores it) and ``q = inf`` works (the package
    gives NaN for ``q=np.inf``). For ``q = 1`` on well-conditioned input the two agree to round-off.
    """
    if metric not in VENDI_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(VENDI_METRICS)}.")
    if (
        not isinstance(q, numbers.Real)
        or isinstance(q, bool)
        or math.isnan(q)
        or q < 0
    ):
        raise ValueError(f"q must be a real number >= 0 or numpy.inf; got {q!r}.")
    q = float(q)
    if metric == "precomputed":
        K = check_embeddings(X, name="K")
        n = K.shape[0]
        if K.shape != (n, n):
            raise ValueError(f"a precomputed kernel must be square (n, n); got shape {K.shape}.")
        if not np.allclose(np.diag(K), 1.0, rtol=0, atol=1e-8):
            raise ValueError(
                "a precomputed kernel must have k(x, x) = 1 on its diagonal "
                f"(found values in [{np.diag(K).min():.3g}, {np.diag(K).max():.3g}])."
            )
        if not np.allclose(K, K.T, rtol=0, atol=1e-8):
            raise ValueError("a precomputed kernel must be symmetric.")
        lam = scipy.linalg.eigvalsh(0.5 * (K + K.T) / n)
    else:
        X = _normalise_rows(check_embeddings(X, name="X"), "X")
        n, d = X.shape
        G = X.T @ X if d < n else X @ X.T
        lam = scipy.linalg.eigvalsh(G / n)
    lam = np.clip(lam, 0.0, None)
    lam[lam < lam.size * np.finfo(float).eps * lam.max()] = 0.0
    lam = lam / lam.sum()
    return _hill_number(lam, q)


def iso_score(X) -> float:
    """IsoScore (Rudman et al. 2022): how uniformly the variance spreads over all dimensions.

    With ``Σ_D`` the variances along the principal axes (the eigenvalues of the covariance matrix,
    ``ddof=1``) in dimension ``d``: ``Σ̂ = √d Σ_D / ‖Σ_D‖``, isotropy defect
    ``δ = ‖Σ̂ − 1‖ / √(2(d − √d))`` and ``ι = ((d − δ²(d − √d))² − d) / (d(d − 1))``.

    Parameters
    ----------
    X : array of shape (n_points, n_features), n_points >= 2, n_features >= 2

    Returns
    -------
    float, in [0, 1]: 1 for isotropic data, 0 when all variance lies along one direction.

    Notes
    -----
    IsoScore measures isotropy, not spread: scaling ``X`` leaves it unchanged. With fewer points
    than dimensions the covariance has rank < d and IsoScore is limited by the sample size; we then
    warn. When ``n_points <= n_features`` the spectrum comes from the n x n Gram matrix of the
    centred points (same non-zero eigenvalues, cheaper). The reference package (``IsoScore``
    2.0.1) returns NaN for constant input (0/0); we raise ``ValueError`` instead, for any number
    of identical points (constancy is detected exactly, not through the round-off of the mean,
    which gave twenty identical points a score of 4e-17), and a constant feature has exactly zero
    variance. Data of any finite scale give the same score (extreme data are divided by a power
    of two first). Otherwise it agrees with the package to round-off.
    """
    X = check_embeddings(X, name="X", min_points=2)
    n, d = X.shape
    if d < 2:
        raise ValueError(
            f"X has {d} feature; IsoScore needs at least 2 features (it divides by d - 1)."
        )
    constant = X.max(axis=0) == X.min(axis=0)
    if np.all(constant):
        raise ValueError(
            f"X is constant (all {n} points identical): IsoScore is 0/0, undefined."
        )
    # IsoScore does not depend on the scale: extreme data are divided by a power of two (exact)
    # so that the covariance neither overflows nor underflows.
    (X,), _ = rescaled(X)
    Xc = X - X.mean(axis=0)
    # A constant feature has exactly zero variance; the mean's round-off must not give it some.
    Xc[:, constant] = 0.0
    if n - 1 < d:
        warnings.warn(
            f"IsoScore on {n} points in {d} dimensions: the covariance has rank <= {n - 1} < {d}, "
            "so the score is limited by the sample size, not only by the data's isotropy.",
            UserWarning,
            stacklevel=2,
        )
    if n <= d:
        lam = scipy.linalg.eigvalsh(Xc @ Xc.T / (n - 1))
        lam = np.concatenate([lam, np.zeros(d - n)])
    else:
        lam = scipy.linalg.eigvalsh(Xc.T @ Xc / (n - 1))
    lam = np.clip(lam, 0.0, None)
    # The variances are squares of the data; their norm squares them again: bring extreme ones
    # (beyond 2^±250, i.e. data beyond about 2^±125) near 1 by a power of two (exact).
    lam = np.ldexp(lam, -int(power_of_two_exponent(lam.max(), limit=250)))
    norm = np.linalg.norm(lam)
    if norm == 0:  # not reached for non-constant X; kept as a guard against 0/0
        raise ValueError("X has no variance in any direction: IsoScore is 0/0, undefined.")
    sqrt_d = math.sqrt(d)
    sigma_hat = sqrt_d * lam / norm
    defect = np.linalg.norm(sigma_hat - 1.0) / math.sqrt(2.0 * (d - sqrt_d))
    return check_finite_result(((d - defect**2 * (d - sqrt_d)) ** 2 - d) / (d * (d - 1)),
                               "IsoScore")


def dc_score(X, tau: float = 1.0, kernel: str = "cosine", *, gamma: float | None = None) -> float:
    """DCScore (Zhu et al. 2025): diversity as the trace of a row-softmax of the kernel matrix.

    ``P = softmax_rows(K / τ)`` and ``DCScore = trace(P) = Σ_i P_ii``: each sample's probability of
    being "classified as itself". It lies in ``[1, n]`` for kernels with ``k(x, x) >= k(x, y)``.

    Parameters
    ----------
    X : array of shape (n_points, n_features)
    tau : float > 0
        Softmax temperature. With the cosine kernel and ``τ = 1`` the kernel values lie in
        ``[-1, 1]``, so ``P_ii <= e / (e + (n-1)/e)``: distinct points cannot reach ``n``; lower
        ``τ`` for a finer resolution.
    kernel : {"cosine", "linear", "rbf"}
        ``cosine``: inner products of L2-normalised rows; ``linear``: raw inner products;
        ``rbf``: ``exp(-gamma ‖x − y‖²)``.
    gamma : float, optional
        RBF width; default ``1 / n_features``.

    Returns
    -------
    float

    Notes
    -----
    The reference code labels its default kernel "cosine" but forgets to L2-normalise the
    embeddings (so it computes the linear kernel); we normalise. ``P_ii`` is computed row block by
    row block with a log-sum-exp, so memory stays ``O(block · n)`` and large ``K / τ`` cannot
    overflow.
    """
    if kernel not in DC_KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose one of {', '.join(DC_KERNELS)}.")
    if not isinstance(tau, numbers.Real) or not math.isfinite(tau) or tau <= 0:
        raise ValueError(f"tau must be a finite number > 0; got {tau!r}.")
    X = check_embeddings(X, name="X")
    n, d = X.shape
    e = 0
    if kernel == "cosine":
        X = _normalise_rows(X, "X")
    else:
        # Extreme data are divided by 2^e (exact); the kernel values are those of the data as
        # given: inner products times 4^e, RBF with gamma times 4^e.
        (X,), e = rescaled(X)
    if kernel == "rbf":
        gamma = 1.0 / d if gamma is None else gamma
        if not isinstance(gamma, numbers.Real) or not math.isfinite(gamma) or gamma <= 0:
            raise ValueError(f"gamma must be a finite number > 0; got {gamma!r}.")
        with np.errstate(over="ignore"):
            gamma = float(np.ldexp(gamma, 2 * e))
        sq = np.einsum("ij,ij->i", X, X)
    block = max(1, _BLOCK_VALUES // n)
    total = 0.0
    for start in range(0, n, block):
        stop = min(n, start + block)
        K = X[start:stop] @ X.T
        if kernel == "rbf":
            K *= 2.0
            K -= sq[start:stop, None]
            K -= sq[None, :]
            np.minimum(K, 0.0, out=K)
            with np.errstate(invalid="ignore"):
                K *= gamma
            if e:
                K[np.isnan(K)] = 0.0  # 0 * inf: duplicates at an overflowing gamma
            rows = np.arange(stop - start)
            K[rows, start + rows] = 0.0  # exp(-gamma * 0) = 1 exactly on the diagonal
            np.exp(K, out=K)
        elif e:
            with np.errstate(over="ignore"):
                K = np.ldexp(K, 2 * e)
        with np.errstate(over="ignore"):
            K /= tau
        if not np.isfinite(K).all():
            raise ValueError(
                f"DCScore: the {kernel} kernel divided by tau={tau:g} exceeds the float64 range "
                "for this input: rescale X or raise tau."
            )
        diag = K[np.arange(stop - start), np.arange(start, stop)]
        total += float(np.exp(diag - logsumexp(K, axis=1)).sum())
    return total


def avg_sim(X) -> float:
    """AvgSim: the mean pairwise cosine similarity over pairs ``i != j``.

    ``AvgSim = (‖Σ_i x̂_i‖² − Σ_i ‖x̂_i‖²) / (n (n − 1))`` with L2-normalised rows ``x̂_i``:
    O(n d), no n x n matrix.

    Parameters
    ----------
    X : array of shape (n_points, n_features), n_points >= 2, no zero vectors

    Returns
    -------
    float in [-1/(n-1), 1]. A *similarity*: higher means less diverse. Tevet & Berant (2021) use
    ``-AvgSim`` as the diversity score.
    """
    X = _normalise_rows(check_embeddings(X, name="X", min_points=2), "X")
    n = X.shape[0]
    s = X.sum(axis=0)
    return float((s @ s - np.einsum("ij,ij->", X, X)) / (n * (n - 1)))


def gm_stds(X) -> float:
    """GMStds (Lai et al. 2020): geometric mean of the per-dimension standard deviations.

    ``GMStds = exp(mean_j log σ_j)`` with ``σ_j`` the sample standard deviation (``ddof=1``) of
    feature ``j``.

    Parameters
    ----------
    X : array of shape (n_points, n_features), n_points >= 2

    Returns
    -------
    float >= 0, in the units of ``X``.

    Notes
    -----
    GMStds is exactly 0 as soon as one feature is constant, however spread out the points are in
    the other features. That is a property of the measure (and the magnitude paper's point against
    it, §3.1), so we return 0.0 rather than "fixing" it; constant features are detected exactly
    (zero range), not through a round-off standard deviation of 1e-17.
    """
    X = check_embeddings(X, name="X", min_points=2)
    amax = np.abs(X).max(axis=0)
    if np.any(X.max(axis=0) == X.min(axis=0)):
        return 0.0
    e = power_of_two_exponent(amax)
    if not np.any(e):
        sd = X.std(axis=0, ddof=1)
        return check_finite_result(np.exp(np.mean(np.log(sd))), "GMStds")
    # Features of extreme scale (1e200 overflowed the squares, 1e-300 underflowed them to a zero
    # standard deviation): log σ_j = log σ(x_j / 2^e_j) + e_j log 2, exactly rescaled.
    log_sd = np.log(np.ldexp(X, -e).std(axis=0, ddof=1)) + e * math.log(2.0)
    with np.errstate(over="ignore", under="ignore"):
        value = float(np.exp(np.mean(log_sd)))
    if value == 0.0:
        raise ValueError(f"GMStds of X is below the float64 range (log = {np.mean(log_sd):.6g}).")
    return check_finite_result(value, "GMStds", hint=f"(log GMStds = {np.mean(log_sd):.6g})")
