"""How well each measure predicts the temperature: isotonic-regression R², ranking and gains.

* R2 (``r2_scores.csv``): per (task, model, measure) the mean and standard deviation of R² over
  every held-out fold of repeated K-fold cross-validation (the same folds for every measure), and
  the number of sets;
* RANKING (``ranking.csv``): per measure, its median and mean rank by R² over the (task, model,
  repeat) resamples, its share of first and of last places; ``scope`` = ``paper`` ranks the
  paper's four measures (``ranking_measures``), ``all`` every measure;
* GAINS (``gains.csv``): per task, the mean R² over models of MagArea and of AvgSim, the gain, and
  the paper's gain;
* SPEARMAN (``spearman.csv``): Spearman's rho of every measure with the temperature and its 95%
  percentile bootstrap interval;
* FOLDS: every fold's R² (interim, for auditing).
"""

import numpy as np
import pandas as pd
from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import text_temperature as protocol


def main(scores: Inputs, r2: Output, ranking: Output, gains: Output, spearman: Output,
         folds: Output, measures: list, ranking_measures: list, cv_folds: int, cv_repeats: int,
         bootstrap_resamples: int, seed: int):
    """Read the per-(task, model) SCORES (.csv) and write R2, RANKING, GAINS, SPEARMAN, FOLDS."""
    by_key, by_measure, temperatures = protocol.read_score_tables(scores, measures)
    fold_table, summary = protocol.r2_table(
        by_measure, temperatures, measures=measures, n_splits=cv_folds, n_repeats=cv_repeats,
        seed=seed)
    with atomic_path(folds) as tmp:
        fold_table.to_csv(tmp, index=False, float_format="%.6f")
    with atomic_path(r2) as tmp:
        summary.to_csv(tmp, index=False, float_format="%.4f")

    parts = []
    for scope, chosen in (("paper", ranking_measures), ("all", measures)):
        ranks, rank_summary = protocol.rank_measures(fold_table, chosen)
        rank_summary.insert(0, "scope", scope)
        rank_summary["n_resamples"] = ranks.groupby(["task", "model", "repeat"]).ngroups
        parts.append(rank_summary)
    ranked = pd.concat(parts, ignore_index=True)
    with atomic_path(ranking) as tmp:
        ranked.to_csv(tmp, index=False, float_format="%.4f")

    gain_table = protocol.gains_over(summary, "mag_area", "avg_sim")
    gain_table["paper_gain"] = gain_table["task"].map(
        protocol.PAPER_RESULTS["gain_over_avg_sim"])
    with atomic_path(gains) as tmp:
        gain_table.to_csv(tmp, index=False, float_format="%.4f")

    rows = []
    for (task, model), table in by_key.items():
        for measure in measures:
            rho, low, high = protocol.spearman_bootstrap(
                table[measure].to_numpy(), table["temperature"].to_numpy(),
                n_resamples=bootstrap_resamples, seed=seed)
            rows.append({"task": task, "model": model, "measure": measure, "rho": rho,
                         "ci_low": low, "ci_high": high, "n_sets": len(table)})
    with atomic_path(spearman) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False, float_format="%.4f")

    paper = ranked[ranked["scope"] == "paper"].set_index("measure")
    log.info("paper's four measures: median rank %s; share best %s",
             paper["median_rank"].to_dict(), paper["share_best"].round(3).to_dict())
    log.info("MagArea - AvgSim mean R² per task: %s",
             dict(zip(gain_table["task"], np.round(gain_table["gain"], 3), strict=True)))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
