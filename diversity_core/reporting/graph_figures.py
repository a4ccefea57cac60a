"""The graph mode-collapse experiment's figures (paper §4.4, Figure 6): rank correlations of
each measure with the degree of perturbation p, and the leading measures' intervals.

Three figures, each a function returning a matplotlib ``Figure`` drawn with the one figure style
(:data:`~diversity_core.reporting.figure_style.STYLE`, applied only while drawing: pyplot's
state is not touched); ``scripts/graphs_figures.py`` reads the tables, calls them and writes
the files:

* :func:`figure6`: one dataset, each mode (collapse, dropping): Spearman's rho per architecture
  (violins and boxes, the mean with its bootstrap interval) above the measures along p;
* :func:`figure_all_datasets`: the rho panels of every dataset, and of all datasets pooled;
* :func:`figure_intervals`: the mean rho of the :data:`LEADING` measures with its interval, on
  a log scale of 1 - rho.

The tables are the experiment's own: ``spearman.csv`` (``dataset, experiment, metric, setting,
spearman``), ``summary.csv`` (per dataset, mode and measure: ``mean, ci_low, ci_high,
vs_magdiff, n_steps``, ...) and the sweeps' ``measures.csv`` (``dataset, experiment, metric, p,
setting, value, n_clusters``). What the experiment knows about its measures (their order, which
fall as a set collapses, the modes) comes in as a :class:`GraphMeasures`: this module lies below
the experiments' and imports none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .figure_style import MEASURE_COLOURS, STYLE

__all__ = ["DATASET_LABELS", "FLOOR", "LEADING", "GraphMeasures", "figure6",
           "figure_all_datasets", "figure_intervals"]

DATASET_LABELS = {"lobster": "Lobster", "grid": "Grid", "community": "Community",
                  "mutag": "MUTAG", "cuneiform": "Cuneiform", "zinc": "ZINC",
                  "proteins": "Proteins", "ego": "Ego"}
# The measures whose mean rho comes near 1: the intervals figure compares them.
LEADING = ("magdiff", "mmd_rbf", "coverage", "recall")
# 1 - rho below this is drawn at the axis' edge, labelled rho = 1 (a log axis has no 0).
FLOOR = 1e-5
# The figures say "MMD RBF" and "MMD linear" where the registry says "MMD² (RBF)" and "MMD²
# (linear)" (kept so that the committed figures stay as they are).
_LABELS = {"mmd_rbf": "MMD RBF", "mmd_linear": "MMD linear"}


@dataclasses.dataclass(frozen=True)
class GraphMeasures:
    """What the figures draw, from the experiment (``experiments.graph_mode_collapse``).

    Attributes
    ----------
    names : the measures, in the figures' order
    labels : each measure's label (the registry's; MMD's are shortened here)
    flipped : the measures that fall as a set loses modes (drawn as max - x along p)
    experiments : the modes (``collapse``, ``dropping``), one column each
    """

    names: tuple[str, ...]
    labels: Mapping[str, str]
    flipped: frozenset[str]
    experiments: tuple[str, ...]

    def label(self, name: str) -> str:
        return _LABELS.get(name, self.labels[name])


def _dataset_label(dataset: str) -> str:
    return DATASET_LABELS.get(dataset, dataset)


def _diamonds(ci_level: float) -> str:
    return (f"◆: mean ρ over the architectures, {ci_level:.0%} bootstrap interval "
            "(architectures and steps resampled)")


def _panel(summary: pd.DataFrame, dataset: str, experiment: str):
    """The summary rows of one panel and its number of steps along p."""
    part = summary[(summary["dataset"] == dataset) & (summary["experiment"] == experiment)]
    return part, int(part["n_steps"].iloc[0])


def _figure(**options):
    from matplotlib.figure import Figure

    return Figure(**options)


def _violins(ax, rho: pd.DataFrame, title: str, measures: GraphMeasures,
             intervals: pd.DataFrame | None = None) -> None:
    """Violins and boxes of rho over the architectures; with ``intervals`` (rows of summary.csv
    for this panel) the mean and its bootstrap interval as a black diamond with error bars, right
    of each box."""
    names = measures.names
    data = [rho.loc[rho["metric"] == m, "spearman"].dropna().to_numpy() for m in names]
    pos = np.arange(len(names))
    keep = [i for i, d in enumerate(data) if len(d) > 1 and np.ptp(d) > 0]
    if keep:
        parts = ax.violinplot([data[i] for i in keep], positions=pos[keep], widths=0.8,
                              showextrema=False)
        for body, i in zip(parts["bodies"], keep, strict=True):
            body.set_facecolor(MEASURE_COLOURS[names[i]])
            body.set_alpha(0.35)
    ax.boxplot([d if len(d) else [np.nan] for d in data], positions=pos, widths=0.25,
               showfliers=True, flierprops={"markersize": 3},
               medianprops={"color": "black"})
    for i, metric in enumerate(names):
        n_nan = int(rho.loc[rho["metric"] == metric, "spearman"].isna().sum())
        if n_nan:
            ax.annotate(f"{n_nan} undef.", (pos[i], -1.0), ha="center", va="bottom", fontsize=7)
    if intervals is not None:
        ci = intervals.set_index("metric").reindex(list(names))
        mean = ci["mean"].to_numpy(dtype=float)
        err = np.abs(np.vstack([mean - ci["ci_low"].to_numpy(dtype=float),
                                ci["ci_high"].to_numpy(dtype=float) - mean]))
        ax.errorbar(pos + 0.3, mean, yerr=err, fmt="D", color="black", markersize=3.5,
                    elinewidth=1.2, capsize=2.5)
    if not any(len(d) for d in data):
        ax.text(0.5, 0.55, "ρ undefined for every measure: no measure changes along p\n"
                "(the perturbation leaves the embedded set unchanged)", ha="center",
                va="center", transform=ax.transAxes, fontsize=9, color="dimgrey")
    ax.axhline(1.0, color="grey", lw=0.6, ls=":")
    ax.set_xticks(pos, [measures.label(m) for m in names], rotation=35, ha="right")
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Spearman's ρ with p (−1 to 1)")
    ax.set_title(title)


def _curves(ax, values: pd.DataFrame, title: str, measures: GraphMeasures) -> None:
    """Each measure min-max scaled per architecture (flipped where it falls): median (line) and
    interquartile range (band) over the architectures."""
    for m in measures.names:
        part = values[values["metric"] == m]
        if part.empty:
            continue
        wide = part.pivot_table(index="p", columns="setting", values="value")
        if m in measures.flipped:
            wide = wide.max() - wide
        span = (wide.max() - wide.min()).replace(0, np.nan)
        scaled = (wide - wide.min()) / span
        med = scaled.median(axis=1)
        q1, q3 = scaled.quantile(0.25, axis=1), scaled.quantile(0.75, axis=1)
        lw = 2.2 if m == "magdiff" else 1.2
        colour = MEASURE_COLOURS[m]
        ax.plot(med.index, med.to_numpy(), color=colour, lw=lw, label=measures.label(m))
        ax.fill_between(med.index, q1.to_numpy(), q3.to_numpy(), color=colour, alpha=0.12)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.6, ls=":")
    ax.set_xlabel("degree of perturbation p (share of clusters perturbed)")
    ax.set_ylabel("measure, min-max scaled per architecture (0 to 1)\n"
                  "(precision, recall, density, coverage: max − x)")
    ax.set_title(title)


def _intervals(ax, summary: pd.DataFrame, datasets: Sequence[str], title: str,
               measures: GraphMeasures) -> None:
    """Mean rho and its bootstrap interval of the LEADING measures, dataset by dataset, on a
    log scale of 1 - rho (rho grows to the right); a measure tied with MagDiff (its paired gap's
    interval holds 0) is drawn hollow."""
    ticks = []
    for i, dataset in enumerate(datasets):
        part = summary[summary["dataset"] == dataset].set_index("metric")
        for j, metric in enumerate(LEADING):
            y = i * (len(LEADING) + 1) + j
            row = part.loc[metric]
            x, low, high = (max(1 - row[c], FLOOR) for c in ("mean", "ci_high", "ci_low"))
            tied = row["vs_magdiff"] in ("tied", "ahead")
            colour = MEASURE_COLOURS[metric]
            ax.errorbar([x], [y], xerr=[[x - low], [high - x]], fmt="o", markersize=5,
                        color=colour, mfc="white" if tied else colour, elinewidth=1.4,
                        capsize=2.5, label=measures.label(metric) if i == 0 else None)
        ticks.append((i * (len(LEADING) + 1) + (len(LEADING) - 1) / 2,
                      _dataset_label(dataset)))
    ax.set_xscale("log")
    ax.set_xlim(1.0, FLOOR / 2)  # reversed: rho grows to the right
    values = [FLOOR, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    ax.set_xticks(values, ["1", "0.9999", "0.999", "0.99", "0.9", "0"])
    ax.minorticks_off()
    ax.set_yticks(*zip(*ticks, strict=True))
    ax.set_xlabel("mean Spearman's ρ with p (log scale of 1 − ρ; ρ = 1 at the right edge)")
    ax.set_title(title)


def figure6(rho: pd.DataFrame, summary: pd.DataFrame, values: pd.DataFrame, *, dataset: str,
            measures: GraphMeasures, ci_level: float):
    """Figure 6: ``dataset``'s rho per architecture in each mode (above) and every measure
    along p (below); ``values``: the sweeps' measures of every dataset."""
    import matplotlib

    n_arch = rho["setting"].nunique()
    clusters = values.groupby("dataset")["n_clusters"].first().to_dict()
    name = _dataset_label(dataset)
    with matplotlib.rc_context(STYLE):
        fig = _figure(figsize=(11, 9), layout="constrained")
        axes = fig.subplots(2, 2)
        for col, experiment in enumerate(measures.experiments):
            title = f"{name}: mode {experiment}"
            sel = (rho["dataset"] == dataset) & (rho["experiment"] == experiment)
            intervals, n_steps = _panel(summary, dataset, experiment)
            _violins(axes[0, col], rho[sel], f"{title}: ρ per architecture ({n_steps} steps)",
                     measures, intervals)
            vsel = (values["dataset"] == dataset) & (values["experiment"] == experiment)
            _curves(axes[1, col], values[vsel], f"{title}: measures along p", measures)
        handles, labels = axes[1, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
        fig.suptitle(f"{name} ({clusters[dataset]} clusters, {n_arch} random GIN "
                     "architectures): rank correlation of each measure with the degree of "
                     f"perturbation p (ρ = 1: ideal)\n{_diamonds(ci_level)}", fontsize=11)
    return fig


def figure_all_datasets(rho: pd.DataFrame, summary: pd.DataFrame, values: pd.DataFrame, *,
                        datasets: Sequence[str], measures: GraphMeasures, ci_level: float):
    """The rho panels of every dataset of ``datasets`` found in ``rho`` (in that order) and,
    with more than one, of all datasets pooled: one row each, a column per mode."""
    import matplotlib

    n_arch = rho["setting"].nunique()
    clusters = values.groupby("dataset")["n_clusters"].first().to_dict()
    present = set(rho["dataset"])
    shown = [d for d in datasets if d in present]
    panels = shown + (["all"] if len(shown) > 1 else [])
    with matplotlib.rc_context(STYLE):
        fig = _figure(figsize=(11, 3.3 * len(panels)), constrained_layout=True)
        axes = fig.subplots(len(panels), 2, squeeze=False)
        for row, dataset in enumerate(panels):
            for col, experiment in enumerate(measures.experiments):
                sel = rho["experiment"] == experiment
                intervals = None
                if dataset == "all":
                    label = "all datasets pooled"
                else:
                    sel &= rho["dataset"] == dataset
                    intervals, n_steps = _panel(summary, dataset, experiment)
                    label = (f"{_dataset_label(dataset)} ({clusters[dataset]} clusters, "
                             f"{n_steps} steps)")
                _violins(axes[row, col], rho[sel], f"{label}: mode {experiment}", measures,
                         intervals)
                if row < len(panels) - 1:
                    axes[row, col].set_xticklabels([])
        fig.suptitle(f"Rank correlation with p on every dataset ({n_arch} random GIN "
                     f"architectures)\n{_diamonds(ci_level)}", fontsize=11)
    return fig


def figure_intervals(rho: pd.DataFrame, summary: pd.DataFrame, *, datasets: Sequence[str],
                     measures: GraphMeasures, ci_level: float):
    """The :data:`LEADING` measures' mean rho with its interval, one row per dataset of
    ``datasets`` found in ``rho``, a panel per mode; hollow: tied with MagDiff."""
    import matplotlib

    n_arch = rho["setting"].nunique()
    present = set(rho["dataset"])
    shown = [d for d in datasets if d in present]
    with matplotlib.rc_context(STYLE):
        fig = _figure(figsize=(11, 1.1 + 1.15 * len(shown)), layout="constrained")
        axes = fig.subplots(1, 2, sharey=True)
        for ax, experiment in zip(axes, measures.experiments, strict=True):
            _intervals(ax, summary[summary["experiment"] == experiment], shown,
                       f"mode {experiment}", measures)
        axes[0].invert_yaxis()  # shared: the first dataset, and MagDiff within each, on top
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
        fig.suptitle(f"Mean ρ of the leading measures with its {ci_level:.0%} bootstrap "
                     f"interval ({n_arch} architectures); hollow: tied with MagDiff (the "
                     "interval of the paired gap holds 0)", fontsize=10)
    return fig
