"""results/leaderboard.*: ranks and ties from result files in the experiments' own formats
(diversity_core.reporting.leaderboard), the committed leaderboard, and the rule on a tiny run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from toy_measures import mean_nn
from workflow_runner import REPO, run_snakemake, tiny_config

from diversity_core.measures import measure_from_function
from diversity_core.measures.registry import MEASURES
from diversity_core.reporting import leaderboard as L


def _write(folder: Path, name: str, rows: list[dict]) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def _curvature(folder, rows):
    """results/curvature/table1.csv: method, mse_mean, mse_std."""
    _write(folder, "curvature/table1.csv",
           [{"method": m, "mse_mean": mean, "mse_std": sd} for m, mean, sd in rows])


def _text(folder, rows):
    """results/text/r2_scores.csv and ranking.csv: (measure, r2_mean, r2_std) on one task and
    model, ranked in one scope by R²."""
    _write(folder, "text/r2_scores.csv",
           [{"task": "story", "model": "all-mpnet-base-v2", "measure": m, "r2_mean": r2,
             "r2_std": sd, "n_sets": 500} for m, r2, sd in rows])
    order = sorted(rows, key=lambda row: -row[1])
    _write(folder, "text/ranking.csv",
           [{"scope": "all", "measure": m, "median_rank": float(i + 1), "mean_rank": i + 1.0,
             "share_best": float(i == 0), "share_last": float(i == len(rows) - 1),
             "n_resamples": 180} for i, (m, _, _) in enumerate(order)])


def _images(folder, curves):
    """results/images/mode_dropping.csv and scenario_agreement.csv from {metric: (sequential
    means, simultaneous means, sd, max_gap)}."""
    rows, agreement = [], []
    for metric, (sequential, simultaneous, sd, gap) in curves.items():
        for scenario, means in (("sequential", sequential), ("simultaneous", simultaneous)):
            rows += [{"scenario": scenario, "fraction": i / 10, "metric": metric, "mean": m,
                      "std": sd} for i, m in enumerate(means)]
        fall = sequential[0] - sequential[-1]
        agreement.append({"metric": metric, "drop_sequential": fall, "drop_simultaneous": fall,
                          "max_gap": gap, "mean_gap": -gap / 2, "onset_sequential": 0.2,
                          "half_sequential": 0.6, "onset_simultaneous": 0.3,
                          "half_simultaneous": 0.7})
    _write(folder, "images/mode_dropping.csv", rows)
    _write(folder, "images/scenario_agreement.csv", agreement)


def _graphs(folder, rows):
    """results/graphs/summary.csv: (metric, mean, ci_low, ci_high) on one panel."""
    _write(folder, "graphs/summary.csv",
           [{"dataset": "lobster", "experiment": "collapse", "metric": m, "mean": mean,
             "ci_low": low, "ci_high": high, "median": mean, "std": 0.01, "gap": 0.0,
             "gap_low": 0.0, "gap_high": 0.0, "vs_magdiff": "behind", "n_settings": 20,
             "n_undefined": 0, "rank": 1, "n_clusters": 10, "n_steps": 41}
            for m, mean, low, high in rows])


def _board(folder, experiments):
    return L.leaderboard(folder, experiments, MEASURES).set_index("measure")


def test_names_resolve_to_the_registry_through_every_spelling():
    cases = {"mag_area": ("magarea", ""), "MagArea": ("magarea", ""), "VS": ("vendi", ""),
             "Vendi Score (cosine)": ("vendi", ""), "-AvgSim (cosine)": ("avgsim", ""),
             "avg_sim": ("avgsim", ""), "DCScore (cosine, tau=1)": ("dcscore", ""),
             "mmd_rbf": ("mmd_rbf", ""), "MagArea (piecewise linear)":
             ("magarea", "piecewise linear"), "MagArea (Euclidean)": ("magarea", "Euclidean"),
             "SVR (distance-matrix quantiles)": ("SVR (distance-matrix quantiles)", ""),
             "renyi2": ("renyi2", "")}
    assert {raw: L.resolve_name(raw, MEASURES) for raw in cases} == cases


def test_overlapping_bands_share_a_rank_and_a_clear_lead_does_not(tmp_path):
    # Lower MSE is better. vendi's band [0.105, 0.125] overlaps MagArea's [0.09, 0.11]; isoscore
    # lies beyond both; avgsim touches none but isoscore.
    _curvature(tmp_path, [("MagArea (piecewise linear)", 0.10, 0.01), ("vendi", 0.115, 0.01),
                          ("isoscore", 0.20, 0.01), ("avg_sim", 0.215, 0.01)])
    board = _board(tmp_path, ["curvature"])
    assert board["curvature_rank"].to_dict() == {"magarea": 1, "vendi": 1, "isoscore": 3,
                                                 "avgsim": 3}
    assert board["curvature_tied"].all()
    # The band moved apart: no tie any more.
    _curvature(tmp_path, [("MagArea (piecewise linear)", 0.10, 0.01), ("vendi", 0.125, 0.01)])
    board = _board(tmp_path, ["curvature"])
    assert board["curvature_rank"].to_dict() == {"magarea": 1, "vendi": 2}
    assert not board["curvature_tied"].any()
    assert board.loc["magarea", "curvature_note"] == "piecewise linear"


def test_a_measure_keeps_its_best_variant(tmp_path):
    # Table 1's SVR on the distance matrix is no diversity measure: no row, though it is best.
    _curvature(tmp_path, [("MagArea (quantile)", 0.30, 0.01),
                          ("MagArea (piecewise linear)", 0.10, 0.01), ("vendi", 0.2, 0.01),
                          ("SVR (distance-matrix quantiles)", 0.02, 0.002)])
    board = _board(tmp_path, ["curvature"])
    assert board.loc["magarea", "curvature"] == pytest.approx(0.10)
    assert board["curvature_rank"].to_dict() == {"magarea": 1, "vendi": 2}


def test_table1_rows_of_other_measures_resolve_by_their_labels(tmp_path):
    """Table 1's row "<label> (piecewise linear)" of a measure besides MagArea is that measure,
    a label with parentheses of its own included; a plugin's by its label too."""
    catalogue = {**MEASURES, "mean_nn": measure_from_function(mean_nn)}  # not registered
    _curvature(tmp_path, [("MagArea (piecewise linear)", 0.10, 0.01),
                          ("MagArea (quantile)", 0.30, 0.01),
                          ("GMStds (unit) (piecewise linear)", 0.50, 0.01),
                          ("Mean NN distance (piecewise linear)", 0.20, 0.01),
                          ("SVR (distance-matrix quantiles)", 0.02, 0.002)])
    board = L.leaderboard(tmp_path, ["curvature"], catalogue).set_index("measure")
    assert board["curvature_rank"].to_dict() == {"magarea": 1, "gmstds_unit": 3, "mean_nn": 2}
    assert board.loc["gmstds_unit", "curvature"] == pytest.approx(0.50)
    assert board.loc["mean_nn", "curvature_note"] == "piecewise linear"
    assert L.resolve_name("GMStds (piecewise linear)", MEASURES) == ("gmstds",
                                                                      "piecewise linear")


def test_higher_is_better_where_the_criterion_says_so(tmp_path):
    _graphs(tmp_path, [("magdiff", 0.99, 0.98, 1.0), ("recall", 0.90, 0.85, 0.95),
                       ("coverage", 0.93, 0.90, 0.96)])
    board = _board(tmp_path, ["graph_mode_collapse"])
    assert board["graphs_rank"].to_dict() == {"magdiff": 1, "recall": 2, "coverage": 2}
    assert board.loc["recall", "graphs_tied"] and not board.loc["magdiff", "graphs_tied"]


def test_an_unknown_measure_gets_a_row_and_absent_tests_are_not_applicable(tmp_path):
    _curvature(tmp_path, [("MagArea (piecewise linear)", 0.10, 0.01)])
    _text(tmp_path, [("mag_area", 0.50, 0.02), ("renyi2", 0.60, 0.02), ("vendi", 0.45, 0.02)])
    board = _board(tmp_path, ["curvature", "text_temperature"])
    assert list(board.index) == ["magarea", "vendi", "renyi2"]  # the registry's order first
    assert board.loc["renyi2", "label"] == "renyi2" and board.loc["vendi", "label"] == "Vendi (VS)"
    assert board["text_rank"].to_dict() == {"magarea": 2, "vendi": 3, "renyi2": 1}
    assert board.loc["renyi2", "text_note"] == "median rank 1 of 3"
    assert pd.isna(board.loc["renyi2", "curvature_rank"])
    assert bool(board.loc["magarea", "proposed_in_paper"]) and not board.loc["renyi2",
                                                                             "proposed_in_paper"]
    markdown = L.render_markdown(board.reset_index())
    row = next(line for line in markdown.splitlines() if line.startswith("| renyi2 |"))
    assert row.split(" | ")[1] == L.NOT_APPLICABLE
    assert "| MagArea ★ |" in markdown


def test_an_experiment_not_configured_has_no_column(tmp_path):
    _curvature(tmp_path, [("MagArea (piecewise linear)", 0.10, 0.01)])
    board = _board(tmp_path, ["curvature", "some_other_experiment"])
    assert [c for c in board.columns if c.endswith("_rank")] == ["curvature_rank"]
    assert L.input_files(["axioms", "curvature"]) == ["curvature/table1.csv", "axioms/axioms.csv"]
    with pytest.raises(ValueError, match=r"text/r2_scores.csv: cannot read it"):
        _board(tmp_path, ["text_temperature"])


def test_a_measure_that_does_not_fall_monotonically_ranks_after_those_that_do(tmp_path):
    falling = [1.0 - 0.1 * i for i in range(10)]
    wobbly = [1.0, 0.9, 1.0, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]  # a rise of 0.1 > sd 0.01
    _images(tmp_path, {"magdiff": (falling, falling, 0.01, 0.20),
                       "recall": (falling, wobbly, 0.01, 0.05),
                       "coverage": (falling, falling, 0.01, 0.50)})
    board = _board(tmp_path, ["image_mode_dropping"])
    assert board["images_note"].to_dict() == {"magdiff": "falls monotonically",
                                              "recall": "not monotone",
                                              "coverage": "falls monotonically"}
    assert board["images_rank"].to_dict() == {"magdiff": 1, "recall": 3, "coverage": 2}


def test_axioms_count_what_holds_and_equal_counts_tie(tmp_path):
    rows = [{"measure": m, "axiom": a, "result": r, "cases_tried": 1, "counterexample": "x"}
            for m, results in (("MagArea (Euclidean)", "hhhh"), ("Vendi Score (cosine)", "hfff"),
                               ("GMStds", "ffhf"))
            for a, r in zip(("effective size", "monotonicity", "twin property", "multi-scale"),
                            ["holds" if c == "h" else "fails" for c in results], strict=True)]
    _write(tmp_path, "axioms/axioms.csv", rows)
    board = _board(tmp_path, ["axioms"])
    assert board["axioms"].to_dict() == {"magarea": 4, "vendi": 1, "gmstds": 1}
    assert board["axioms_rank"].to_dict() == {"magarea": 1, "vendi": 2, "gmstds": 2}


def test_the_committed_leaderboard_is_what_the_committed_results_give():
    experiments = yaml.safe_load((REPO / "config.yaml").read_text())["experiments"]
    board = L.leaderboard(REPO / "results", experiments, MEASURES)
    assert L.render_csv(board) == (REPO / "results" / "leaderboard.csv").read_text()
    assert L.render_markdown(board) == (REPO / "results" / "leaderboard.md").read_text()
    # Every test of the default configuration has a column, every measure a row.
    assert [c for c in board.columns if c.endswith("_rank")] == [
        f"{t.column}_rank" for t in L.TESTS]
    assert {"magarea", "magdiff", "vendi", "recall", "mmd_rbf"} <= set(board["measure"])


def test_the_committed_stability_bounds_lie_inside_the_fold_spread():
    """docs/leaderboard.md: the models' ties are decided by the fold spread, which holds every
    row's stability bound (results/models/stability.csv at Table 2's k)."""
    k = yaml.safe_load((REPO / "config.yaml").read_text())["models"]["k"]
    keys = ["dataset", "preprocessing", "distance", "measure"]
    table = pd.read_csv(REPO / "results" / "models" / "table2.csv")
    bounds = pd.read_csv(REPO / "results" / "models" / "stability.csv")
    bounds = bounds[bounds["k"] == k]
    rows = table.merge(bounds[[*keys, "reach_low", "reach_high"]], on=keys, validate="1:1")
    assert len(rows) == len(table)
    assert (rows["reach_low"] >= rows["accuracy_mean"] - rows["accuracy_std"]).all()
    assert (rows["reach_high"] <= rows["accuracy_mean"] + rows["accuracy_std"]).all()


@pytest.mark.slow
def test_the_rule_on_a_tiny_run_of_one_experiment(tmp_path):
    """`snakemake leaderboard` with the axioms experiment alone: a one-column leaderboard, with
    provenance records that the audit finds in order."""
    results = tmp_path / "results"
    run_snakemake("leaderboard", "--configfile", str(tiny_config("axioms")), "--config",
                  f"results_dir={results}", f"resources_dir={tmp_path / 'resources'}")
    board = pd.read_csv(results / "leaderboard.csv")
    assert [c for c in board.columns if c.endswith("_rank")] == ["axioms_rank"]
    assert board.loc[board["measure"] == "magarea", "axioms_rank"].item() == 1
    for suffix in ("csv", "md", "png", "pdf"):
        assert (results / f"leaderboard.{suffix}.provenance.json").is_file()
    audit = subprocess.run([sys.executable, "-m", "diversity_core", "audit", str(results)],
                           cwd=REPO, capture_output=True, text=True)
    assert audit.returncode == 0 and "no findings" in audit.stdout, audit.stdout + audit.stderr
