"""Figure 6 (Spearman's rho per measure on one dataset, with the measures along p), the same
rank correlations for every dataset (each panel marks the mean rho with its bootstrap interval),
and the intervals of the leading measures on a scale that separates values near 1
(the drawing: diversity_core.reporting.graph_figures)."""

import pandas as pd
from _contract import Input, Inputs, Output
from _figures import save_figure
from _job import run

from diversity_core.data.graphs import DATASETS
from diversity_core.experiments import graph_mode_collapse as protocol
from diversity_core.measures.registry import get_measure
from diversity_core.reporting import graph_figures


def graph_measures() -> graph_figures.GraphMeasures:
    """The experiment's measures (plugins included) with their registry labels."""
    names = protocol.measure_names()
    return graph_figures.GraphMeasures(
        names=names, labels={m: get_measure(m).label for m in names},
        flipped=protocol.flipped_measures(), experiments=tuple(protocol.EXPERIMENTS))


def main(spearman: Input, summary: Input, measures: Inputs, figure6: Output, figure6_pdf: Output,
         figure_all: Output, figure_all_pdf: Output, figure_intervals: Output,
         figure_intervals_pdf: Output, figure_dataset: str, ci_level: float):
    """Write FIGURE6 (one dataset), FIGURE_ALL (every dataset and all pooled) and
    FIGURE_INTERVALS (the leading measures' intervals), each as PNG and PDF; SUMMARY gives the
    bootstrap intervals (at CI_LEVEL) and the number of steps of each sweep."""
    rho = pd.read_csv(spearman)
    summ = pd.read_csv(summary)
    values = pd.concat([pd.read_csv(p) for p in measures], ignore_index=True)
    shared = {"measures": graph_measures(), "ci_level": ci_level}
    save_figure(graph_figures.figure6(rho, summ, values, dataset=figure_dataset, **shared),
                figure6, pdf=figure6_pdf)
    save_figure(graph_figures.figure_all_datasets(rho, summ, values, datasets=DATASETS,
                                                  **shared),
                figure_all, pdf=figure_all_pdf, dpi=120)
    save_figure(graph_figures.figure_intervals(rho, summ, datasets=DATASETS, **shared),
                figure_intervals, pdf=figure_intervals_pdf)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
