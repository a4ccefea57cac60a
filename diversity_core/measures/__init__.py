"""The measures beside the magnitude engine: the registry of named measures (:mod:`.registry`),
the distances every measure reads (:mod:`.distances`), the reference-free baselines
(:mod:`.baselines`: Vendi Score, IsoScore, DCScore, AvgSim, GMStds) and the reference-based ones
(:mod:`.reference_based`: precision/recall/density/coverage, MMD). Magnitude itself is
:mod:`diversity_core.magnitude`.
"""

from .baselines import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from .distances import METRICS, pairwise_distances
from .reference_based import mmd_linear, mmd_rbf, prdc
from .registry import (
    FREE_MEASURES,
    LABELS,
    MEASURES,
    REFERENCE_MEASURES,
    Measure,
    get_measure,
    get_measure_names,
)

__all__ = ["FREE_MEASURES", "LABELS", "MEASURES", "METRICS", "REFERENCE_MEASURES", "Measure",
           "avg_sim", "dc_score", "get_measure", "get_measure_names", "gm_stds", "iso_score",
           "mmd_linear", "mmd_rbf", "pairwise_distances", "prdc", "vendi_score"]
