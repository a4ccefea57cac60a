"""Figure 5: every measure against the share of points moved to one class, both scenarios."""

import json

import pandas as pd
from _contract import Input, Output
from _figures import PAIR, plt, save_figure
from _job import run

from diversity_core.data.images import CLASS_NAMES
from diversity_core.experiments.image_mode_dropping import MEASURES
from diversity_core.measures.registry import get_measure


def _label(name: str) -> str:
    return get_measure(name).label


# How Figure 5 titles and labels the paper's panels: measure -> panel title, y-axis label (with
# its unit). Any other measure's panel: its registry label and "value".
CAPTIONS = {
    "magdiff": (f"{_label('magdiff')} / {_label('magarea')}(ref)",
                "relative change of MagArea (fraction)"),
    "mag_half_tconv": ("rel. change Mag(0.5 t_ref)", "relative change of Mag (fraction)"),
    "recall": (_label("recall") + " (k={k})", "share of reference points"),
    "coverage": (_label("coverage") + " (k={k})", "share of reference points"),
    "precision": (_label("precision") + " (k={k})", "share of perturbed points"),
    "density": (_label("density") + " (k={k})", "mean neighbourhoods per point / k"),
    # the registry's description, "Vendi Score (cosine)", with what the dotted line is
    "vendi": (get_measure("vendi").description.removesuffix(")") + "; dotted: reference)",
              "effective number of points"),
}


def panels(metrics) -> list[tuple[str, str, str]]:
    """(measure, title, y-axis label) of every measure scored: Figure 5's in its order, then the
    others."""
    present = set(metrics)
    order = [m for m in MEASURES if m in present] + sorted(present - set(MEASURES))
    return [(m, *CAPTIONS.get(m, (_label(m).replace("{", "{{").replace("}", "}}"), "value")))
            for m in order]


STYLE = {"sequential": (PAIR[0], "-"), "simultaneous": (PAIR[1], "--")}
DATASET_NAMES = {"fashion_mnist": "Fashion-MNIST (substitute for CIFAR-10)", "cifar10": "CIFAR-10"}


def main(table: Input, info: Input, figure: Output, figure_pdf: Output, dataset: str, k: int,
         n_reference_per_class: int, repeats_per_class: int):
    """Draw one panel per measure; lines are means over resamples (each class preferred
    REPEATS_PER_CLASS times), bands ±1 standard deviation."""
    summary = pd.read_csv(table)
    with open(info) as stream:
        reference = json.load(stream)
    shown = panels(summary["metric"])
    ncols = 4 if len(shown) > 4 else len(shown)
    nrows = -(-len(shown) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.9 * nrows), squeeze=False,
                             constrained_layout=True)
    for ax, (metric, label, unit) in zip(axes.flat, shown, strict=False):
        for scenario, (colour, dash) in STYLE.items():
            rows = summary[(summary.metric == metric) & (summary.scenario == scenario)]
            rows = rows.sort_values("fraction")
            if rows.empty:
                continue
            ax.plot(rows.fraction, rows["mean"], color=colour, linestyle=dash, marker="o",
                    markersize=3, label=scenario)
            ax.fill_between(rows.fraction, rows["mean"] - rows["std"], rows["mean"] + rows["std"],
                            color=colour, alpha=0.2, linewidth=0)
        if not get_measure(metric).needs_reference and f"{metric}_ref" in reference:
            ax.axhline(reference[f"{metric}_ref"], color="grey", linewidth=0.8, linestyle=":",
                       label="reference")
        ax.set_title(label.format(k=k))
        ax.set_xlabel("share of points moved to one class (fraction)")
        ax.set_ylabel(unit)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right")
    n_classes = len(CLASS_NAMES[dataset])
    fig.suptitle(
        f"Mode dropping on {DATASET_NAMES.get(dataset, dataset)}, Inception V3 features; "
        f"sets of {n_classes} × {n_reference_per_class} images, mean ± sd over "
        f"{n_classes * repeats_per_class} resamples", fontsize=11)
    save_figure(fig, figure, pdf=figure_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
