"""Point clouds shared by the tests of the engine (the large-n path, host and device), and the
spaces of its closed forms (REFERENCE.md §1)."""

import numpy as np


def clustered(n, d, seed):
    """``n`` points in ``d`` dimensions around 5 Gaussian centres (sd 4 apart, 1 within)."""
    rng = np.random.default_rng(seed)
    centres = 4 * rng.normal(size=(5, d))
    return centres[rng.integers(5, size=n)] + rng.normal(size=(n, d))


def equidistant(n, d):
    """The distance matrix of ``n`` points all at distance ``d``."""
    D = np.full((n, n), float(d))
    np.fill_diagonal(D, 0.0)
    return D


def line(x):
    """The distance matrix of points ``x`` of the real line."""
    x = np.asarray(x, dtype=float)
    return np.abs(x[:, None] - x[None, :])
