"""Measures from outside the package, for the tests that enable them only through the
configuration's ``measures.plugins`` (or ``--plugin``): a measure of a set alone, one against a
reference, and ones that fail on purpose."""

import numpy as np
from scipy.spatial.distance import cdist

from diversity_core.measures import Measure


def mean_nn(X) -> float:
    """The mean distance from each point to its nearest other point (Euclidean)."""
    D = cdist(X, X)
    np.fill_diagonal(D, np.inf)
    return float(D.min(axis=1).mean())


mean_nn.label = "Mean NN distance"


def _nn_to_reference(X, reference) -> float:
    """The mean distance from each point of ``X`` to its nearest point of the reference."""
    return float(cdist(X, reference).min(axis=1).mean())


NN_TO_REFERENCE = Measure("nn_to_reference", "NN to reference", "mean distance to the nearest "
                          "reference point", True, False, needs=frozenset({"reference"}),
                          compute=_nn_to_reference)


def not_finite(X) -> float:
    """NaN for every set."""
    return float("nan")


def raises(X) -> float:
    raise RuntimeError("no value for this set")


def two_sets(X, reference, extra) -> float:
    """A function whose signature the registry cannot call."""
    return 0.0


def magarea(X) -> float:
    """A function that takes a built-in name."""
    return 0.0
