"""The R² of every measure against the highest temperature included (``max_temperature.csv``):
one panel per (embedding model, task), one line per measure; the ranked measures solid, the
measures reported beside them dashed. Where the MagArea and VS lines cross, the ranking flips."""

import pandas as pd
from _contract import Input, Output
from _figures import MEASURE_COLOURS, plt, save_figure
from _job import run

from diversity_core.measures.registry import get_measure, labels


def draw(table: pd.DataFrame, measures, path, pdf=None) -> tuple:
    tasks = list(dict.fromkeys(table["task"]))
    models = list(dict.fromkeys(table["model"]))
    ranked = set(table.loc[table["rank"].notna(), "measure"])
    fig, axes = plt.subplots(len(models), len(tasks), figsize=(3.6 * len(tasks),
                             2.8 * len(models) + 0.6), sharex=True, sharey=True, squeeze=False)
    for row, model in zip(axes, models, strict=True):
        for ax, task in zip(row, tasks, strict=True):
            cell = table[(table["task"] == task) & (table["model"] == model)]
            for measure in measures:
                line = cell[cell["measure"] == measure].sort_values("max_temperature")
                ax.plot(line["max_temperature"], line["r2_mean"], marker="o", ms=3,
                        lw=1.4 if measure in ranked else 1.0,
                        ls="-" if measure in ranked else "--",
                        color=MEASURE_COLOURS[get_measure(measure).name],
                        label=labels([measure], paper=True)[measure])
            ax.axhline(0.0, color="grey", lw=0.6, ls=":")
            ax.set_title(f"{task}, {model}", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("highest temperature included τ_max")
    for row in axes:
        row[0].set_ylabel("R² (isotonic, CV)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Predicting the temperature from sets with τ ≤ τ_max (solid: ranked measures; "
                 "dashed: reported beside them)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, pdf=pdf)


def main(table: Input, figure: Output, figure_pdf: Output, measures: list):
    """Draw FIGURE (PNG) and FIGURE_PDF from TABLE (.csv)."""
    draw(pd.read_csv(table), measures, figure, figure_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
