"""Spearman's rho of every measure with the perturbation p, per architecture, and a summary.

``spearman.csv``: one row per (dataset, experiment, metric, setting). ``summary.csv``: per
(dataset, experiment, metric) the mean, median and standard deviation of rho over the
architectures, the number of architectures with an undefined rho (a measure constant over the
sweep), the rank of the measure by mean rho within its (dataset, experiment) (1 = best) and the
number of clusters and sweep steps.
"""

import json

import pandas as pd
from _helpers import Inputs, Output, log, run

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


def main(measures: Inputs, clusters: Inputs, spearman: Output, summary: Output):
    """Read the per-dataset measure tables, write SPEARMAN and SUMMARY (.csv)."""
    table = pd.concat([pd.read_csv(p) for p in measures], ignore_index=True)
    rho = protocol.spearman_per_setting(table)
    order = {name: i for i, name in enumerate(protocol.MEASURES)}
    rho = rho.sort_values(["dataset", "experiment", "metric", "setting"],
                          key=lambda c: c.map(order) if c.name == "metric" else c)
    rho.to_csv(spearman, index=False, float_format="%.6f")
    summ = summarise(rho)
    info = {}
    for path in clusters:
        with open(path) as f:
            c = json.load(f)
        info[c["dataset"]] = c
    summ["n_clusters"] = summ["dataset"].map({d: c["n_clusters"] for d, c in info.items()})
    summ["n_steps"] = [info[d][f"{e}_steps"] for d, e in zip(summ["dataset"], summ["experiment"],
                                                              strict=True)]
    summ.to_csv(summary, index=False, float_format="%.4f")
    for (dataset, experiment), part in summ.groupby(["dataset", "experiment"], sort=False):
        best = part.sort_values("mean", ascending=False).iloc[0]
        log.info("%s / %s: best mean rho %s (%.3f); magdiff %.3f", dataset, experiment,
                 best["metric"], best["mean"], part.set_index("metric").loc["magdiff", "mean"])


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
