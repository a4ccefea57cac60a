"""The measures beside the magnitude engine: the registry of named measures (:mod:`.registry`,
which also takes a user's own measures: :func:`register_plugins`),
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
    ScaleView,
    get_measure,
    get_measure_names,
    measure_from_function,
    register,
    register_plugins,
)

__all__ = ["FREE_MEASURES", "LABELS", "MEASURES", "METRICS", "REFERENCE_MEASURES", "Measure",
           "ScaleView", "avg_sim", "dc_score", "get_measure", "get_measure_names", "gm_stds",
           "iso_score", "measure_from_function", "mmd_linear", "mmd_rbf", "pairwise_distances",
           "prdc", "register", "register_plugins", "vendi_score"]
