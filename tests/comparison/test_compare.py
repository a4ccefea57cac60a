"""Comparing many sets: ``diversity_core.compare`` and ``python -m diversity_core
compare``, against the package's single-set functions and the text experiment's protocol.

The agreement with magnipy's ``Diversipy`` is in tests/comparison/test_compare_magnipy.py
(slow: it starts magnipy's own venv)."""

import io
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import diversity_core as dc
from diversity_core.cli.main import main
from diversity_core.comparison import protocol as comparison
from diversity_core.experiments.text_temperature import score_sets


def _sets(seed=0, sizes=(40, 55, 70), d=6):
    """Clouds of different sizes and spreads, so that their magnitude functions differ."""
    rng = np.random.default_rng(seed)
    return {f"s{i}": rng.normal(size=(n, d)) * (0.5 + 0.5 * i) + i for i, n in enumerate(sizes)}


@pytest.fixture(scope="module")
def three():
    sets = _sets()
    return sets, dc.compare(sets, metric="euclidean")


def test_reference_free_protocol_is_the_package_functions(three):
    sets, result = three
    Ds = {name: dc.pairwise_distances(X) for name, X in sets.items()}
    t_convs = {name: dc.convergence_scale(D) for name, D in Ds.items()}
    assert result.t_cut_source == "median"
    assert result.t_cut == pytest.approx(np.median(list(t_convs.values())), rel=1e-12)
    assert result.t_cut == pytest.approx(dc.reference_free_t_cut(list(Ds.values())), rel=1e-12)
    table = result.table
    assert list(table.index) == list(sets) and set(table["role"]) == {"set"}
    for name, X in sets.items():
        row = table.loc[name]
        assert row["n_points"] == len(X) and row["n_distinct"] == len(X)
        assert row["t_conv"] == pytest.approx(t_convs[name], rel=1e-12)
        assert row["magarea"] == pytest.approx(dc.mag_area(Ds[name], result.t_cut), rel=1e-10)
        assert row["vendi"] == dc.vendi_score(X) and row["avgsim"] == dc.avg_sim(X)
        assert row["gmstds"] == dc.gm_stds(X) and row["isoscore"] == dc.iso_score(X)
        assert row["dcscore"] == dc.dc_score(X)
        assert row["note"] == ""
    assert result.options["metric"] == "euclidean" and result.options["target"] == 0.95


def test_magdiff_matrix_antisymmetric_zero_diagonal_and_the_package_mag_diff(three):
    sets, result = three
    M = result.mag_diff.to_numpy()
    np.testing.assert_array_equal(M, -M.T)  # exactly: MagArea_i − MagArea_j
    np.testing.assert_array_equal(np.diag(M), 0.0)
    Ds = [dc.pairwise_distances(X) for X in sets.values()]
    for i, j in ((0, 1), (2, 0), (1, 2)):
        assert M[i, j] == pytest.approx(dc.mag_diff(Ds[i], Ds[j], result.t_cut), rel=1e-8)
        assert result.mag_diff_matrix("t_cut").iloc[i, j] == pytest.approx(
            dc.mag_diff(Ds[i], Ds[j], result.t_cut, normalise="t_cut"), rel=1e-8)
        assert result.mag_diff_matrix("reference_area").iloc[i, j] == pytest.approx(
            dc.mag_diff(Ds[i], Ds[j], result.t_cut, normalise="reference_area"), rel=1e-8)
    np.testing.assert_array_equal(result.mag_diff_matrix(absolute=True).to_numpy(), np.abs(M))
    with pytest.raises(ValueError, match="normalise must be one of"):
        result.mag_diff_matrix("area")


def test_functions_on_one_shared_grid(three):
    sets, result = three
    ts = result.ts
    n_ts = result.options["n_ts"]
    np.testing.assert_array_equal(ts[:n_ts], np.linspace(0.0, result.t_cut, n_ts))
    step = result.t_cut / (n_ts - 1)
    assert 1.5 * result.t_cut <= ts[-1] < 1.5 * result.t_cut + step
    np.testing.assert_allclose(np.diff(ts), step, rtol=1e-9)
    for name, X in sets.items():
        np.testing.assert_allclose(result.functions.loc[name].to_numpy(),
                                   dc.magnitude_function(dc.pairwise_distances(X), ts),
                                   rtol=1e-10)


def test_the_text_experiments_protocol_gives_the_same_mag_areas():
    """score_sets (the text experiment: cosine, median t_conv, identical responses left out of
    the median with MagArea = t_cut) and compare agree on the same sets."""
    rng = np.random.default_rng(3)
    sets = [rng.normal(size=(10, 32)) + rng.normal(size=32) * s for s in (0.2, 0.5, 1.0, 2.0)]
    sets.append(np.repeat(rng.normal(size=(1, 32)), 10, axis=0))  # ten identical responses
    scores, t_cut = score_sets(sets, measures=("mag_area", "vendi", "avg_sim"))
    result = dc.compare(sets, metric="cosine")
    assert result.t_cut == pytest.approx(t_cut, rel=1e-12)
    np.testing.assert_allclose(result.table["magarea"], scores["mag_area"], rtol=1e-10)
    np.testing.assert_allclose(result.table["vendi"], scores["vendi"], rtol=1e-12)
    assert result.table["magarea"].iloc[-1] == pytest.approx(t_cut, rel=1e-12)


def test_adding_a_set_changes_no_other_number_when_t_cut_is_fixed():
    sets = _sets()
    more = dict(sets, extra=np.random.default_rng(9).normal(size=(30, 6)) * 3)
    a = dc.compare(sets, t_cut=1.7, metric="euclidean")
    b = dc.compare(more, t_cut=1.7, metric="euclidean")
    assert a.t_cut == b.t_cut == 1.7 and a.t_cut_source == "given"
    columns = [c for c in a.table.columns if c != "note"]
    pd.testing.assert_frame_equal(a.table[columns], b.table.loc[list(sets), columns])
    pd.testing.assert_frame_equal(a.mag_diff, b.mag_diff.loc[list(sets), list(sets)])
    pd.testing.assert_frame_equal(a.functions, b.functions.loc[list(sets)])


def test_reference_based_protocol():
    sets = _sets(sizes=(40, 60))
    R = np.random.default_rng(5).normal(size=(50, 6)) + 0.5
    result = dc.compare(sets, reference=R, metric="euclidean", k=3, reference_name="ref")
    D_ref = dc.pairwise_distances(R)
    t_cut = dc.reference_based_t_cut(D_ref)
    assert result.t_cut_source == "reference" and result.reference == "ref"
    assert result.t_cut == pytest.approx(t_cut, rel=1e-12)
    assert list(result.table.index) == ["s0", "s1", "ref"] and result.sets == ["s0", "s1"]
    assert result.table.loc["ref", "role"] == "reference"
    assert math.isnan(result.table.loc["ref", "precision"])
    for name, X in sets.items():
        row = result.table.loc[name]
        assert row["magdiff"] == pytest.approx(
            dc.mag_diff(dc.pairwise_distances(X), D_ref, t_cut), rel=1e-8)
        for key, value in dc.prdc(R, X, 3).items():
            assert row[key] == value
        assert row["mmd_rbf"] == dc.mmd_rbf(X, R) and row["mmd_linear"] == dc.mmd_linear(X, R)
    # A given t_cut wins over the reference's.
    assert dc.compare(sets, reference=R, t_cut=0.9).t_cut_source == "given"


def test_a_degenerate_set_is_reported_in_its_own_row():
    rng = np.random.default_rng(2)
    sets = {"a": rng.normal(size=(30, 4)), "b": rng.normal(size=(45, 4)) * 2,
            "same": np.repeat(rng.normal(size=(1, 4)), 12, axis=0),
            "zero": np.vstack([rng.normal(size=(20, 4)), np.zeros((1, 4))]),
            "one": rng.normal(size=(1, 4))}
    R = rng.normal(size=(25, 4))
    result = dc.compare(sets, reference=R, k=5)
    table, undefined = result.table, result.undefined
    # The single distinct point: no t_conv, out of the median, MagArea = t_cut (Mag = 1).
    assert math.isnan(table.loc["same", "t_conv"]) and table.loc["same", "n_distinct"] == 1
    assert "single distinct point (12 copies)" in undefined["same"]["t_conv"]
    assert table.loc["same", "magarea"] == pytest.approx(result.t_cut, rel=1e-12)
    np.testing.assert_allclose(result.functions.loc["same"], 1.0)
    assert "is constant" in undefined["same"]["isoscore"]
    # A zero vector under the cosine distance: no magnitude, every other value computed.
    assert math.isnan(table.loc["zero", "magarea"]) and math.isnan(table.loc["zero", "magdiff"])
    assert "zero vector" in undefined["zero"]["magarea"] and "zero" in table.loc["zero", "note"]
    assert math.isnan(result.mag_diff.loc["zero", "a"])
    assert not math.isnan(table.loc["zero", "gmstds"]) and not math.isnan(
        table.loc["zero", "precision"])
    # One point: PRDC needs more than k points; MagArea is t_cut.
    assert "one" in undefined["one"]["precision"]
    assert table.loc["one", "magarea"] == pytest.approx(result.t_cut)
    # The others have the numbers they have without the degenerate sets.
    alone = dc.compare({"a": sets["a"], "b": sets["b"]}, reference=R, k=5)
    columns = [c for c in alone.table.columns if c not in ("note", "role")]
    pd.testing.assert_frame_equal(table.loc[["a", "b"], columns],
                                  alone.table.loc[["a", "b"], columns])
    assert table.loc[["a", "b"], "note"].eq("").all()


def test_reference_free_t_cut_leaves_out_the_sets_without_a_convergence_scale():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(30, 4)), rng.normal(size=(40, 4)) * 3
    result = dc.compare({"a": a, "b": b, "same": np.ones((5, 4))}, metric="euclidean")
    expected = np.median([dc.convergence_scale(dc.pairwise_distances(X)) for X in (a, b)])
    assert result.t_cut == pytest.approx(expected, rel=1e-12)
    assert result.t_cut_rule == ("the median convergence scale of 2 sets; left out, without "
                                 "one: same")
    only = dc.compare({"same": np.ones((5, 4))})
    assert only.t_cut is None and math.isnan(only.table.loc["same", "magarea"])
    assert "give t_cut" in only.undefined["same"]["magarea"]
    assert only.table.loc["same", "vendi"] == 1.0


@pytest.mark.parametrize("sets, options, message", [
    ([], {}, "no sets to compare"),
    ([np.ones((0, 3))], {}, "set 1 is an empty set"),
    ([np.ones((4, 3)), np.ones((5, 2))], {}, "mismatched dimensions: set 1 has 3 features, "
                                             "set 2 has 2"),
    ([np.array([[1.0, np.nan], [0.0, 1.0]])], {}, "set 1 contains non-finite values"),
    ({"a": np.ones((3, 2))}, {"names": ["x", "x"]}, "2 names for 1 sets"),
    ([np.ones((3, 2))] * 2, {"names": ["x", "x"]}, "set names must be unique; repeated: x"),
    ([np.ones((3, 2))], {"t_cut": 0.0}, "t_cut must be a finite number > 0"),
    ([np.ones((3, 2))], {"metric": "l2"}, "unknown metric 'l2'"),
    ([np.ones((3, 2))], {"reference": np.ones((3, 3))}, "mismatched dimensions"),
    (np.ones((3, 2)), {}, "sets is one 2-D array"),
])
def test_bad_input_raises_naming_the_set(sets, options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        dc.compare(sets, **options)


def test_result_as_json_has_no_nan():
    result = dc.compare({"a": np.random.default_rng(0).normal(size=(20, 3)),
                         "same": np.ones((4, 3))})
    text = json.dumps(result.to_dict(), allow_nan=False)
    out = json.loads(text)
    assert out["sets"]["same"]["t_conv"] is None and out["sets"]["same"]["isoscore"] is None
    assert "isoscore" in out["undefined"]["same"]
    assert out["mag_diff"]["signed"][0][1] == -out["mag_diff"]["signed"][1][0]
    assert len(out["functions"]["values"]["a"]) == len(out["functions"]["ts"])


def test_all_magnitude_goes_through_one_seam(monkeypatch):
    """The batched engine takes over one function: compare evaluates magnitude nowhere else."""
    calls = []
    seam = comparison._magnitude_of_sets

    def spy(distance_matrices, choose_t_cut, **kwargs):
        calls.append(len(distance_matrices))
        return seam(distance_matrices, choose_t_cut, **kwargs)

    monkeypatch.setattr(comparison, "_magnitude_of_sets", spy)
    dc.compare(_sets(), reference=np.ones((3, 6)) + np.eye(3, 6))
    assert calls == [4]


def test_progress_bars_on_request(capsys):
    dc.compare(_sets(sizes=(10, 11, 12)), progress=True)
    err = capsys.readouterr().err
    assert "convergence scales" in err and "magnitude functions" in err and "baselines" in err
    dc.compare(_sets(sizes=(10, 11, 12)))  # three sets: no bars by default
    assert capsys.readouterr().err == ""


# --- the command line: a thin layer over compare -------------------------------------------


@pytest.fixture
def files(tmp_path):
    paths = []
    for name, X in _sets().items():
        np.save(tmp_path / f"{name}.npy", X)
        paths.append(str(tmp_path / f"{name}.npy"))
    np.save(tmp_path / "ref.npy", np.random.default_rng(8).normal(size=(45, 6)) + 1)
    return tmp_path, paths


def _run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_table_says_t_cut_distance_options_and_command(files, capsys):
    tmp, paths = files
    rc, out, err = _run(["compare", *paths, "--metric-space", "euclidean"], capsys)
    assert rc == 0, err
    result = dc.compare({p: np.load(p) for p in paths}, metric="euclidean")
    lines = out.splitlines()
    assert lines[0] == (f"compare: 3 sets; euclidean distance; t_cut = {result.t_cut:.6g} "
                        "(the median convergence scale of 3 sets)")
    assert f"  {paths[0]} (40 points x 6 dims; NumPy .npy)" in lines
    assert "options: --metric-space euclidean --target 0.95 --n-ts 30 --k 5 --tau 1" in lines
    assert f"command: python -m diversity_core compare {' '.join(paths)} --metric-space " \
           "euclidean" in lines
    assert f"[1] {paths[0]}" in out and "MagDiff = ∫_0^t_cut (Mag_row − Mag_column) dt" in out
    assert f"{result.table['magarea'].iloc[1]:.6g}" in out


def test_cli_json_is_the_api_result(files, capsys):
    tmp, paths = files
    rc, out, err = _run(["compare", *paths, "--reference", str(tmp / "ref.npy"), "--json",
                         "--k", "3"], capsys)
    assert rc == 0, err
    got = json.loads(out, parse_constant=lambda c: pytest.fail(f"JSON holds {c}"))
    result = dc.compare({p: np.load(p) for p in paths}, reference=np.load(tmp / "ref.npy"),
                        reference_name=str(tmp / "ref.npy"), k=3)
    assert got["t_cut"] == result.t_cut and got["t_cut_source"] == "reference"
    assert got["reference"] == str(tmp / "ref.npy")
    for name in paths:
        for key in ("magarea", "vendi", "magdiff", "precision", "mmd_rbf"):
            assert got["sets"][name][key] == result.table.loc[name, key], key
    assert got["mag_diff"]["names"] == [*paths, str(tmp / "ref.npy")]
    assert got["files"][paths[0]]["read"]["format"] == "npy"
    assert got["command"].startswith("python -m diversity_core compare ")
    assert set(got["mag_diff"]) >= {"signed", "absolute", "t_cut", "reference_area"}


def test_cli_csv_reads_back(files, capsys):
    tmp, paths = files
    rc, out, _ = _run(["compare", *paths, "--csv"], capsys)
    assert rc == 0
    table = pd.read_csv(io.StringIO(out), index_col="set")
    result = dc.compare({p: np.load(p) for p in paths})
    np.testing.assert_array_equal(table["magarea"], result.table["magarea"])
    np.testing.assert_array_equal(table[f"magdiff_to:{paths[0]}"],
                                  result.mag_diff[paths[0]])
    assert (table["t_cut"] == result.t_cut).all() and (table["distance"] == "cosine").all()


def test_cli_plot_and_report(files, capsys):
    tmp, paths = files
    rc, _, err = _run(["compare", *paths, "--plot", str(tmp / "f.pdf"), "--report",
                       str(tmp / "report")], capsys)
    assert rc == 0, err
    assert (tmp / "f.pdf").read_bytes().startswith(b"%PDF")
    report = (tmp / "report" / "report.md").read_text()
    assert (tmp / "report" / "comparison.png").read_bytes().startswith(b"\x89PNG")
    assert f"python -m diversity_core compare {' '.join(paths)} --plot" in report
    assert "![magnitude functions and MagDiff](comparison.png)" in report
    assert "| [1] " in report and "## MagDiff" in report
    assert json.loads((tmp / "report" / "results.json").read_text())["t_cut"] > 0
    assert not list(tmp.glob("**/*.tmp"))  # nothing half-written left behind


@pytest.mark.parametrize("make, message", [
    (lambda t: np.save(t / "bad.npy", np.ones((0, 6))), "bad.npy: no points (shape (0, 6))"),
    (lambda t: np.save(t / "bad.npy", np.ones((5, 4))), "mismatched dimensions"),
    (lambda t: (t / "bad.csv").write_text("a,b,c,d,e,f\n"),
     "bad.csv: a header on line 1 and no rows of numbers"),
    (lambda t: (t / "bad.csv").write_text(""), "bad.csv: the file is empty"),
    (lambda t: (t / "bad.npy").mkdir(), "bad.npy is a directory, not a regular file"),
    (lambda t: None, "bad.npy: no such file"),
    (lambda t: np.save(t / "bad.npy", np.full((5, 6), np.inf)), "non-finite"),
], ids=["empty set", "dimensions", "no rows", "empty file", "directory", "missing", "inf"])
def test_cli_bad_input_is_one_line_and_exit_2(files, capsys, make, message):
    tmp, paths = files
    make(tmp)
    bad = next(iter(tmp.glob("bad.*")), tmp / "bad.npy")
    rc, out, err = _run(["compare", *paths, str(bad)], capsys)
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("option, message", [
    (["--t-cut", "0"], "--t-cut must be a number in (0, 1e+15]"),
    (["--t-cut", "nan"], "--t-cut must be a number in (0, 1e+15]"),
    (["--target", "1"], "--target must be a number in (0, 1)"),
    (["--n-ts", "1"], "--n-ts must be an integer in [2, 10000]"),
    (["--plot", "f.svg"], "the figure is written as .png or .pdf"),
    (["--plot", "/no/such/folder/f.png"], "no folder /no/such/folder"),
    (["--json", "--csv"], "not allowed with argument --json"),
    (["--index-column", "drop"], "--index-column applies to .csv files, and none is given"),
])
def test_cli_bad_options(files, capsys, option, message):
    tmp, paths = files
    rc, out, err = _run(["compare", *paths, *option], capsys)
    assert rc == 2 and out == "" and message in err and err.count("\n") == 1, err


def test_cli_out_of_memory_is_one_line(files, capsys, monkeypatch):
    import diversity_core.cli.compare as cli

    def too_big(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(cli, "compare", too_big)
    tmp, paths = files
    rc, out, err = _run(["compare", *paths], capsys)
    assert rc == 2 and out == ""
    assert err == ("error: not enough memory for these sets; use --subsample N to measure a "
                   "random subset of N points of each.\n")


def test_cli_given_t_cut(files, capsys):
    tmp, paths = files
    rc, out, _ = _run(["compare", *paths, "--t-cut", "2.5"], capsys)
    assert rc == 0
    assert out.splitlines()[0] == "compare: 3 sets; cosine distance; t_cut = 2.5 (given)"
    assert "--t-cut 2.5" in out.splitlines()[4]


def test_cli_same_file_twice(files, capsys):
    tmp, paths = files
    rc, _, err = _run(["compare", paths[0], paths[0]], capsys)
    assert rc == 2 and "given more than once" in err


def test_cli_degenerate_set_in_its_own_row(files, capsys):
    tmp, paths = files
    np.save(tmp / "same.npy", np.ones((8, 6)))
    rc, out, err = _run(["compare", *paths, str(tmp / "same.npy"), "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    same = str(tmp / "same.npy")
    assert got["sets"][same]["t_conv"] is None
    assert "left out, without one: " + same in got["t_cut_rule"]
    assert all(got["sets"][p]["magarea"] > 0 for p in paths)


def test_cli_fixed_t_cut_and_subsample_do_not_depend_on_the_other_files(files, capsys):
    tmp, paths = files
    np.save(tmp / "big.npy", np.random.default_rng(1).normal(size=(200, 6)))
    argv = ["--t-cut", "2", "--subsample", "30", "--json"]
    _, out_a, _ = _run(["compare", paths[2], str(tmp / "big.npy"), *argv], capsys)
    _, out_b, _ = _run(["compare", str(tmp / "big.npy"), paths[0], *argv], capsys)
    a, b = json.loads(out_a)["sets"], json.loads(out_b)["sets"]
    assert a[str(tmp / "big.npy")] == b[str(tmp / "big.npy")]


def test_diversity_core_console_script_and_dash_m(files):
    tmp, paths = files
    proc = subprocess.run([sys.executable, "-m", "diversity_core", "compare", *paths[:2],
                           "--csv"], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("set,role,n_points_in_file")


def test_cli_tables_need_no_matplotlib(files):
    """matplotlib is the pipeline's extra, not the package's: only --plot and --report need it."""
    tmp, paths = files
    code = ("import sys; sys.modules['matplotlib'] = sys.modules['cycler'] = None; "
            "from diversity_core.cli.main import main; sys.exit(main(sys.argv[1:]))")
    table = subprocess.run([sys.executable, "-c", code, "compare", *paths], capture_output=True,
                           text=True)
    assert table.returncode == 0 and table.stdout.startswith("compare: 3 sets"), table.stderr
    plot = subprocess.run([sys.executable, "-c", code, "compare", *paths, "--plot",
                           str(tmp / "f.png")], capture_output=True, text=True)
    assert plot.returncode == 2 and plot.stdout == ""
    assert plot.stderr == ("error: --plot and --report draw with matplotlib, which is not "
                           "installed: pip install 'diversity_core[pipeline]'.\n")


# Hardened surfaces: every numeric option has a range checked before work; every
# output goes where it was asked, atomically, never through a link; a place that cannot be
# written is one line, exit 2 (1 is the audit's findings), not a traceback.

@pytest.mark.parametrize("option, value", [
    ("--n-ts", "100000000"), ("--n-ts", "1"), ("--t-cut", "1e308"), ("--t-cut", "0"),
    ("--t-cut", "nan"), ("--k", "0"), ("--k", "20000"), ("--tau", "inf"), ("--tau", "1e9"),
    ("--target", "1"), ("--subsample", "1"), ("--seed", "-1"),
])
def test_cli_numeric_options_have_ranges(files, capsys, option, value):
    _, paths = files
    rc, out, err = _run(["compare", *paths, option, value], capsys)
    assert rc == 2 and out == ""
    assert err.startswith(f"error: {option} must be ") and err.count("\n") == 1, err


def test_cli_outputs_go_where_asked_or_are_refused_in_one_line(files, capsys):
    tmp, paths = files
    victim = tmp / "victim.txt"
    victim.write_text("precious")
    (tmp / "link.png").symlink_to(victim)
    (tmp / "a_file").write_text("x")
    (tmp / "folder.png").mkdir()
    refused = [(["--plot", str(tmp / "link.png")], "is a symbolic link"),
               (["--plot", str(tmp / "folder.png")], "is a folder"),
               (["--plot", "/proc/f.png"], "is not writable"),
               (["--report", str(tmp / "a_file")], "exists and is not a folder"),
               (["--report", "/proc/report"], "is not writable"),
               (["--embed", "all-MiniLM-L6-v2", "--cache", str(tmp / "a_file")],
                "exists and is not a folder"),
               (["--embed", "all-MiniLM-L6-v2", "--models", "/proc/models"], "is not writable")]
    for extra, message in refused:
        rc, out, err = _run(["compare", *paths, *extra], capsys)
        assert rc == 2 and out == "" and message in err and err.count("\n") == 1, (extra, err)
    assert victim.read_text() == "precious"
    # A link planted at the old fixed temporary name is not followed; a report into a folder
    # of an earlier report says what it replaces and keeps the other files.
    (tmp / "f.png.tmp").symlink_to(victim)
    report = tmp / "report"
    report.mkdir()
    (report / "report.md").write_text("old")
    (report / "mine.txt").write_text("kept")
    (report / "results.csv.tmp").symlink_to(victim)
    rc, _, err = _run(["compare", *paths, "--plot", str(tmp / "f.png"), "--report",
                       str(report)], capsys)
    assert rc == 0, err
    assert f"note: --report {report}: replacing report.md." in err
    assert victim.read_text() == "precious" and (report / "mine.txt").read_text() == "kept"
    assert (tmp / "f.png").read_bytes().startswith(b"\x89PNG")
    assert not (tmp / "f.png").is_symlink() and (report / "report.md").read_text() != "old"
