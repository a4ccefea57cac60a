"""The ranking of the measures as a function of the highest temperature included.

For every cap τ_max among the multiples of CAP_STEP within the data's temperatures and the
largest temperature (from the smallest that leaves every (task, model) at least 2 × ``cv_folds``
sets at 3 or more temperatures), only the sets
generated at τ ≤ τ_max are kept; each measure's temperature is predicted by isotonic regression
with the R² table's cross-validation (same folds for every measure, same seed), and the
``ranking_measures`` are ranked by mean R² per (cap, task, model). Writes TABLE (.csv):
``max_temperature, task, model, measure, r2_mean, r2_std, rank, n_sets, n_temperatures`` (rank
empty for a measure that is reported but not ranked). At the largest cap it is ``r2_scores.csv``.
"""

from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import text_temperature as protocol


def main(scores: Inputs, table: Output, measures: list, ranking_measures: list, cv_folds: int,
         cv_repeats: int, seed: int, cap_step: float):
    """Read the per-(task, model) SCORES (.csv); write TABLE (.csv)."""
    _, by_measure, temperatures = protocol.read_score_tables(scores, measures)
    result = protocol.ranking_by_max_temperature(
        by_measure, temperatures, measures=measures, ranking_measures=ranking_measures,
        step=cap_step, n_splits=cv_folds, n_repeats=cv_repeats, seed=seed, log=log)
    with atomic_path(table) as tmp:
        result.to_csv(tmp, index=False, float_format="%.4f")
    caps = sorted(result["max_temperature"].unique())
    log.info("%d maximum temperatures, %g to %g", len(caps), caps[0], caps[-1])
    return {"max_temperatures": [float(c) for c in caps]}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
