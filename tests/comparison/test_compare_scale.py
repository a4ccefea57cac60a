"""compare and score at scale: the batch path, the memory refusal, the fallback solvers said."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import diversity_core as dc
from diversity_core.cli.main import main
from diversity_core.comparison import memory as compare_memory
from diversity_core.comparison import protocol as comparison
from diversity_core.magnitude import MagnitudeSpace
from diversity_core.magnitude import api as magnitude_api
from diversity_core.magnitude import sets as magnitude_sets


def _many(m=60, n=10, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return {f"s{i}": rng.normal(size=(n + i % 3, d)) for i in range(m)}


def test_many_small_sets_go_through_the_batch_path_in_one_call(monkeypatch):
    calls = []
    areas, functions = magnitude_sets.mag_areas, magnitude_sets.magnitude_functions
    monkeypatch.setattr(magnitude_sets, "mag_areas",
                        lambda S, *a, **k: calls.append(("areas", len(S))) or areas(S, *a, **k))
    monkeypatch.setattr(magnitude_sets, "magnitude_functions",
                        lambda S, *a, **k: calls.append(("functions", len(S)))
                        or functions(S, *a, **k))
    sets = _many()
    result = dc.compare(sets, t_cut=2.0, metric="euclidean")
    # (measure_sets first checks the integration options on a one-point space: left aside)
    assert [call for call in calls if call[1] > 1] == [("areas", 60), ("functions", 60)]
    # ... and gives the single-space numbers.
    for name in ("s0", "s31", "s59"):
        space = MagnitudeSpace(dc.pairwise_distances(sets[name], "euclidean"))
        assert result.table.loc[name, "magarea"] == pytest.approx(
            dc.MagnitudeSettings().mag_area(space, 2.0), rel=1e-6)
        assert result.table.loc[name, "t_conv"] == pytest.approx(
            dc.MagnitudeSettings().convergence_scale(space), rel=1e-8)


def test_a_degenerate_member_of_the_batch_keeps_its_own_row():
    sets = _many(m=8)
    sets["one point"] = np.ones((4, 4))  # a single distinct point: no convergence scale
    result = dc.compare(sets, metric="euclidean")
    assert np.isnan(result.table.loc["one point", "t_conv"])
    assert "t_conv" in result.undefined["one point"]
    assert result.table.loc["one point", "magarea"] == pytest.approx(result.t_cut)
    assert np.isfinite(result.table.drop(index="one point")["magarea"]).all()


def test_memory_beyond_the_limit_is_refused_before_anything_is_computed(monkeypatch):
    monkeypatch.setattr(comparison, "_magnitude_of_sets",
                        lambda *a, **k: pytest.fail("computed despite the refusal"))
    with pytest.raises(dc.MemoryNeedError, match=r"need about .* GiB") as caught:
        dc.compare(_many(m=3), memory_limit=1000)
    assert caught.value.limit == 1000 and caught.value.need > 1000  # numbers, set when made
    assert "--subsample" not in str(caught.value)  # the command line's remedy, not the library's
    need, worst = compare_memory.required_memory({"a": 100, "b": 20_000, "r": 50}, 384,
                                             reference="r")
    assert worst == "b" and need > 8 * 20_000**2


@pytest.mark.parametrize("command", ["compare", "score"])
def test_the_commands_refuse_in_one_line_with_exit_2(tmp_path, capsys, monkeypatch, command):
    rng = np.random.default_rng(1)
    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.normal(size=(30, 5)))
    monkeypatch.setattr(compare_memory, "available_memory", lambda: 10_000)
    argv = ([command, str(tmp_path / "a.npy"), str(tmp_path / "b.npy")] if command == "compare"
            else [command, str(tmp_path / "a.npy"), "--reference", str(tmp_path / "b.npy")])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GiB" in err and "--subsample" in err, err


def _collinear(seed):
    """Many points in two dimensions under the cosine distance: Z_t is numerically singular at
    the scales magnitude needs, and a fallback solver answers."""
    return np.random.default_rng(seed).normal(size=(60, 2))


def test_fallback_solver_is_reported_in_compare_notes_and_json():
    result = dc.compare({"a": _collinear(0), "b": _collinear(1)}, metric="cosine")
    assert result.fallbacks, "the data no longer triggers a fallback solver"
    name, records = next(iter(result.fallbacks.items()))
    record = records[0]
    assert record["solver"] in ("ldl", "pinv")
    assert 0 < record["t_min"] <= record["t_max"]
    assert record["mag_error_bound"] > 0 and record["area_error_bound"] >= 0
    assert any("fell back" in note for note in result.notes[name])
    as_json = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert as_json["fallbacks"][name][0]["solver"] == record["solver"]


def test_fallback_solver_is_reported_by_score(tmp_path, capsys):
    np.save(tmp_path / "x.npy", _collinear(0))
    assert main(["score", str(tmp_path / "x.npy"), "--json", "--metrics", "magarea"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fallbacks"], "the data no longer triggers a fallback solver"
    assert "fell back" in out["notes"]["magarea"]
    assert main(["score", str(tmp_path / "x.npy"), "--metrics", "magarea"]) == 0
    assert "fell back" in capsys.readouterr().out


def test_a_large_set_takes_the_engines_large_n_path(monkeypatch):
    """Sets beyond 10,000 points go through magnitude_space's large-n path (here, with the
    threshold lowered, a set of 300 points), with the dense numbers to its tolerance."""
    from diversity_core.magnitude import LargeMagnitudeSpace

    rng = np.random.default_rng(5)
    sets = {"small": rng.normal(size=(40, 8)), "large": rng.normal(size=(300, 8))}
    dense = dc.compare(sets, metric="euclidean", t_cut=1.5)
    seen = _spaces_seen_with_a_low_threshold(monkeypatch)
    large = dc.compare(sets, metric="euclidean", t_cut=1.5)
    assert seen == [np.ndarray, LargeMagnitudeSpace]
    np.testing.assert_allclose(large.table["magarea"], dense.table["magarea"], rtol=1e-5)
    np.testing.assert_allclose(large.table["t_conv"], dense.table["t_conv"], rtol=1e-5)
    np.testing.assert_allclose(large.functions.to_numpy(), dense.functions.to_numpy(),
                               rtol=1e-5)


# --- `score` is `compare` of one set --------------------------------------------------------------

def test_score_and_compare_give_the_same_numbers_for_one_set(tmp_path, capsys):
    rng = np.random.default_rng(7)
    X, R = rng.normal(size=(50, 6)), rng.normal(size=(60, 6)) * 1.3
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "r.npy", R)
    for argv, ref in (([], None), (["--reference", str(tmp_path / "r.npy")], R)):
        assert main(["score", str(tmp_path / "x.npy"), *argv, "--json"]) == 0
        scored = json.loads(capsys.readouterr().out)
        compared = dc.compare({"x": X}, ref)
        assert scored["t_cut"] == compared.t_cut  # the same engine: the same bits
        for measure, value in scored["scores"]["embeddings"].items():
            assert value == compared.table.loc["x", measure], measure
        for measure, value in scored["scores"]["comparison"].items():
            assert value == compared.table.loc["x", measure], measure


def test_score_takes_the_large_n_path_and_its_memory_rule(tmp_path, capsys, monkeypatch):
    """30,000 points x 64 need the large-n path's memory, not a dense matrix's (the figure that
    score used to refuse with); a large set scored through the command line goes through it."""
    dense = 16 * 30_000**2
    need, _ = compare_memory.required_memory({"x": 30_000}, 64, metric="euclidean")
    assert need < dense / 4  # 2.7 GB against 14.4 GB for the distances alone
    from diversity_core.magnitude import LargeMagnitudeSpace

    seen = _spaces_seen_with_a_low_threshold(monkeypatch)
    np.save(tmp_path / "x.npy", np.random.default_rng(3).normal(size=(300, 8)))
    assert main(["score", str(tmp_path / "x.npy"), "--metric-space", "euclidean", "--json",
                 "--metrics", "magarea,vendi"]) == 0
    assert seen == [LargeMagnitudeSpace]
    assert json.loads(capsys.readouterr().out)["scores"]["embeddings"]["magarea"] > 0
    # No magnitude measure asked for: no magnitude computed, and no magnitude memory counted.
    seen.clear()
    assert main(["score", str(tmp_path / "x.npy"), "--json", "--metrics", "vendi"]) == 0
    assert seen == [] and json.loads(capsys.readouterr().out)["t_cut"] is None
    assert compare_memory.required_memory({"x": 30_000}, 64, magnitude=False)[0] == 16 * 30_000 * 64


def test_score_solves_only_for_t_conv_and_magarea(tmp_path, capsys, monkeypatch):
    """score returns no magnitude function: on the large-n path it solves for the convergence
    scale and MagArea only (the grid of compare's plots more than doubled 30,000 points' CPU),
    and its numbers are compare's to the bit, with and without the grid."""
    solved = _large_solves(monkeypatch)
    X = np.random.default_rng(5).normal(size=(200, 6))
    np.save(tmp_path / "x.npy", X)
    assert main(["score", str(tmp_path / "x.npy"), "--metric-space", "euclidean", "--json",
                 "--metrics", "magarea"]) == 0
    scored, by_score = json.loads(capsys.readouterr().out), len(solved)
    solved.clear()
    plain = dc.compare({"x": X}, metric="euclidean", measures=["magarea"], functions=False)
    by_compare = len(solved)
    solved.clear()
    with_grid = dc.compare({"x": X}, metric="euclidean", measures=["magarea"])
    # The grid: 45 scales, of which t = 0 (Mag = 1) and t_cut (kept) need no solve.
    assert with_grid.functions.shape[1] == 45 and plain.functions.shape == (1, 0)
    assert by_score == by_compare and len(solved) >= by_compare + 45 - 2
    for result in (plain, with_grid):
        assert result.t_cut == scored["t_cut"]
        assert result.table.loc["x", "magarea"] == scored["scores"]["embeddings"]["magarea"]


def test_the_command_line_compare_solves_the_grid_only_where_it_is_shown(tmp_path, capsys,
                                                                          monkeypatch):
    """``compare``'s table and CSV show no magnitude function: no grid is solved for them; its
    JSON, figure and report show the functions, which are then there."""
    solved = _large_solves(monkeypatch)
    rng = np.random.default_rng(6)
    for name in ("a", "b"):
        np.save(tmp_path / f"{name}.npy", rng.normal(size=(150, 5)))
    files = [str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--metric-space", "euclidean"]
    counts, outputs = {}, {}
    for how in ("table", "--csv", "--json"):
        solved.clear()
        assert main(["compare", *files, *([how] if how != "table" else [])]) == 0
        counts[how], outputs[how] = len(solved), capsys.readouterr().out
    assert counts["table"] == counts["--csv"] < counts["--json"] - 2 * 40
    functions = json.loads(outputs["--json"])["functions"]
    assert len(functions["ts"]) == 45 and all(
        len(values) == 45 and None not in values for values in functions["values"].values())


def _large_solves(monkeypatch) -> list:
    """The large-n path from 100 points on; returns the list that records the scale of every
    solve of a large space."""
    from diversity_core.magnitude import LargeMagnitudeSpace

    solved = []
    solve = LargeMagnitudeSpace._solve
    monkeypatch.setattr(LargeMagnitudeSpace, "_solve",
                        lambda self, t, **kw: solved.append(t) or solve(self, t, **kw))
    monkeypatch.setattr(magnitude_api, "_DENSE_MAX_POINTS", 99)
    return solved


def _spaces_seen_with_a_low_threshold(monkeypatch) -> list:
    """The large-n path from 100 points on; returns the list that records the type of every
    space compare's magnitude seam is given."""
    seen = []
    seam = comparison._magnitude_of_sets

    def spy(matrices, *args, **kwargs):
        seen.extend(type(D) for D in matrices)
        return seam(matrices, *args, **kwargs)

    monkeypatch.setattr(magnitude_api, "_DENSE_MAX_POINTS", 99)
    monkeypatch.setattr(comparison, "_magnitude_of_sets", spy)
    return seen


def test_the_large_path_keeps_every_allowed_thread_inside_compare(monkeypatch):
    """compare limits BLAS to one thread for the dense sets' batch; a large set's own threads
    are counted before that limit, so that its products use every core BLAS may use."""
    from threadpoolctl import threadpool_limits

    from diversity_core.magnitude import LargeMagnitudeSpace, allowed_threads

    counted = []  # the thread count of every threaded pass, when it runs
    count = LargeMagnitudeSpace._thread_count

    def spy(self):
        counted.append(count(self))
        return counted[-1]

    monkeypatch.setattr(LargeMagnitudeSpace, "_thread_count", spy)
    monkeypatch.setattr(magnitude_api, "_DENSE_MAX_POINTS", 99)
    with threadpool_limits(limits=2, user_api="blas"):
        expected = allowed_threads()  # min(2, the usable cores)
        dc.compare({"big": np.random.default_rng(0).normal(size=(150, 4)),
                    "small": np.random.default_rng(1).normal(size=(40, 4))},
                   metric="euclidean", measures=["magarea"])
    assert expected == min(2, len(os.sched_getaffinity(0)))
    assert counted and set(counted) == {expected}  # the build and every product
