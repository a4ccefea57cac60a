"""benchmarks/bench_magnitude.py at tiny sizes: the CSV of ``--csv`` (its header lines, columns
and one row per section, case and rule), the rule of ``--integration`` reaching every timed
path, and the documentation page reading as many header lines as the file has."""

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from diversity_core import magnitude as mg
from diversity_core import pairwise_distances
from diversity_core.magnitude.settings import MagnitudeSettings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_magnitude.py"
HEADER_KEYS = ["command", "date", "machine", "versions", "BLAS threads", "ours", "magnipy",
               "columns", "load average (1/5/15 min) before → after", "note"]
COLUMNS = ["section", "case", "sets", "points", "dim", "metric", "rule", "load", "ours_s",
           "magnipy_s", "ratio", "ours_loop_s", "loop_ratio", "ours_solves", "ours_rel_error",
           "magnipy_rel_error", "batch_vs_loop", "t_cut", "magnipy_t_cut"]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_magnitude

        yield bench_magnitude
    finally:
        sys.path.remove(str(SCRIPT.parent))


def _run(*args, cwd=REPO):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_tiny_run_writes_the_csv_with_its_header(tmp_path):
    out = tmp_path / "bench.csv"
    run = _run("--sizes", "40,60", "--batch-shapes", "12x6,3x25", "--repeats", "2",
               "--threads", "1", "--skip-magnipy", "--integration", "cc25,hermite_log",
               "--csv", str(out), "--note", "tiny test run")
    assert run.returncode == 0, run.stderr[-3000:]
    lines = out.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert lines[:len(header)] == header  # the header first, then the table
    facts = dict(line[2:].split(": ", 1) for line in header)
    assert list(facts) == HEADER_KEYS
    assert facts["command"].endswith("benchmarks/bench_magnitude.py --sizes 40,60 --batch-shapes "
                                     f"12x6,3x25 --repeats 2 --threads 1 --skip-magnipy "
                                     f"--integration cc25,hermite_log --csv {out} --note "
                                     "'tiny test run'")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", facts["date"])
    assert re.search(r"\(.*\); \d+ cores, \d+ usable;", facts["machine"])
    assert facts["versions"].startswith("Python ") and "NumPy" in facts["versions"]
    assert facts["BLAS threads"] == "1"
    assert re.search(r"diversity_core \S+ at commit [0-9a-f]{12}", facts["ours"])
    assert "SciPy" in facts["ours"] and facts["ours"].endswith("rules cc25, hermite_log")
    assert facts["magnipy"] == "not run (--skip-magnipy)"
    assert facts["note"] == "tiny test run"

    rows = list(csv.DictReader(lines[len(header):]))
    assert list(rows[0]) == COLUMNS
    cases = [(r["section"], r["case"], r["sets"], r["points"], r["rule"]) for r in rows]
    assert cases == [("defaults", "clustered", "1", n, rule) for n in ("40", "60")
                     for rule in ("cc25", "hermite_log")] + [
        ("batch", case, sets, points, rule)
        for case, sets, points in (("text", "12", "6"), ("table2", "3", "25"))
        for rule in ("cc25", "hermite_log")]
    for r in rows:
        assert float(r["ours_s"]) > 0 and float(r["ours_solves"]) >= 3
        assert float(r["ours_rel_error"]) < 1e-6  # the default MagArea tolerance
        assert r["magnipy_s"] == r["ratio"] == r["magnipy_rel_error"] == ""
        if r["section"] == "batch":
            assert float(r["batch_vs_loop"]) < 1e-10 and float(r["ours_loop_s"]) > 0
    # The rules differ where it shows: hermite_log's search plus 13 solves, cc25's plus 11 or 23.
    solves = {(r["case"], r["points"], r["rule"]): float(r["ours_solves"]) for r in rows}
    assert any(solves[(c, p, "cc25")] != solves[(c, p, "hermite_log")] for c, p, _ in solves)


def test_the_page_reads_every_header_line(tmp_path):
    out = tmp_path / "bench.csv"
    run = _run("--sizes", "30", "--no-batches", "--repeats", "1", "--threads", "1",
               "--skip-magnipy", "--csv", str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    count = sum(line.startswith("#") for line in out.read_text(encoding="utf-8").splitlines())
    page = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    for name in ("magnitude_vs_magnipy.csv", "magnitude_vs_magnipy_2_threads.csv"):
        reads = re.findall(rf"read_csv\('benchmarks/results/{name}'[^}}]*nrows=(\d+)", page)
        assert reads == [str(count)]
        assert f"--csv benchmarks/results/{name}" in page  # the command is listed


def test_an_unknown_rule_is_refused_in_one_line():
    run = _run("--integration", "cc25,simpson", "--skip-magnipy")
    assert run.returncode == 2
    assert "simpson: not a MagArea rule; use one or more of chebyshev, cc25" in run.stderr


@pytest.mark.parametrize("rule", ["hermite_log", "cc25"])
def test_the_rule_reaches_every_timed_path(bench, rule):
    # The timed functions take MagnitudeSettings(integration=rule): what they return is the
    # engine's result for method=rule, on the defaults path, the batch and the loop.
    settings = MagnitudeSettings(integration=rule)
    X = bench.gaussian_mixture(80, seed=[1, 2])
    D = pairwise_distances(X)
    t_conv, area = bench.ours_defaults(X, settings)
    mg.clear_cache()
    assert area == mg.mag_area(mg.MagnitudeSpace(D), t_conv, method=rule)
    other = "cc25" if rule == "hermite_log" else "hermite_log"
    assert area != mg.mag_area(mg.MagnitudeSpace(D), t_conv, method=other)
    Xs = bench.text_like_sets(6, 8)
    Ds = [pairwise_distances(x, "cosine") for x in Xs]
    t_cut, areas = bench.ours_batch(Xs, settings)
    mg.clear_cache()
    assert np.array_equal(areas, mg.mag_areas(Ds, t_cut, method=rule))
    assert not np.array_equal(areas, mg.mag_areas(Ds, t_cut, method=other))
    t_loop, loop, _ = bench.ours_loop(Xs, settings)
    assert t_loop == pytest.approx(t_cut, rel=1e-12)
    assert np.allclose(loop, [mg.mag_area(mg.MagnitudeSpace(D), t_loop, method=rule)
                              for D in Ds], rtol=1e-12, atol=0)
