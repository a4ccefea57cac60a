"""Spearman's rho of every measure with the perturbation p, per architecture, and a summary.

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

import numpy as np
import pandas as pd
from _helpers import Inputs, Output, log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import graph_mode_collapse as protocol


def summarise(spearman: pd.DataFrame) -> pd.DataFrame:
    """Mean/median/std of rho over settings, NaN count and rank by mean within each panel."""
    grouped = spearman.groupby(["dataset", "experiment", "metric"], sort=False)["spearman"]
    summary = grouped.agg(mean="mean", median="median", std="std",
                          n_settings="size").reset_index()
    summary["n_undefined"] = grouped.apply(lambda s: int(s.isna().sum())).to_numpy()
    summary["rank"] = (summary.groupby(["dataset", "experiment"])["mean"]
                       .rank(ascending=False, method="min").astype("Int64"))
    return summary


def versus_magdiff(metric: str, low: float, high: float) -> str:
    """What the paired bootstrap interval of MagDiff's rho minus this measure's says."""
    if metric == "magdiff":
        return "magdiff"
    if not (np.isfinite(low) and np.isfinite(high)):
        return "undefined"
    return "behind" if low > 0 else "ahead" if high < 0 else "tied"


def main(measures: Inputs, clusters: Inputs, spearman: Output, summary: Output, seed: int,
         n_bootstrap: int, ci_level: float):
    """Read the per-dataset measure tables, write SPEARMAN and SUMMARY (.csv), with N_BOOTSTRAP
    replicates (seeded by SEED) for intervals at CI_LEVEL."""
    table = pd.concat([pd.read_csv(p) for p in measures], ignore_index=True)
    rho = protocol.spearman_per_setting(table)
    order = {name: i for i, name in enumerate(protocol.MEASURES)}
    rho = rho.sort_values(["dataset", "experiment", "metric", "setting"],
                          key=lambda c: c.map(order) if c.name == "metric" else c)
    with atomic_path(spearman) as tmp:
        rho.to_csv(tmp, index=False, float_format="%.6f")
    summ = summarise(rho)
    intervals = protocol.rho_intervals(table, n_boot=n_bootstrap, seed=seed, level=ci_level)
    summ = summ.merge(intervals, on=["dataset", "experiment", "metric"], how="left",
                      validate="one_to_one")
    summ["vs_magdiff"] = [versus_magdiff(m, lo, hi) for m, lo, hi in
                          zip(summ["metric"], summ["gap_low"], summ["gap_high"], strict=True)]
    info = {}
    for path in clusters:
        with open(path) as f:
            c = json.load(f)
        info[c["dataset"]] = c
    summ["n_clusters"] = summ["dataset"].map({d: c["n_clusters"] for d, c in info.items()})
    summ["n_steps"] = [info[d][f"{e}_steps"] for d, e in zip(summ["dataset"], summ["experiment"],
                                                              strict=True)]
    columns = ["dataset", "experiment", "metric", "mean", "ci_low", "ci_high", "median", "std",
               "gap", "gap_low", "gap_high", "vs_magdiff", "n_settings", "n_undefined", "rank",
               "n_clusters", "n_steps"]
    with atomic_path(summary) as tmp:
        summ[columns].to_csv(tmp, index=False, float_format="%.4f")
    for (dataset, experiment), part in summ.groupby(["dataset", "experiment"], sort=False):
        best = part.sort_values("mean", ascending=False).iloc[0]
        mag = part.set_index("metric").loc["magdiff"]
        log.info("%s / %s: best mean rho %s (%.3f); magdiff %.3f [%.3f, %.3f]; tied with "
                 "magdiff: %s", dataset, experiment, best["metric"], best["mean"], mag["mean"],
                 mag["ci_low"], mag["ci_high"],
                 ", ".join(part.loc[part["vs_magdiff"] == "tied", "metric"]) or "none")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
