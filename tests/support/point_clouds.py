"""Point clouds shared by the tests of the large-n path (host and device)."""

import numpy as np


def clustered(n, d, seed):
    """``n`` points in ``d`` dimensions around 5 Gaussian centres (sd 4 apart, 1 within)."""
    rng = np.random.default_rng(seed)
    centres = 4 * rng.normal(size=(5, d))
    return centres[rng.integers(5, size=n)] + rng.normal(size=(n, d))
