"""End to end: the curvature experiment on a tiny configuration, twice, from an empty folder."""

import json

import numpy as np
import pandas as pd
import pytest
from workflow_runner import run_tiny

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    first = tmp_path_factory.mktemp("run1")
    second = tmp_path_factory.mktemp("run2")
    run_tiny("curvature", first)
    run_tiny("curvature", second)
    return first / "results" / "curvature", second / "results" / "curvature"


def test_outputs_and_table(two_runs):
    out, _ = two_runs
    table = pd.read_csv(out / "table1.csv")
    assert list(table.columns) == ["method", "mse_mean", "mse_std"]
    assert set(table["method"]) >= {"MagArea (piecewise linear)", "MagArea (quantile)"}
    assert np.all(table["mse_mean"] >= 0) and np.all(np.isfinite(table["mse_std"]))
    assert (out / "figure2.png").stat().st_size > 10_000
    for artifact in ("table1.csv", "figure2.png"):
        record = json.loads((out / f"{artifact}.provenance.json").read_text())
        assert record["config"]["curvature"]["n_points"] == 60
        assert record["packages"]["numpy"] == np.__version__
        assert "commit" in record["git"]
    # Every rule wrote its log; intermediate artifacts are there for auditing.
    assert {p.name for p in (out / "logs").iterdir()} >= {"generate.log", "t_cut.log",
                                                          "table.log", "figure.log"}
    features = pd.read_csv(out / "interim" / "features.csv")
    assert len(features) == 11 * 3 + 6
    t_cut = json.loads((out / "interim" / "t_cut.json").read_text())["t_cut"]
    assert t_cut == pytest.approx(np.median(features["t_conv"]))
    magnitude = np.load(out / "interim" / "magnitude" / "chunk0.npz")
    assert magnitude["magnitude"].shape[1] == magnitude["ts"].size
    assert np.all(magnitude["magnitude"][:, 0] == 1.0)  # Mag(0) = 1


def test_scale_sensitivity(two_runs):
    out, _ = two_runs
    table = pd.read_csv(out / "scale_sensitivity.csv")
    # Tiny configuration: 5 fixed limits and targets 0.5, 0.95; both distances, both features,
    # both regressions.
    assert len(table) == 2 * 2 * 2 * (5 + 2)
    assert set(table["variant"]) == {"true", "turkes"}
    assert set(table["feature"]) == {"MagArea", "MagArea (log t)"}
    fixed = table[table["limit"] == "t_cut"]
    np.testing.assert_allclose(np.sort(fixed["t_cut"].unique()), np.geomspace(5, 300, 5),
                               rtol=1e-5)
    assert np.all(np.diff(fixed.groupby("t_cut")["mag_fraction"].first()) > 0)
    # Today's default is the median convergence scale of the true distance, and the study
    # reproduces Table 1 there (its own integrals, the same folds).
    default = table[table["default"]]
    assert set(default["variant"]) == {"true"} and set(default["target"]) == {0.95}
    t_cut = json.loads((out / "interim" / "t_cut.json").read_text())["t_cut"]
    np.testing.assert_allclose(default["t_cut"], t_cut, rtol=1e-6)
    np.testing.assert_allclose(default["mag_fraction"], 0.95, rtol=1e-6)
    table1 = pd.read_csv(out / "table1.csv").set_index("method")["mse_mean"]
    plain = default[default["feature"] == "MagArea"].set_index("regression")["mse_mean"]
    assert plain["piecewise linear"] == pytest.approx(table1["MagArea (piecewise linear)"],
                                                      abs=1e-4)
    assert plain["quantile"] == pytest.approx(table1["MagArea (quantile)"], abs=1e-4)
    # The Turkeš variant halves K < 0 distances, which doubles their convergence scales: the
    # median rises.
    q95 = table[(table["target"] == 0.95) & (table["feature"] == "MagArea")]
    median_t_conv = q95.groupby("variant")["t_cut"].first()
    assert median_t_conv["turkes"] > median_t_conv["true"]
    spread = pd.read_csv(out / "fold_spread.csv")
    assert set(spread["design"]) == {"all training clouds", "one cloud each of 6 curvatures",
                                     "one cloud each of 11 curvatures", "test clouds"}
    assert set(spread["n_clouds"]) == {33, 6, 11}
    assert np.all(spread["fold_sd_min"] <= spread["fold_sd_median"])
    assert (out / "scale_sensitivity.png").stat().st_size > 10_000
    record = json.loads((out / "scale_sensitivity.csv.provenance.json").read_text())
    assert record["quadrature_error_estimate"] <= 1e-5  # the tiny configuration's bound
    assert record["table1_mag_area_max_rel_diff"] <= 1e-5
    assert {"scale_grid_chunk0.log", "sensitivity.log"} <= {p.name for p in
                                                           (out / "logs").iterdir()}


def test_rerun_is_identical(two_runs):
    first, second = two_runs
    for name in ("table1.csv", "interim/features.csv", "interim/t_cut.json",
                 "scale_sensitivity.csv", "fold_spread.csv"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
