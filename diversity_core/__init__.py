"""diversity_core: metric space magnitude and baseline diversity measures for embeddings.

The top level is the public face: the measures and :func:`compare`, imported from their wings.
The wings, in the order of the pipeline's stages (``pyproject.toml``'s import-linter contracts
say which may import which): :mod:`.assets` (pinned fetching and caches), :mod:`.data`
(datasets), :mod:`.embed` (embedding models), :mod:`.files` (the user's files),
:mod:`.magnitude` (the engine) and :mod:`.measures` (the registry and the baselines),
:mod:`.comparison` (many sets on one integration limit), :mod:`.experiments` (the paper's
protocols), :mod:`.reporting` (tables, figures, the claims), :mod:`.provenance` (records, audit,
RO-Crate) and :mod:`.cli` (the command line). Shared leaves beside this file: :mod:`.atomic`,
:mod:`.device`, ``_memory`` and ``_validation``.

NumPy in, NumPy out. Every function takes embeddings of shape (n_points, n_features) or a distance
matrix of shape (n_points, n_points) and raises ``ValueError`` naming the problem on bad input.
:func:`compare` puts many sets side by side on one integration limit (:mod:`.comparison`).
"""

from ._memory import MemoryNeedError
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
from .magnitude.settings import MagnitudeSettings
from .measures import METRICS, pairwise_distances

# --- baselines (issue 3) ---
# isort: split
from .measures import avg_sim, dc_score, gm_stds, iso_score, mmd_linear, mmd_rbf, prdc, vendi_score

# --- comparing many sets (issue 21) ---
# isort: split
from .comparison import Comparison, compare

__version__ = "0.1.0"

# The wings a user reaches from here without importing them first (``dc.embed.embed_texts``,
# ``dc.files.read_texts``), each imported when first asked for, so that ``import
# diversity_core`` stays light (no torch, no Snakemake).
_WINGS = ("assets", "cli", "comparison", "data", "embed", "experiments", "files",
          "language_model", "magnitude", "measures", "provenance", "reporting")


def __getattr__(name: str):
    if name in _WINGS:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "METRICS",
    "MagnitudeSettings",
    "MemoryNeedError",
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
