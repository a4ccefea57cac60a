"""Figure 6 (Spearman's rho per measure on one dataset, with the measures along p), the same
rank correlations for every dataset (each panel marks the mean rho with its bootstrap interval),
and the intervals of the leading measures on a scale that separates values near 1."""

import numpy as np
import pandas as pd
from _figures import MEASURE_COLOURS, plt, save_figure
from _helpers import Input, Inputs, Output, run

from diversity_core.data.graphs import DATASETS
from diversity_core.experiments import graph_mode_collapse as protocol
from diversity_core.measures.registry import get_measure

# The registry's labels, except MMD's: the figures say "MMD RBF" and "MMD linear" where the
# registry says "MMD² (RBF)" and "MMD² (linear)" (kept so that the committed figures stay as
# they are).
LABELS = {m: get_measure(m).label for m in protocol.MEASURES} | {"mmd_rbf": "MMD RBF",
                                                                "mmd_linear": "MMD linear"}
COLOURS = {m: MEASURE_COLOURS[m] for m in LABELS}
DATASET_LABELS = {"lobster": "Lobster", "grid": "Grid", "community": "Community",
                  "mutag": "MUTAG", "cuneiform": "Cuneiform", "zinc": "ZINC",
                  "proteins": "Proteins", "ego": "Ego"}


def _violins(ax, rho: pd.DataFrame, title: str, intervals: pd.DataFrame | None = None) -> None:
    """Violins and boxes of rho over the architectures; with ``intervals`` (rows of summary.csv
    for this panel) the mean and its bootstrap interval as a black diamond with error bars, right
    of each box."""
    data = [rho.loc[rho["metric"] == m, "spearman"].dropna().to_numpy() for m in protocol.MEASURES]
    pos = np.arange(len(protocol.MEASURES))
    keep = [i for i, d in enumerate(data) if len(d) > 1 and np.ptp(d) > 0]
    if keep:
        parts = ax.violinplot([data[i] for i in keep], positions=pos[keep], widths=0.8,
                              showextrema=False)
        for body, i in zip(parts["bodies"], keep, strict=True):
            body.set_facecolor(COLOURS[protocol.MEASURES[i]])
            body.set_alpha(0.35)
    ax.boxplot([d if len(d) else [np.nan] for d in data], positions=pos, widths=0.25,
               showfliers=True, flierprops={"markersize": 3},
               medianprops={"color": "black"})
    for i, metric in enumerate(protocol.MEASURES):
        n_nan = int(rho.loc[rho["metric"] == metric, "spearman"].isna().sum())
        if n_nan:
            ax.annotate(f"{n_nan} undef.", (pos[i], -1.0), ha="center", va="bottom", fontsize=7)
    if intervals is not None:
        ci = intervals.set_index("metric").reindex(list(protocol.MEASURES))
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
    ax.set_xticks(pos, [LABELS[m] for m in protocol.MEASURES], rotation=35, ha="right")
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("Spearman's ρ with p (−1 to 1)")
    ax.set_title(title)


# The measures whose mean rho comes near 1: the intervals figure compares them.
LEADING = ("magdiff", "mmd_rbf", "coverage", "recall")
# 1 - rho below this is drawn at the axis' edge, labelled rho = 1 (a log axis has no 0).
FLOOR = 1e-5


def _intervals(ax, summary: pd.DataFrame, datasets: list[str], title: str) -> None:
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
            ax.errorbar([x], [y], xerr=[[x - low], [high - x]], fmt="o", markersize=5,
                        color=COLOURS[metric], mfc="white" if tied else COLOURS[metric],
                        elinewidth=1.4, capsize=2.5, label=LABELS[metric] if i == 0 else None)
        ticks.append((i * (len(LEADING) + 1) + (len(LEADING) - 1) / 2,
                      DATASET_LABELS.get(dataset, dataset)))
    ax.set_xscale("log")
    ax.set_xlim(1.0, FLOOR / 2)  # reversed: rho grows to the right
    values = [FLOOR, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    ax.set_xticks(values, ["1", "0.9999", "0.999", "0.99", "0.9", "0"])
    ax.minorticks_off()
    ax.set_yticks(*zip(*ticks, strict=True))
    ax.set_xlabel("mean Spearman's ρ with p (log scale of 1 − ρ; ρ = 1 at the right edge)")
    ax.set_title(title)


def _curves(ax, values: pd.DataFrame, title: str) -> None:
    """Each measure min-max scaled per architecture (flipped where it falls): median (line) and
    interquartile range (band) over the architectures."""
    for m in protocol.MEASURES:
        part = values[values["metric"] == m]
        if part.empty:
            continue
        wide = part.pivot_table(index="p", columns="setting", values="value")
        if m in protocol.FLIPPED_MEASURES:
            wide = wide.max() - wide
        span = (wide.max() - wide.min()).replace(0, np.nan)
        scaled = (wide - wide.min()) / span
        med = scaled.median(axis=1)
        q1, q3 = scaled.quantile(0.25, axis=1), scaled.quantile(0.75, axis=1)
        lw = 2.2 if m == "magdiff" else 1.2
        ax.plot(med.index, med.to_numpy(), color=COLOURS[m], lw=lw, label=LABELS[m])
        ax.fill_between(med.index, q1.to_numpy(), q3.to_numpy(), color=COLOURS[m], alpha=0.12)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.6, ls=":")
    ax.set_xlabel("degree of perturbation p (share of clusters perturbed)")
    ax.set_ylabel("measure, min-max scaled per architecture (0 to 1)\n"
                  "(precision, recall, density, coverage: max − x)")
    ax.set_title(title)


def main(spearman: Input, summary: Input, measures: Inputs, figure6: Output, figure6_pdf: Output,
         figure_all: Output, figure_all_pdf: Output, figure_intervals: Output,
         figure_intervals_pdf: Output, figure_dataset: str, ci_level: float):
    """Write FIGURE6 (one dataset), FIGURE_ALL (every dataset and all pooled) and
    FIGURE_INTERVALS (the leading measures' intervals), each as PNG and PDF; SUMMARY gives the
    bootstrap intervals (at CI_LEVEL) and the number of steps of each sweep."""
    diamonds = (f"◆: mean ρ over the architectures, {ci_level:.0%} bootstrap interval "
                "(architectures and steps resampled)")
    rho = pd.read_csv(spearman)
    summ = pd.read_csv(summary)
    values = pd.concat([pd.read_csv(p) for p in measures], ignore_index=True)
    n_arch = rho["setting"].nunique()
    clusters = values.groupby("dataset")["n_clusters"].first().to_dict()

    def panel(dataset, experiment):
        part = summ[(summ["dataset"] == dataset) & (summ["experiment"] == experiment)]
        return part, int(part["n_steps"].iloc[0])

    name = DATASET_LABELS.get(figure_dataset, figure_dataset)
    fig, axes = plt.subplots(2, 2, figsize=(11, 9), layout="constrained")
    for col, experiment in enumerate(protocol.EXPERIMENTS):
        title = f"{name}: mode {experiment}"
        sel = (rho["dataset"] == figure_dataset) & (rho["experiment"] == experiment)
        intervals, n_steps = panel(figure_dataset, experiment)
        _violins(axes[0, col], rho[sel], f"{title}: ρ per architecture ({n_steps} steps)",
                 intervals)
        vsel = (values["dataset"] == figure_dataset) & (values["experiment"] == experiment)
        _curves(axes[1, col], values[vsel], f"{title}: measures along p")
    handles, labels = axes[1, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    fig.suptitle(f"{name} ({clusters[figure_dataset]} clusters, {n_arch} random GIN "
                 "architectures): rank correlation of each measure with the degree of "
                 f"perturbation p (ρ = 1: ideal)\n{diamonds}", fontsize=11)
    save_figure(fig, figure6, pdf=figure6_pdf)

    present = set(rho["dataset"])
    datasets = [d for d in DATASETS if d in present]
    panels = datasets + (["all"] if len(datasets) > 1 else [])
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 3.3 * len(panels)),
                             constrained_layout=True, squeeze=False)
    for row, dataset in enumerate(panels):
        for col, experiment in enumerate(protocol.EXPERIMENTS):
            sel = rho["experiment"] == experiment
            intervals = None
            if dataset == "all":
                label = "all datasets pooled"
            else:
                sel &= rho["dataset"] == dataset
                intervals, n_steps = panel(dataset, experiment)
                label = (f"{DATASET_LABELS.get(dataset, dataset)} ({clusters[dataset]} "
                         f"clusters, {n_steps} steps)")
            _violins(axes[row, col], rho[sel], f"{label}: mode {experiment}", intervals)
            if row < len(panels) - 1:
                axes[row, col].set_xticklabels([])
    fig.suptitle(f"Rank correlation with p on every dataset ({n_arch} random GIN architectures)"
                 f"\n{diamonds}", fontsize=11)
    save_figure(fig, figure_all, pdf=figure_all_pdf, dpi=120)

    fig, axes = plt.subplots(1, 2, figsize=(11, 1.1 + 1.15 * len(datasets)), sharey=True,
                             layout="constrained")
    for ax, experiment in zip(axes, protocol.EXPERIMENTS, strict=True):
        _intervals(ax, summ[summ["experiment"] == experiment], datasets, f"mode {experiment}")
    axes[0].invert_yaxis()  # shared: the first dataset, and MagDiff within each, on top
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    fig.suptitle(f"Mean ρ of the leading measures with its {ci_level:.0%} bootstrap interval "
                 f"({n_arch} architectures); hollow: tied with MagDiff (the interval of the "
                 "paired gap holds 0)", fontsize=10)
    save_figure(fig, figure_intervals, pdf=figure_intervals_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
