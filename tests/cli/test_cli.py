"""The command line: file formats, the table and JSON output, and clear errors."""

import json
import subprocess
import sys

import numpy as np
import pytest

from diversity_core import (
    convergence_scale,
    mag_area,
    mag_diff,
    pairwise_distances,
    prdc,
    vendi_score,
)
from diversity_core.cli.main import main
from diversity_core.cli.options import load_embeddings


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 6))
    R = rng.normal(size=(50, 6)) + 0.2
    np.save(tmp_path / "x.npy", X)
    np.savez(tmp_path / "r.npz", emb=R)
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d,e,f", comments="")
    return tmp_path, X, R


def _run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_formats_read_the_same_array(files):
    tmp, X, R = files
    np.testing.assert_allclose(load_embeddings(tmp / "x.csv"), X, rtol=1e-15)
    np.testing.assert_array_equal(load_embeddings(tmp / "x.npy"), X)
    np.testing.assert_array_equal(load_embeddings(tmp / "r.npz"), R)


def test_single_file_table(files, capsys):
    tmp, X, _ = files
    rc, out, err = _run(["score", str(tmp / "x.npy")], capsys)
    assert rc == 0, err
    assert "40 points x 6 dims" in out
    for label in ("MagArea", "Vendi Score", "AvgSim", "GMStds", "IsoScore", "DCScore"):
        assert label in out
    assert "this space's own convergence scale" in out


def test_single_file_json_matches_the_library(files, capsys):
    tmp, X, _ = files
    rc, out, _ = _run(["score", str(tmp / "x.csv"), "--json", "--metrics", "magarea,vendi",
                       "--metric-space", "euclidean"], capsys)
    assert rc == 0
    result = json.loads(out)
    D = pairwise_distances(X)
    t_cut = convergence_scale(D)
    assert result["t_cut"] == pytest.approx(t_cut, rel=1e-12)
    scores = result["scores"]["embeddings"]
    assert scores["magarea"] == pytest.approx(mag_area(D, t_cut), rel=1e-10)
    assert scores["vendi"] == pytest.approx(vendi_score(X), rel=1e-12)
    assert set(scores) == {"magarea", "vendi"}


def test_reference_json(files, capsys):
    tmp, X, R = files
    rc, out, err = _run(["score", str(tmp / "x.npy"), "--reference", str(tmp / "r.npz"),
                         "--json", "--metrics", "magdiff,prdc,mmd", "--k", "3"], capsys)
    assert rc == 0, err
    result = json.loads(out)
    comp = result["scores"]["comparison"]
    expected = prdc(R, X, 3)
    for key in ("precision", "recall", "density", "coverage"):
        assert comp[key] == pytest.approx(expected[key])
    D_x, D_r = pairwise_distances(X, "cosine"), pairwise_distances(R, "cosine")
    t_cut = convergence_scale(D_r)
    assert comp["magdiff"] == pytest.approx(mag_diff(D_x, D_r, t_cut), rel=1e-8)
    assert comp["mmd_rbf"] >= 0 and comp["mmd_linear"] >= 0
    assert "reference's convergence scale" in result["notes"]["magdiff"]


def test_reference_table(files, capsys):
    tmp, _, _ = files
    rc, out, _ = _run(["score", str(tmp / "x.npy"), "--reference", str(tmp / "r.npz")], capsys)
    assert rc == 0
    assert "reference: " in out and "MagDiff" in out and "coverage" in out


@pytest.mark.parametrize("content, message", [
    ("1,2\n3,x\n", "line 2 is not a row of numbers"),
    ("1,2\n3,4,5\n", "different numbers of columns"),
    ("", "empty"),
])
def test_malformed_csv(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    rc, _, err = _run(["score", str(path)], capsys)
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_errors(files, capsys):
    tmp, X, _ = files
    np.save(tmp / "one_d.npy", np.arange(5.0))
    np.save(tmp / "nan.npy", np.vstack([X, [np.nan] * 6]))
    np.save(tmp / "wide.npy", np.ones((10, 7)))
    np.savez(tmp / "two.npz", a=X, b=X)
    (tmp / "garbage.npy").write_bytes(b"not a numpy file")
    (tmp / "x.txt").write_text("1,2\n")
    cases = [
        (["score", str(tmp / "missing.npy")], "no such file"),
        (["score", str(tmp / "x.txt")], "unsupported file type"),
        (["score", str(tmp / "garbage.npy")], "garbage.npy: named .npy but holds text"),
        (["score", str(tmp / "one_d.npy")], "expected a 2-D array"),
        (["score", str(tmp / "nan.npy")], "non-finite"),
        (["score", str(tmp / "two.npz")], "choose one with --key"),
        (["score", str(tmp / "two.npz"), "--key", "c"], "no array 'c'"),
        (["score", str(tmp / "x.npy"), "--reference", str(tmp / "wide.npy")],
         "mismatched dimensions"),
        (["score", str(tmp / "x.npy"), "--metrics", "fid"], "unknown metric 'fid'"),
        (["score", str(tmp / "x.npy"), "--metrics", "recall"], "give --reference"),
        (["score", str(tmp / "x.npy"), "--reference", str(tmp / "r.npz"), "--k", "60",
          "--metrics", "prdc"], "k = 60 needs more than k points"),
    ]
    for argv, message in cases:
        rc, out, err = _run(argv, capsys)
        assert rc == 2, argv
        assert message in err, (argv, err)
        assert out == ""


def test_python_dash_m(files):
    tmp, _, _ = files
    proc = subprocess.run([sys.executable, "-m", "diversity_core", "score", str(tmp / "x.npy"),
                           "--metrics", "vendi,avgsim", "--json"],
                          capture_output=True, text=True, check=True)
    assert set(json.loads(proc.stdout)["scores"]["embeddings"]) == {"vendi", "avgsim"}


def test_magarea_not_computable_keeps_the_other_metrics(tmp_path, capsys):
    # One distinct point: it has no convergence scale, so no MagArea of its own.
    X = np.repeat(np.random.default_rng(1).normal(size=(1, 3)), 10, axis=0)
    np.save(tmp_path / "dup.npy", X)
    rc, out, err = _run(["score", str(tmp_path / "dup.npy"), "--json"], capsys)
    assert rc == 0, err
    result = json.loads(out)
    assert result["scores"]["embeddings"]["magarea"] is None
    assert result["notes"]["magarea"].startswith(
        "undefined: no t_cut: no set has a convergence scale")
    assert "dup.npy: a space with a single distinct point" in result["notes"]["magarea"]
    assert result["scores"]["embeddings"]["vendi"] == pytest.approx(vendi_score(X))
    rc, out, _ = _run(["score", str(tmp_path / "dup.npy")], capsys)
    assert rc == 0 and "undefined" in out


# --- errors name the file, undefined measures keep the others, JSON stays JSON --------------------

def test_errors_name_the_file_and_line(files, capsys):
    tmp, X, R = files
    bad_ref = np.vstack([R, R[:1]])
    bad_ref[3, 2] = np.nan
    np.save(tmp / "bad_ref.npy", bad_ref)
    rc, out, err = _run(["score", str(tmp / "x.npy"), "--reference", str(tmp / "bad_ref.npy")],
                        capsys)
    assert rc == 2 and out == ""
    assert f"{tmp / 'bad_ref.npy'}: 1 non-finite value(s) (1 NaN, 0 inf), the first at row 3, " \
           "column 3" in err
    (tmp / "bad.csv").write_text("a,b\n1,2\n\n3,inf\n")
    rc, _, err = _run(["score", str(tmp / "bad.csv")], capsys)
    assert rc == 2 and "bad.csv: 1 non-finite value(s) (0 NaN, 1 inf), the first at line 4, " \
                      "column 2" in err
    (tmp / "ragged.csv").write_text("1,2\n3,4\n5\n")
    rc, _, err = _run(["score", str(tmp / "ragged.csv")], capsys)
    assert rc == 2 and "line 3 has 1, line 1 has 2" in err


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: np.save(p, np.ones((4, 2)) + 1j), "complex numbers"),
    (lambda p: p.write_bytes(b"PK\x03\x04 truncated"), "cannot read it as .npz (BadZipFile"),
    (lambda p: np.save(p, np.ones((0, 3))), "no points"),
], ids=["directory", "complex", "truncated npz", "empty"])
def test_bad_files_are_named(tmp_path, capsys, make, message):
    path = tmp_path / ("emb.npz" if "npz" in message else "emb.npy")
    make(path)
    rc, out, err = _run(["score", str(path)], capsys)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert str(path) in err and message in err, err


def test_key_on_a_npy_file_is_rejected(files, capsys):
    tmp, _, _ = files
    rc, _, err = _run(["score", str(tmp / "x.npy"), "--key", "emb"], capsys)
    assert rc == 2 and "--key 'emb' names an array inside a .npz file" in err
    # With an .npz among the files, --key picks its array; the .npy needs none.
    rc, _, err = _run(["score", str(tmp / "x.npy"), "--reference", str(tmp / "r.npz"),
                       "--key", "emb", "--metrics", "vendi"], capsys)
    assert rc == 0, err


def test_subsample_is_shown(files, capsys):
    tmp, _, _ = files
    rc, out, _ = _run(["score", str(tmp / "x.npy"), "--subsample", "25", "--seed", "3",
                       "--metrics", "vendi"], capsys)
    assert rc == 0
    assert ("(25 points x 6 dims; random subset of 25 of 40 points, --subsample 25 --seed 3; "
            "NumPy .npy)") in out
    rc, out, _ = _run(["score", str(tmp / "x.npy"), "--subsample", "25", "--seed", "3",
                       "--metrics", "vendi", "--json"], capsys)
    result = json.loads(out)
    assert result["subsample"] == {"max_points": 25, "seed": 3}
    assert result["embeddings"]["n_points"] == 25
    assert result["embeddings"]["n_points_in_file"] == 40


@pytest.mark.parametrize("n_points", [2, 20])
def test_constant_data_make_isoscore_undefined_not_the_run(tmp_path, capsys, n_points):
    """Two identical points aborted the run; twenty printed IsoScore 4.4e-17."""
    np.save(tmp_path / "same.npy", np.full((n_points, 4), 0.1))
    rc, out, err = _run(["score", str(tmp_path / "same.npy"), "--json"], capsys)
    assert rc == 0, err
    result = json.loads(out)
    scores, undefined = result["scores"]["embeddings"], result["undefined"]["embeddings"]
    assert scores["isoscore"] is None and "is constant" in undefined["isoscore"]
    assert str(tmp_path / "same.npy") in undefined["isoscore"]
    assert scores["magarea"] is None and "single distinct point" in undefined["magarea"]
    assert scores["vendi"] == 1.0 and scores["avgsim"] == pytest.approx(1.0)
    assert scores["gmstds"] == 0.0  # a constant feature: 0 by definition, not undefined
    rc, out, _ = _run(["score", str(tmp_path / "same.npy")], capsys)
    assert rc == 0 and "undefined" in out and "is constant" in out


def test_a_single_point_reference_is_named(files, capsys):
    tmp, X, R = files
    np.save(tmp / "one.npy", R[:1])
    rc, out, err = _run(["score", str(tmp / "x.npy"), "--reference", str(tmp / "one.npy"),
                         "--json"], capsys)
    assert rc == 0, err
    result = json.loads(out)
    assert result["undefined"]["reference"]["avgsim"].startswith(
        f"{tmp / 'one.npy'} has 1 point;")
    assert "one.npy has 1 point" in result["undefined"]["comparison"]["precision"]
    magdiff = result["undefined"]["comparison"]["magdiff"]
    assert "one.npy has no convergence scale" in magdiff and "single point" in magdiff
    assert result["scores"]["embeddings"]["vendi"] == pytest.approx(vendi_score(X))
    assert result["scores"]["comparison"]["mmd_linear"] >= 0


def test_nothing_defined_is_an_error(tmp_path, capsys):
    np.save(tmp_path / "same.npy", np.ones((5, 3)))
    rc, out, err = _run(["score", str(tmp_path / "same.npy"), "--metrics", "isoscore,magarea"],
                        capsys)
    assert rc == 2 and out == ""
    assert err.startswith("error: no requested measure is defined for this input: IsoScore: ")


def test_the_issue_example_at_1e200(tmp_path, capsys):
    X = np.random.default_rng(0).normal(size=(50, 5))
    for name, data in (("x", X), ("big", X * 1e200), ("small", X * 1e-300)):
        np.save(tmp_path / f"{name}.npy", data)
    values = {}
    for name in ("x", "big", "small"):
        rc, out, err = _run(["score", str(tmp_path / f"{name}.npy"), "--json", "--metrics",
                             "vendi,avgsim,gmstds,dcscore,isoscore,magarea"], capsys)
        assert rc == 0, err
        values[name] = json.loads(out)["scores"]["embeddings"]
    for name in ("big", "small"):
        for metric in ("vendi", "dcscore", "isoscore", "magarea"):
            assert values[name][metric] == pytest.approx(values["x"][metric], rel=1e-8), metric
        assert values[name]["avgsim"] == pytest.approx(values["x"]["avgsim"], abs=1e-14)
    assert values["x"]["vendi"] == pytest.approx(4.79, abs=0.01)
    assert values["big"]["gmstds"] == pytest.approx(values["x"]["gmstds"] * 1e200, rel=1e-12)


def test_json_never_holds_nan_or_infinity(files, capsys, monkeypatch):
    """A value that is not finite is written as null, with the reason; never NaN/Infinity."""
    import dataclasses

    from diversity_core.measures.registry import MEASURES

    tmp, _, _ = files
    monkeypatch.setitem(MEASURES, "vendi",
                        dataclasses.replace(MEASURES["vendi"], compute=lambda A: float("inf")))
    rc, out, err = _run(["score", str(tmp / "x.npy"), "--json", "--metrics", "vendi,avgsim"],
                        capsys)
    assert rc == 0, err
    result = json.loads(out, parse_constant=lambda c: pytest.fail(f"JSON holds {c}"))
    assert result["scores"]["embeddings"]["vendi"] is None
    assert "outside the float64 range" in result["undefined"]["embeddings"]["vendi"]
    assert result["scores"]["embeddings"]["avgsim"] is not None


@pytest.mark.parametrize("option, message", [
    (["--tau", "0"], "--tau must be a number in (0, 1e+06]"),
    (["--tau", "nan"], "--tau must be a number in (0, 1e+06]"),
    (["--k", "0"], "--k must be an integer in [1, 10000]"),
    (["--seed", "-1"], "--seed must be an integer in [0, 9223372036854775807]"),
    (["--subsample", "1"], "--subsample must be an integer in [2, 10000000]"),
    (["--device", "gpu"],
     "--device: unknown device 'gpu'; the devices are cpu, auto, cuda, cuda:N, torch:cpu"),
])
def test_bad_options(files, capsys, option, message):
    tmp, _, _ = files
    rc, out, err = _run(["score", str(tmp / "x.npy"), *option], capsys)
    assert rc == 2 and message in err and out == ""


def test_the_integration_rule_is_an_option(files, capsys):
    """``--integration`` picks MagArea's quadrature rule for ``score`` and ``compare``: every
    rule meets the default tolerance (1e-6), so the values agree to it, and compare's options
    line names a rule other than the default."""
    tmp, _, _ = files
    areas = {}
    for rule in ("cc25", "hermite_log", "hermite_d2"):
        rc, out, _ = _run(["score", str(tmp / "x.npy"), "--json", "--metrics", "magarea",
                           "--integration", rule], capsys)
        assert rc == 0
        areas[rule] = json.loads(out)["scores"]["embeddings"]["magarea"]
    assert areas["hermite_log"] == pytest.approx(areas["cc25"], rel=2e-6)
    assert areas["hermite_d2"] == pytest.approx(areas["cc25"], rel=2e-6)
    rc, out, _ = _run(["compare", str(tmp / "x.npy"), str(tmp / "r.npz"), "--json",
                       "--integration", "cc25"], capsys)
    assert rc == 0 and "--integration cc25" in json.loads(out)["options_line"]
    rc, _, err = _run(["score", str(tmp / "x.npy"), "--integration", "simpson"], capsys)
    assert rc == 2 and "argument --integration: invalid choice: 'simpson'" in err


def test_the_engine_device_gives_the_same_scores(files, capsys):
    """``--device torch:cpu`` runs magnitude on the engine's torch path: the same
    numbers as the NumPy engine to 1e-9, for ``score`` and ``compare``; a GPU the machine lacks
    is one line, exit 2."""
    pytest.importorskip("torch")
    tmp, _, _ = files
    base = ["score", str(tmp / "x.npy"), "--reference", str(tmp / "r.npz"), "--json",
            "--metrics", "magarea,magdiff"]
    results = []
    for device in ("cpu", "torch:cpu"):
        rc, out, _ = _run([*base, "--device", device], capsys)
        assert rc == 0
        results.append(json.loads(out))
    numpy_path, torch_path = results
    assert torch_path["t_cut"] == pytest.approx(numpy_path["t_cut"], rel=1e-9)
    for where in ("embeddings", "reference", "comparison"):
        for m, v in numpy_path["scores"][where].items():
            assert torch_path["scores"][where][m] == pytest.approx(v, rel=1e-9)
    tables = []
    for device in ("cpu", "torch:cpu"):
        rc, out, _ = _run(["compare", str(tmp / "x.npy"), str(tmp / "r.npz"), "--json",
                           "--device", device], capsys)
        assert rc == 0
        tables.append(json.loads(out))
    assert "--device torch:cpu" in tables[1]["options_line"]
    assert tables[1]["t_cut"] == pytest.approx(tables[0]["t_cut"], rel=1e-9)
    assert tables[1]["options"]["device"] == "torch:cpu"
    assert [row["magarea"] for row in tables[1]["sets"].values()] == pytest.approx(
        [row["magarea"] for row in tables[0]["sets"].values()], rel=1e-9)
    import torch

    if not torch.cuda.is_available():
        rc, out, err = _run([*base, "--device", "cuda"], capsys)
        assert rc == 2 and out == "" and "torch sees no CUDA GPU" in err
        assert len(err.strip().splitlines()) == 1


def test_a_closed_stdout_ends_quietly(files, capsys, monkeypatch):
    """A reader of stdout that went away (``| head``) is BrokenPipeError, an OSError: it must
    end the command quietly with status 1, not as an error of the user's files (status 2)."""
    tmp, _, _ = files

    def closed_pipe(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("diversity_core.cli.compare.compare", closed_pipe)
    rc, out, err = _run(["compare", str(tmp / "x.npy"), str(tmp / "r.npz")], capsys)
    assert (rc, out, err) == (1, "", "")
