"""Figure 5: every measure against the share of points moved to one class, both scenarios."""

import json

import pandas as pd
from _figures import PAIR, plt, save_figure
from _helpers import run, write_provenance

# measure, panel title, y-axis label (with its unit)
PANELS = (
    ("magdiff", "MagDiff / MagArea(ref)", "relative change of MagArea (fraction)"),
    ("mag_half_tconv", "rel. change Mag(0.5 t_ref)", "relative change of Mag (fraction)"),
    ("recall", "recall (k={k})", "share of reference points"),
    ("coverage", "coverage (k={k})", "share of reference points"),
    ("precision", "precision (k={k})", "share of perturbed points"),
    ("density", "density (k={k})", "mean neighbourhoods per point / k"),
    ("vendi", "Vendi Score (cosine; dotted: reference)", "effective number of points"),
)
STYLE = {"sequential": (PAIR[0], "-"), "simultaneous": (PAIR[1], "--")}
DATASET_NAMES = {"fashion_mnist": "Fashion-MNIST (substitute for CIFAR-10)", "cifar10": "CIFAR-10"}


def main(table, info, figure, dataset="fashion_mnist", k=10, n_reference_per_class=None, seed=0):
    """Draw one panel per measure; lines are means over resamples, bands ±1 standard deviation."""
    summary = pd.read_csv(table)
    with open(info) as stream:
        reference = json.load(stream)
    panels = [panel for panel in PANELS if panel[0] in set(summary["metric"])]
    ncols = 4 if len(panels) > 4 else len(panels)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.9 * nrows), squeeze=False,
                             constrained_layout=True)
    for ax, (metric, label, unit) in zip(axes.flat, panels, strict=False):
        for scenario, (colour, dash) in STYLE.items():
            rows = summary[(summary.metric == metric) & (summary.scenario == scenario)]
            rows = rows.sort_values("fraction")
            if rows.empty:
                continue
            ax.plot(rows.fraction, rows["mean"], color=colour, linestyle=dash, marker="o",
                    markersize=3, label=scenario)
            ax.fill_between(rows.fraction, rows["mean"] - rows["std"], rows["mean"] + rows["std"],
                            color=colour, alpha=0.2, linewidth=0)
        if metric == "vendi" and "vendi_ref" in reference:
            ax.axhline(reference["vendi_ref"], color="grey", linewidth=0.8, linestyle=":",
                       label="reference")
        ax.set_title(label.format(k=k))
        ax.set_xlabel("share of points moved to one class (fraction)")
        ax.set_ylabel(unit)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right")
    size = f"sets of 10 × {n_reference_per_class} images, " if n_reference_per_class else ""
    fig.suptitle(
        f"Mode dropping on {DATASET_NAMES.get(dataset, dataset)}, Inception V3 features; "
        f"{size}mean ± sd over {_n_resamples(table)} resamples", fontsize=11)
    for path in save_figure(fig, figure):
        write_provenance(path, config={"dataset": dataset, "k": k,
                                       "n_reference_per_class": n_reference_per_class},
                         seed=seed, table=str(table))


def _n_resamples(table):
    try:
        with open(str(table) + ".provenance.json") as stream:
            return json.load(stream).get("n_resamples", "the")
    except OSError:
        return "the"


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
