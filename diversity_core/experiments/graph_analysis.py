"""The analysis of the graph experiment (:mod:`.graph_mode_collapse`): Spearman's ρ of every
measure with the share p perturbed, its bootstrap intervals, and the summary tables.

* :func:`spearman_per_setting`: ρ per (dataset, experiment, metric, architecture);
* :func:`bootstrap_mean_rho`, :func:`rho_intervals`: bootstrap intervals of the mean ρ and of
  each measure's gap to MagDiff (architectures and steps resampled);
* :func:`summarise`, :func:`versus_magdiff`, :func:`spearman_tables`: ``spearman.csv`` and
  ``summary.csv`` (what the rule ``graphs_spearman`` writes).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..measures.registry import get_measure, select_measures

if TYPE_CHECKING:  # pandas and scipy are imported where they are used: importing this is light
    import pandas as pd

__all__ = ["MEASURES", "SUMMARY_COLUMNS", "bootstrap_mean_rho", "flipped_measures", "measure_names",
           "rho_intervals", "spearman_per_setting", "spearman_tables", "summarise",
           "versus_magdiff"]



def measure_names() -> tuple[str, ...]:
    """The measures of the experiment, in the order of its tables and figures: the registry's
    measures against a reference whose scale (if any) is the reference's, plugins included."""
    return tuple(m.name for m in select_measures(reference=True, free=False,
                                                 scale_rules=("reference",)))


# The built-in ones.
MEASURES = measure_names()

def flipped_measures() -> frozenset[str]:
    """The experiment's measures that *fall* as modes collapse or drop, flipped as ``max - x``
    before the rank correlation: those whose value rises as a set comes closer to the reference
    (the registry's :attr:`~diversity_core.measures.Measure.higher_is_closer`; PRDC). The
    others (MMD, a distance; MagDiff, signed as the loss of diversity) rise as they are."""
    return frozenset(m for m in measure_names() if get_measure(m).higher_is_closer)

# The columns of summary.csv, in order.
SUMMARY_COLUMNS = ["dataset", "experiment", "metric", "mean", "ci_low", "ci_high", "median",
                   "std", "gap", "gap_low", "gap_high", "vs_magdiff", "n_settings",
                   "n_undefined", "rank", "n_clusters", "n_steps"]


def spearman_per_setting(measures):
    """Spearman's ρ of every measure with ``p``, per (dataset, experiment, metric, setting).

    Parameters
    ----------
    measures : pandas.DataFrame with columns dataset, experiment, setting, p, metric, value

    Returns
    -------
    pandas.DataFrame with columns dataset, experiment, metric, setting, spearman. Measures in
    :func:`flipped_measures` are flipped as ``max - x`` (max over the sweep) first. A measure that
    is constant over the sweep has no rank correlation: NaN.
    """
    import pandas as pd
    from scipy.stats import spearmanr

    rows = []
    keys = ["dataset", "experiment", "metric", "setting"]
    flipped = flipped_measures()
    for key, grp in measures.groupby(keys, sort=False):
        grp = grp.sort_values("p")
        v = grp["value"].to_numpy(dtype=float)
        if key[2] in flipped:
            v = v.max() - v
        if len(v) < 2 or np.ptp(v) == 0 or np.ptp(grp["p"].to_numpy()) == 0:
            rho = np.nan
        else:
            rho = float(spearmanr(grp["p"].to_numpy(), v).statistic)
        rows.append(dict(zip(keys, key, strict=True), spearman=rho))
    return pd.DataFrame(rows, columns=keys + ["spearman"])


def _spearman_along_steps(p: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Spearman's ρ of ``values[..., step, metric]`` with ``p[..., step]`` along the step axis
    (average ranks for ties; NaN where either side is constant), rounded to 12 decimals so that
    a measure ranked exactly as ``p`` gets exactly 1 (not 1 - 1e-16)."""
    from scipy.stats import rankdata

    rp = rankdata(p, axis=-1)[..., None]
    rv = rankdata(values, axis=-2)
    rp = rp - rp.mean(axis=-2, keepdims=True)
    rv = rv - rv.mean(axis=-2, keepdims=True)
    num = (rp * rv).sum(axis=-2)
    den = np.sqrt((rp ** 2).sum(axis=-2) * (rv ** 2).sum(axis=-2))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = num / den
    return np.where(den > 0, np.round(rho, 12), np.nan)


def bootstrap_mean_rho(
    p: np.ndarray,
    values: np.ndarray,
    *,
    signs: np.ndarray | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    chunk: int = 100,
) -> np.ndarray:
    """Bootstrap replicates of the mean Spearman ρ over architectures, one sweep.

    The sweep is a crossed design: every architecture is scored at the same steps. Each
    replicate resamples both factors independently, with replacement (Owen's pigeonhole
    bootstrap): the steps (the (p, value) pairs from which each ρ is computed: their number is
    what gives a sweep its power) and the architectures (the random GIN networks the mean runs
    over). A measure that is monotone in p at every step of every architecture has ρ = 1 in
    every replicate, so its interval is exactly [1, 1], and two such measures are visibly tied.

    Parameters
    ----------
    p : array (n_steps,), the sweep's shares
    values : array (n_architectures, n_steps, n_metrics)
    signs : array (n_metrics,) of ±1; -1 flips a measure that falls with p (ρ of ``max - x``
        is minus ρ of ``x``); all +1 if None
    n_boot, seed : number of replicates and their seed
    chunk : replicates computed at once (memory: ``chunk · values.size`` floats)

    Returns
    -------
    replicates : array (n_boot, n_metrics), the mean ρ over the resampled architectures (NaN
        where ρ is undefined for every resampled architecture)
    """
    p = np.asarray(p, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    n_arch, n_steps, n_metrics = values.shape
    if p.shape != (n_steps,):
        raise ValueError(f"p has shape {p.shape}; values have {n_steps} steps.")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1; got {n_boot}.")
    signs = np.ones(n_metrics) if signs is None else np.asarray(signs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, n_metrics))
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        steps = rng.integers(n_steps, size=(b, n_steps))
        archs = rng.integers(n_arch, size=(b, n_arch))
        # rho[r, a, m]: architecture archs[r, a] scored on the steps of replicate r.
        rho = _spearman_along_steps(p[steps][:, None, :],
                                    values[archs[:, :, None], steps[:, None, :], :])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: undefined
            out[start:start + b] = np.nanmean(rho, axis=1) * signs
    return out


def rho_intervals(measures, *, n_boot: int, seed: int, level: float = 0.95):
    """Bootstrap intervals of the mean ρ of every measure, and of its gap to MagDiff.

    For each (dataset, experiment), :func:`bootstrap_mean_rho` on the table's sweep; the
    intervals are percentile intervals at ``level``. The gap ``magdiff - metric`` is taken
    within each replicate (paired: the same steps and architectures), so two measures tied at
    ρ = 1 have the gap interval [0, 0].

    Parameters
    ----------
    measures : pandas.DataFrame with columns dataset, experiment, setting, step, p, metric,
        value (every setting scored at the same steps)
    n_boot, seed : replicates and the seed (each panel its own stream, derived from ``seed``)
    level : coverage of the intervals, in (0, 1)

    Returns
    -------
    pandas.DataFrame with columns dataset, experiment, metric, ci_low, ci_high, gap, gap_low,
    gap_high (``gap`` = mean ρ of MagDiff minus this measure's)
    """
    import pandas as pd

    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}.")
    tails = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    names = [m for m in measure_names() if m in set(measures["metric"])]
    flipped = flipped_measures()
    signs = np.array([-1.0 if m in flipped else 1.0 for m in names])
    rows = []
    for i, ((dataset, experiment), grp) in enumerate(
            measures.groupby(["dataset", "experiment"], sort=True)):
        wide = grp.pivot_table(index=["setting", "step"], columns="metric", values="value",
                               aggfunc="first")
        steps = np.sort(grp["step"].unique())
        settings = np.sort(grp["setting"].unique())
        full = pd.MultiIndex.from_product([settings, steps], names=["setting", "step"])
        if len(wide) != len(full) or not wide.index.equals(full):
            raise ValueError(f"{dataset}/{experiment}: the architectures were not scored at the "
                             "same steps.")
        values = wide.reindex(columns=names).to_numpy().reshape(
            len(settings), len(steps), len(names))
        p = grp.drop_duplicates("step").set_index("step").loc[steps, "p"].to_numpy()
        reps = bootstrap_mean_rho(p, values, signs=signs, n_boot=n_boot,
                                  seed=np.random.SeedSequence([seed, i]).generate_state(1)[0])
        magdiff = names.index("magdiff")
        gaps = reps[:, [magdiff]] - reps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an undefined measure: NaN
            point = np.nanmean(_spearman_along_steps(p[None, :], values), axis=0) * signs
            ci = np.nanpercentile(reps, tails, axis=0)
            gap_ci = np.nanpercentile(gaps, tails, axis=0)
        for j, metric in enumerate(names):
            rows.append({"dataset": dataset, "experiment": experiment, "metric": metric,
                         "ci_low": ci[0, j], "ci_high": ci[1, j],
                         "gap": point[magdiff] - point[j], "gap_low": gap_ci[0, j],
                         "gap_high": gap_ci[1, j]})
    return pd.DataFrame(rows)


def summarise(spearman: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, experiment, metric): the mean, median and standard deviation of ρ over the
    architectures (``n_settings`` of them), how many have an undefined ρ (``n_undefined``), and
    the rank by mean ρ within each (dataset, experiment) (1 = best; ties share a rank).

    Parameters
    ----------
    spearman : :func:`spearman_per_setting`'s frame
    """
    grouped = spearman.groupby(["dataset", "experiment", "metric"], sort=False)["spearman"]
    summary = grouped.agg(mean="mean", median="median", std="std",
                          n_settings="size").reset_index()
    summary["n_undefined"] = grouped.apply(lambda s: int(s.isna().sum())).to_numpy()
    summary["rank"] = (summary.groupby(["dataset", "experiment"])["mean"]
                       .rank(ascending=False, method="min").astype("Int64"))
    return summary


def versus_magdiff(metric: str, low: float, high: float) -> str:
    """What the paired bootstrap interval [``low``, ``high``] of MagDiff's ρ minus this
    measure's says: ``behind`` (above 0), ``ahead`` (below 0), ``tied`` (0 inside), ``undefined``
    (an end not finite), or ``magdiff`` for MagDiff itself."""
    if metric == "magdiff":
        return "magdiff"
    if not (np.isfinite(low) and np.isfinite(high)):
        return "undefined"
    return "behind" if low > 0 else "ahead" if high < 0 else "tied"


def spearman_tables(measures, clusters: Mapping[str, Mapping], *, n_boot: int, seed: int,
                    level: float):
    """``spearman.csv`` and ``summary.csv`` of the experiment, as frames.

    Parameters
    ----------
    measures : pandas.DataFrame, every dataset's measure table (columns dataset, experiment,
        setting, step, p, metric, value)
    clusters : ``{dataset: its clusters.json}`` (``n_clusters``, ``<experiment>_steps``)
    n_boot, seed, level : the bootstrap's replicates, seed and coverage (:func:`rho_intervals`)

    Returns
    -------
    spearman : ρ per (dataset, experiment, metric, setting), sorted by dataset, experiment, the
        order of :data:`MEASURES` and setting
    summary : per (dataset, experiment, metric) the columns of :data:`SUMMARY_COLUMNS`: mean,
        median and standard deviation of ρ over the architectures, the bootstrap interval of the
        mean, MagDiff's mean ρ minus this measure's with its paired interval and what it says
        (:func:`versus_magdiff`), the architectures with an undefined ρ, the rank by mean ρ
        (1 = best; ties share a rank), the number of clusters and of sweep steps
    """
    rho = spearman_per_setting(measures)
    order = {name: i for i, name in enumerate(measure_names())}
    rho = rho.sort_values(["dataset", "experiment", "metric", "setting"],
                          key=lambda c: c.map(order) if c.name == "metric" else c)
    summary = summarise(rho)
    intervals = rho_intervals(measures, n_boot=n_boot, seed=seed, level=level)
    summary = summary.merge(intervals, on=["dataset", "experiment", "metric"], how="left",
                            validate="one_to_one")
    summary["vs_magdiff"] = [versus_magdiff(m, lo, hi) for m, lo, hi in
                             zip(summary["metric"], summary["gap_low"], summary["gap_high"],
                                 strict=True)]
    summary["n_clusters"] = summary["dataset"].map(
        {d: c["n_clusters"] for d, c in clusters.items()})
    summary["n_steps"] = [clusters[d][f"{e}_steps"] for d, e in
                          zip(summary["dataset"], summary["experiment"], strict=True)]
    return rho, summary[SUMMARY_COLUMNS]
