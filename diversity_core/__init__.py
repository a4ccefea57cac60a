"""diversity_core: metric space magnitude and baseline diversity measures for embeddings.

The top level holds the measures (stage 3 of the pipeline); :mod:`diversity_core.data` (stage 1:
datasets), :mod:`diversity_core.embed` (stage 2: embedding models) and
:mod:`diversity_core.experiments` (stage 4: the paper's protocols) are imported explicitly.

NumPy in, NumPy out. Every function takes embeddings of shape (n_points, n_features) or a distance
matrix of shape (n_points, n_points) and raises ``ValueError`` naming the problem on bad input.
:func:`compare` puts many sets side by side on one integration limit (:mod:`.comparison`).
"""

from .distances import METRICS, pairwise_distances
from .magnitude import (
    MagnitudeSpace,
    MagnitudeWarning,
    convergence_scale,
    mag_area,
    mag_diff,
    magnitude_derivative,
    magnitude_function,
    magnitude_weights,
    reference_based_t_cut,
    reference_free_t_cut,
)
from .settings import MagnitudeSettings

# --- baselines (issue 3) ---
# isort: split
from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .reference_based import mmd_linear, mmd_rbf, prdc

# --- comparing many sets (issue 21) ---
# isort: split
from .comparison import Comparison, compare

__version__ = "0.1.0"

__all__ = [
    "METRICS",
    "MagnitudeSettings",
    "MagnitudeSpace",
    "MagnitudeWarning",
    "convergence_scale",
    "mag_area",
    "mag_diff",
    "magnitude_derivative",
    "magnitude_function",
    "magnitude_weights",
    "pairwise_distances",
    "reference_based_t_cut",
    "reference_free_t_cut",
    # baselines (issue 3)
    "avg_sim",
    "dc_score",
    "gm_stds",
    "iso_score",
    "mmd_linear",
    "mmd_rbf",
    "prdc",
    "vendi_score",
    # comparing many sets (issue 21)
    "Comparison",
    "compare",
]
