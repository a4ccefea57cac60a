"""One vocabulary: the printed tables, the CSV, the JSON and ``compare(...).table`` name every
measure by its registry name; a set measured far from its own scale says so in one line."""

import csv
import io
import json

import numpy as np
import pytest

import diversity_core as dc
from diversity_core.cli.main import main
from diversity_core.comparison.protocol import SCALE_GAP
from diversity_core.measures.registry import FREE_MEASURES, MEASURES, REFERENCE_MEASURES


@pytest.fixture
def sets(tmp_path):
    """Two sets of one shape, the second 1,000 times larger, and a reference."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(30, 4))
    paths = {"a": tmp_path / "a.npy", "b": tmp_path / "b.npy", "r": tmp_path / "r.npy"}
    np.save(paths["a"], A)
    np.save(paths["b"], 1000 * A + rng.normal(size=A.shape))
    np.save(paths["r"], rng.normal(size=(35, 4)) + 0.1)
    return paths


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def _header(text: str, first: str) -> list[str]:
    """The column names of the printed table whose header starts with ``first``."""
    return next(line.split() for line in text.splitlines() if line.startswith(first))


def test_compare_prints_the_names_the_table_the_csv_and_the_json_use(sets, capsys):
    argv = ["compare", sets["a"], sets["b"], "--reference", sets["r"], "--metric-space",
            "euclidean"]
    printed = _run(capsys, *argv)
    table = dc.compare({"a": np.load(sets["a"]), "b": np.load(sets["b"])},
                       reference=np.load(sets["r"]), metric="euclidean").table
    free = _header(printed, "set ")[3:]  # after set, points, distinct
    assert free == ["t_conv", *FREE_MEASURES]
    against = next(h for h in (line.split() for line in printed.splitlines())
                   if h[:2] == ["set", "magdiff"])[1:]
    assert against == list(REFERENCE_MEASURES)
    for name in free + against:  # each printed name is a column of the Python table
        assert table.loc[["a", "b"], name].notna().all(), name
    rows = list(csv.DictReader(io.StringIO(_run(capsys, *argv, "--csv"))))
    assert set(free + against) <= set(rows[0])
    for row in json.loads(_run(capsys, *argv, "--json"))["sets"].values():
        assert set(free + against) <= set(row), sorted(row)


def test_score_prints_the_names_its_json_uses(sets, capsys):
    printed = _run(capsys, "score", sets["a"], "--reference", sets["r"])
    names = [line.split()[0] for line in printed.splitlines()
             if line.split() and line.split()[0] in MEASURES]
    scores = json.loads(_run(capsys, "score", sets["a"], "--reference", sets["r"],
                             "--json"))["scores"]
    assert names == [*scores["embeddings"], *scores["comparison"]]
    assert "MagArea" in printed  # the label stays beside the name, for reading


def test_a_set_far_from_t_cut_gets_one_line(sets, capsys):
    A, B = np.load(sets["a"]), np.load(sets["b"])
    result = dc.compare({"a": A, "b": B}, metric="euclidean")
    t_conv = result.table["t_conv"]
    assert result.t_cut / t_conv["b"] > SCALE_GAP  # the median of two lies between them
    assert result.notes["a"] == []
    [note] = [n for n in result.notes["b"] if "convergence scale" in n]
    assert f"t_cut = {result.t_cut:.6g}" in note and f"t_conv = {t_conv['b']:.6g}" in note
    printed = _run(capsys, "compare", sets["a"], sets["b"], "--metric-space", "euclidean")
    lines = [line for line in printed.splitlines() if "times this set's own convergence" in line]
    assert len(lines) == 1 and str(sets["b"]) in lines[0], printed
    # Sets of one scale: no such note.
    near = dc.compare({"a": A, "b": 2 * A}, metric="euclidean")
    assert not any("convergence scale" in n for notes in near.notes.values() for n in notes)
