"""Figure 6 (Spearman's rho per measure on one dataset, with the measures along p) and the same
rank correlations for every dataset; each panel marks the mean rho with its bootstrap interval."""

import numpy as np
import pandas as pd
from _figures import MEASURE_COLOURS, plt, save_figure
from _helpers import Input, Inputs, Output, run

from diversity_core.data.graphs import DATASETS
from diversity_core.experiments import graph_mode_collapse as protocol

LABELS = {"magdiff": "MagDiff", "precision": "precision", "recall": "recall",
          "density": "density", "coverage": "coverage", "mmd_rbf": "MMD RBF",
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
         figure_all: Output, figure_all_pdf: Output, figure_dataset: str, ci_level: float):
    """Write FIGURE6 (one dataset) and FIGURE_ALL (every dataset and all pooled), each as PNG
    and PDF; SUMMARY gives the bootstrap intervals (at CI_LEVEL) and the number of steps of each
    sweep."""
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


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
