"""Spearman's rho of every measure with the perturbation p, per architecture, and a summary
(computed by ``diversity_core.experiments.graph_analysis.spearman_tables``).

``spearman.csv``: one row per (dataset, experiment, metric, setting). ``summary.csv``: per
(dataset, experiment, metric) the mean, median and standard deviation of rho over the
architectures, the bootstrap interval of the mean (architectures and steps resampled:
``diversity_core.experiments.graph_mode_collapse.bootstrap_mean_rho``), MagDiff's mean rho minus
this measure's with its paired bootstrap interval and what the interval says (``vs_magdiff``:
behind, tied or ahead), the number of architectures with an undefined rho (a measure constant
over the sweep), the rank of the measure by mean rho within its (dataset, experiment) (1 = best;
ties share a rank) and the number of clusters and sweep steps.
"""

import json

import pandas as pd
from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import graph_mode_collapse as protocol


def main(measures: Inputs, clusters: Inputs, spearman: Output, summary: Output, seed: int,
         n_bootstrap: int, ci_level: float):
    """Read the per-dataset measure tables, write SPEARMAN and SUMMARY (.csv), with N_BOOTSTRAP
    replicates (seeded by SEED) for intervals at CI_LEVEL."""
    table = pd.concat([pd.read_csv(p) for p in measures], ignore_index=True)
    info = {}
    for path in clusters:
        with open(path) as f:
            c = json.load(f)
        info[c["dataset"]] = c
    rho, summ = protocol.spearman_tables(table, info, n_boot=n_bootstrap, seed=seed,
                                         level=ci_level)
    with atomic_path(spearman) as tmp:
        rho.to_csv(tmp, index=False, float_format="%.6f")
    with atomic_path(summary) as tmp:
        summ.to_csv(tmp, index=False, float_format="%.4f")
    for (dataset, experiment), part in summ.groupby(["dataset", "experiment"], sort=False):
        best = part.sort_values("mean", ascending=False).iloc[0]
        mag = part.set_index("metric").loc["magdiff"]
        log.info("%s / %s: best mean rho %s (%.3f); magdiff %.3f [%.3f, %.3f]; tied with "
                 "magdiff: %s", dataset, experiment, best["metric"], best["mean"], mag["mean"],
                 mag["ci_low"], mag["ci_high"],
                 ", ".join(part.loc[part["vs_magdiff"] == "tied", "metric"]) or "none")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
