"""Input checks shared by every measure, and by the readers of JSON (:func:`json_depth`).

Each check raises :class:`ValueError` whose message names the problem and the argument, so that a
user scoring their own embeddings learns what is wrong with their file, not where NumPy choked.
"""

from __future__ import annotations

import re

import numpy as np

from ._threads import allowed_threads, map_threads, row_block_shares

__all__ = [
    "named_reason",
    "check_embeddings",
    "check_distance_matrix",
    "check_pair",
    "check_scales",
    "check_finite_result",
    "power_of_two_exponent",
    "rescaled",
    "unit_rows",
]

# Data whose largest magnitude lies outside [2^-300, 2^300] are rescaled by a power of two before
# squares or products are formed: squares of 2^±300 (times any realistic dimension) neither
# overflow nor underflow float64, and a power-of-two factor is exact, so every scale-invariant
# measure gives bitwise the same value at any finite scale. Data inside the range are never
# touched, so normal inputs give bitwise the values they always gave.
SAFE_EXPONENT = 300


def check_embeddings(X, *, name: str = "X", min_points: int = 1) -> np.ndarray:
    """Return ``X`` as a float64 array of shape (n_points, n_features), or raise ``ValueError``."""
    X = np.asarray(X)
    _check_real(X, name)
    X = X.astype(np.float64, copy=False)
    if X.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D (n_points, n_features); got a 1-D array of length {X.shape[0]}. "
            "Reshape with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one point."
        )
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_points, n_features); got shape {X.shape}.")
    if X.shape[0] == 0:
        raise ValueError(f"{name} is an empty set: it has no points.")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has points with no features (shape {X.shape}).")
    if X.shape[0] < min_points:
        raise ValueError(
            f"{name} has {X.shape[0]} point{'s' if X.shape[0] != 1 else ''}; this measure needs "
            f"at least {min_points}."
        )
    _check_finite(X, name)
    return X


def check_pair(X, Y, *, names=("X", "Y"), min_points: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Check two embedding sets that must live in the same space (same number of features)."""
    X = check_embeddings(X, name=names[0], min_points=min_points)
    Y = check_embeddings(Y, name=names[1], min_points=min_points)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"mismatched dimensions: {names[0]} has {X.shape[1]} features, "
            f"{names[1]} has {Y.shape[1]}."
        )
    return X, Y


def check_distance_matrix(D, *, name: str = "D", atol: float = 1e-10) -> np.ndarray:
    """Return ``D`` as a float64 (n, n) distance matrix, or raise ``ValueError``.

    A distance matrix here is square, finite, non-negative, symmetric (to ``atol`` relative to its
    largest entry) and zero on the diagonal. The triangle inequality is *not* required: magnitude
    is defined for cosine "distances", which break it.
    """
    D = np.asarray(D)
    _check_real(D, name)
    D = D.astype(np.float64, copy=False)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) distance matrix; got shape {D.shape}.")
    if D.shape[0] == 0:
        raise ValueError(f"{name} is an empty set: the distance matrix has no points.")
    if D.shape[0] >= _THREADED_CHECK_FROM and _plain_over_threads(D, atol):
        return D
    _check_finite(D, name)
    if D.min() < 0:
        raise ValueError(f"{name} has negative distances (min {D.min():.3g}).")
    # Relative to the largest distance, so that the checks mean the same at every scale.
    scale = float(D.max()) or 1.0
    if np.any(np.abs(np.diag(D)) > atol * scale):
        raise ValueError(
            f"{name} has a non-zero diagonal: a point must be at distance 0 from itself."
        )
    # Tile against mirrored tile: no full-size temporary, and both tiles stay in cache (a row
    # block against a column block was 7 times slower at n = 4,000; whole matrices of 1,000
    # points 3 times slower than tiles of 128, 3.1 against 1.0 ms).
    tile = 128
    asym = max(float(np.abs(D[i:i + tile, j:j + tile] - D[j:j + tile, i:i + tile].T).max())
               for i in range(0, D.shape[0], tile) for j in range(i, D.shape[0], tile))
    if asym > atol * scale:
        raise ValueError(f"{name} is not symmetric (largest |D - D.T| = {asym:.3g}).")
    return D


# From this many points on, a distance matrix is checked in row blocks over the allowed threads
# first (one thread took 0.3 to 0.7 s at 10,000 points of a t_conv + MagArea that 16 cores end in
# 8 s); only a matrix that fails goes through the one-thread checks, for their message.
_THREADED_CHECK_FROM = 2048
_TILE = 128


def _plain_over_threads(D: np.ndarray, atol: float) -> bool:
    """Whether ``D`` (square, float64) passes every check of :func:`check_distance_matrix`,
    decided over the allowed threads: the same decisions (finiteness as ``_check_finite``
    decides it, and the exact minimum, maximum, diagonal and largest |D - D.T| of the same
    tiles), tiles of 128 rows dealt round-robin (the upper triangle's rows fall in length).
    False with one thread allowed: the one-thread checks then run as they always did."""
    threads = allowed_threads()
    if threads < 2:
        return False
    n = D.shape[0]

    def share(mine):
        low, high, asym = np.inf, -np.inf, 0.0
        for i in mine:
            rows = D[i:i + _TILE]
            with np.errstate(over="ignore"):
                if not np.isfinite(rows.sum()) and not np.all(np.isfinite(rows)):
                    return None
            low, high = min(low, float(rows.min())), max(high, float(rows.max()))
            for j in range(i, n, _TILE):
                asym = max(asym, float(np.abs(D[i:i + _TILE, j:j + _TILE]
                                              - D[j:j + _TILE, i:i + _TILE].T).max()))
        return low, high, asym

    results = map_threads(share, row_block_shares(n, _TILE, threads), threads)
    if any(r is None for r in results):
        return False
    low = min(r[0] for r in results)
    scale = max(r[1] for r in results) or 1.0
    asym = max(r[2] for r in results)
    return (low >= 0 and not np.any(np.abs(np.diag(D)) > atol * scale)
            and asym <= atol * scale)


def check_scales(ts, *, name: str = "ts") -> np.ndarray:
    """Return scales as a 1-D float64 array of finite, non-negative values."""
    ts = np.asarray(ts)
    _check_real(ts, name)
    ts = np.atleast_1d(ts.astype(np.float64))
    if ts.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array of scales; got shape {ts.shape}.")
    _check_finite(ts, name)
    if np.any(ts < 0):
        raise ValueError(f"{name} has negative scales (min {ts.min():.3g}); scales must be >= 0.")
    return ts


def _check_finite(A: np.ndarray, name: str) -> None:
    # The sum is finite for finite input (barring overflow, which the exact check catches), and
    # needs no n×n boolean mask: that matters for 20,000-point distance matrices.
    with np.errstate(over="ignore"):  # finite values near 1e308 may sum to inf: then look
        total = A.sum()
    if np.isfinite(total) or np.all(np.isfinite(A)):
        return
    n_nan = int(np.isnan(A).sum())
    n_inf = int(np.isinf(A).sum())
    raise ValueError(f"{name} contains non-finite values ({n_nan} NaN, {n_inf} inf).")


def check_finite_result(value: float, measure: str, *, hint: str = "") -> float:
    """Return ``value`` if finite, else raise ``ValueError``: no measure returns inf or NaN."""
    if not np.isfinite(value):
        raise ValueError(
            f"{measure} is {value} for this input: the value lies outside the float64 range."
            + (f" {hint}" if hint else "")
        )
    return float(value)


def power_of_two_exponent(amax, limit: int = SAFE_EXPONENT) -> np.ndarray:
    """Exponents ``e`` with ``amax * 2^-e`` in [0.5, 1), or 0 where no rescaling is needed.

    ``amax`` holds largest magnitudes (scalar or array); entries within ``[2^-limit, 2^limit]``
    and zeros get 0: they are left alone. Quantities that are squared once more (the eigenvalues
    of a covariance, say) need a smaller ``limit``.
    """
    amax = np.asarray(amax, dtype=np.float64)
    _, e = np.frexp(amax)
    safe = (amax == 0) | ((amax >= 2.0**-limit) & (amax <= 2.0**limit))
    return np.where(safe, 0, e)


def rescaled(*arrays: np.ndarray) -> tuple[list[np.ndarray], int]:
    """The arrays divided by one common power of two ``2^e`` when their largest magnitude is
    extreme (see :data:`SAFE_EXPONENT`), and ``e`` (0: returned unchanged). Exact."""
    amax = max(float(np.abs(A).max()) if A.size else 0.0 for A in arrays)
    e = int(power_of_two_exponent(amax))
    if e == 0:
        return list(arrays), 0
    return [np.ldexp(A, -e) for A in arrays], e


def unit_rows(X: np.ndarray, *, name: str = "X", what: str = "the cosine kernel") -> np.ndarray:
    """L2-normalised rows ``x / ‖x‖``, correct at any finite scale; raises on zero rows.

    Each row is first divided by the power of two that brings its largest entry into [0.5, 1)
    (exact), so that its squared norm can neither overflow (rows of 1e200) nor underflow (rows of
    1e-300). Scaling a row by a power of two scales its squares, their sum and the square root
    exactly, so the result is bitwise ``X / np.linalg.norm(X, axis=1, keepdims=True)`` wherever
    that does not overflow or underflow (tests/measures/test_extreme_input.py checks it).
    """
    amax = np.abs(X).max(axis=1)
    zero = amax == 0
    if np.any(zero):
        raise ValueError(
            f"{name} has {int(zero.sum())} zero vector(s) (row {int(np.argmax(zero))} first): "
            f"{what} is undefined for them."
        )
    if amax.min() >= _SAFE_ROW_MAX[0] and amax.max() <= _SAFE_ROW_MAX[1]:
        # The scaling below is exact, and here it could only change squares that are
        # subnormal (see _SAFE_ROW_MAX), below the norm's round-off; its two passes were 60% of
        # this function's time (0.7 ms for 300 rows of 384 entries).
        return X / np.linalg.norm(X, axis=1, keepdims=True)
    _, e = np.frexp(amax)
    X = np.ldexp(X, -e[:, None])
    return X / np.linalg.norm(X, axis=1, keepdims=True)


# Rows whose largest entry lies in this range are normalised without rescaling: their squared
# norm lies in [2^-400, 2^400 · n] and cannot overflow or underflow (entries whose squares are
# subnormal weigh less than 2^-600 of it, below its round-off).
_SAFE_ROW_MAX = (2.0**-200, 2.0**200)


def _check_real(A: np.ndarray, name: str) -> None:
    if np.iscomplexobj(A):
        raise ValueError(
            f"{name} is complex (dtype {A.dtype}); the measures take real numbers: pass its real "
            "part, modulus or stacked real and imaginary parts explicitly."
        )
    if A.dtype == object or not np.issubdtype(A.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {A.dtype}.")


# Argument names the measures use in their messages (``X has ...``, ``real has ...``).
_ARGUMENT = re.compile(r"^(X|Y|real|fake)\b")


def named_reason(err: Exception, names: dict[str, str]) -> str:
    """A measure's message for a user who knows the sets by name: its argument name (X, real,
    ...) replaced by the name it stands for; a message naming no argument is prefixed with the
    name of the set it concerns, when there is only one."""
    message = str(err)
    match = _ARGUMENT.match(message)
    if match and match.group(1) in names:
        return names[match.group(1)] + message[match.end():]
    if len(set(names.values())) == 1:
        return f"{next(iter(names.values()))}: {message}"
    return message


# -- JSON: how deep a text nests, found without parsing it (the parser recurses per level) ---

_JSON_TOKENS = re.compile(r'[\[\]{}"\\]')


def json_depth(line: str) -> int:
    """The deepest nesting of arrays and objects in one JSON text, brackets inside strings not
    counted; one pass over the brackets, quotes and backslashes (linear, whatever the line)."""
    depth = deepest = 0
    in_string = False
    escaped = -1  # the position of a character a backslash escapes
    for token in _JSON_TOKENS.finditer(line):
        char, at = token.group(), token.start()
        if in_string:
            if at == escaped:
                continue
            if char == "\\":
                escaped = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
