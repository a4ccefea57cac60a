"""End to end: the curvature experiment on a tiny configuration, twice, from an empty folder."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from workflow_runner import REPO, run_snakemake, run_tiny, tiny_config

import diversity_core as dc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_runs(tiny_runs):
    """The shared tiny run (read only) and a rerun from an empty folder."""
    first = tiny_runs("curvature")
    second = tiny_runs.rerun("curvature")
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
        assert record["exponential"] == dc.magnitude.EXPONENTIAL  # the same package ran the rules
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
    assert record["extra"]["quadrature_error_estimate"] <= 1e-5  # the tiny configuration's bound
    assert record["extra"]["table1_mag_area_max_rel_diff"] <= 1e-5
    assert {"scale_grid_chunk0.log", "sensitivity.log"} <= {p.name for p in
                                                           (out / "logs").iterdir()}


def test_rerun_is_identical(two_runs):
    first, second = two_runs
    for name in ("table1.csv", "interim/features.csv", "interim/t_cut.json",
                 "scale_sensitivity.csv", "fold_spread.csv"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    # Every rule wrote a record beside every output, interim ones too, and a rerun reproduces
    # each byte for byte (no timestamps, no absolute paths).
    records = sorted(p.relative_to(first) for p in first.rglob("*.provenance.json"))
    assert len(records) == 16 and {p.name for p in records} >= {
        "clouds.npz.provenance.json", "t_cut.json.provenance.json",
        "chunk0.npz.provenance.json", "features.csv.provenance.json"}
    for name in records:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    record = json.loads((first / "table1.csv.provenance.json").read_text())
    assert record["rule"] == "curvature_table" and record["script"]["path"] == \
        "scripts/curvature_table.py"
    assert {e["path"] for e in record["inputs"]["functions"]} == {
        "curvature/interim/magnitude/chunk0.npz", "curvature/interim/magnitude/chunk1.npz"}


def _audit(results, *options):
    done = subprocess.run([sys.executable, "-m", "diversity_core", "audit", str(results),
                           "--json", *options], cwd=REPO, capture_output=True, text=True)
    report = json.loads(done.stdout)
    statuses = {f["relative_path"]: f["status"] for f in report["files"]}
    chains = {c["result"]: c for c in report["chains"]}
    return done.returncode, statuses, chains


def test_a_hand_edited_t_cut_is_caught_by_the_audit(two_runs, tmp_path):
    """interim/t_cut.json edited by hand (t_cut x 1.5). With its mtime put back,
    Snakemake sees nothing to do, yet `snakemake audit` and `python -m diversity_core audit`
    name the file (changed) and the chunks made from it (stale); after a rerun that rebuilds
    Table 1 from the edited file, the audit still names it and marks Table 1's chain."""
    first, _ = two_runs
    results = tmp_path / "results"
    copy = results / "curvature"
    shutil.copytree(first, copy)  # timestamps kept: everything is up to date
    assert _audit(results)[0] == 0
    t_cut = copy / "interim" / "t_cut.json"
    stat = t_cut.stat()
    edited = json.loads(t_cut.read_text())
    edited["t_cut"] *= 1.5
    t_cut.write_text(json.dumps(edited, indent=2))
    os.utime(t_cut, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    done = run_tiny("curvature", tmp_path)
    assert "Nothing to be done" in done.stdout + done.stderr
    done = run_snakemake("audit", "--configfile", str(tiny_config("curvature")), "--config",
                         f"results_dir={results}", f"resources_dir={tmp_path / 'resources'}",
                         "--nolock", check=False)
    assert done.returncode != 0  # the target fails on a finding
    assert f"changed    {t_cut}" in done.stdout and "1 changed" in done.stdout
    assert f"changed    {t_cut}" in (results / "logs" / "audit.log").read_text()
    code, statuses, chains = _audit(results)
    assert code == 1
    assert statuses["curvature/interim/t_cut.json"] == "changed"
    assert statuses["curvature/interim/magnitude/chunk0.npz"] == "stale"
    assert statuses["curvature/scale_sensitivity.csv"] == "stale"
    assert statuses["curvature/table1.csv"] == "ok"  # its own inputs are those it recorded
    table1 = chains[str(copy / "table1.csv")]
    assert table1["status"] == "affected" and str(t_cut) in table1["findings"]

    # The user reruns as the issue did: the edit is newer, Snakemake rebuilds from it.
    before = (copy / "table1.csv").read_bytes()
    t_cut.touch()
    run_tiny("curvature", tmp_path)
    assert (copy / "table1.csv").read_bytes() != before  # Table 1 moved
    code, statuses, chains = _audit(results)
    assert code == 1
    assert statuses["curvature/interim/t_cut.json"] == "changed"  # not what its rule made
    assert statuses["curvature/interim/magnitude/chunk0.npz"] == "ok"  # made from the edit
    assert chains[str(copy / "table1.csv")]["status"] == "affected"


def test_truncated_interim_file_is_named_and_leaves_no_stale_record(two_runs, tmp_path):
    """A truncated interim .npz: the rules reading it fail naming its path, and the outputs
    they would have rewritten leave no provenance record behind."""
    first, _ = two_runs
    copy = tmp_path / "results" / "curvature"
    shutil.copytree(first, copy)  # timestamps kept: everything is up to date
    broken = copy / "interim" / "magnitude" / "chunk0.npz"
    data = broken.read_bytes()
    broken.write_bytes(data[: len(data) // 2])  # newer than the table: the table is rerun
    done = run_tiny("curvature", tmp_path, check=False)
    assert done.returncode != 0
    log = (copy / "logs" / "table.log").read_text()
    assert f"input {broken} is truncated or corrupt" in log
    assert "BadZipFile" in log  # the cause, after the path
    # The table's job failed: Snakemake removed its outputs, and their records went with them.
    assert not (copy / "table1.csv").exists()
    assert not (copy / "table1.csv.provenance.json").exists()
    # The figure waits for the table and never ran: the old figure keeps its own record.
    assert (copy / "figure2.png").exists() == (copy / "figure2.png.provenance.json").exists()
