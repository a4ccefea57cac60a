"""benchmarks/bench_large_commands.py at a small size: both CSVs of ``--csv`` (header lines,
columns, a row per job and rule, the breakdown's products and shares), an unknown rule refused
in one line, and the documentation page reading as many header lines as each file has."""

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_large_commands.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO)


def _table(path: Path) -> tuple[int, list[dict]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    comments = sum(line.startswith("#") for line in lines)
    return comments, list(csv.DictReader(lines[comments:]))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("large")
    run = _run("--points", "700", "--integration", "cc25,hermite_log", "--csv", "--results",
               str(folder))
    assert run.returncode == 0, run.stderr[-3000:]
    return folder


def test_a_row_per_job_and_rule(written):
    comments, rows = _table(written / "large_commands.csv")
    assert comments == 6
    assert [(r["job"], r["integration"], r["n_features"]) for r in rows] == [
        ("score", "cc25", "32"), ("score", "hermite_log", "32"), ("compare", "cc25", "64"),
        ("compare", "hermite_log", "64")]
    for row in rows:
        assert float(row["wall_s"]) > 0 and 0 < float(row["peak_rss_gb"]) < 4
        assert row["within_budget"] == "True"


def test_the_breakdown_counts_products_and_splits_one(written):
    comments, rows = _table(written / "large_product_breakdown.csv")
    assert comments == 6
    parts = {r["part"]: r for r in rows}
    for phase in ("convergence_scale", "mag_area"):
        assert int(parts[phase]["products_float32"]) > 0
        assert int(parts[phase]["products_float64"]) > 0
        assert 0 < float(parts[phase]["share"])
    shares = [float(parts[f"float32 product: {p}"]["share"]) for p in ("scale", "exp", "matvec")]
    assert sum(shares) == pytest.approx(1.0, abs=0.02)
    assert float(parts["read every panel"]["per_product_s"]) >= 0


def test_an_unknown_rule_is_refused_in_one_line():
    run = _run("--integration", "simpson")
    assert run.returncode == 2
    assert "--integration simpson: not a MagArea rule; use one or more of" in run.stderr


@pytest.mark.parametrize("name", ["large_commands.csv", "large_product_breakdown.csv"])
def test_the_page_reads_every_header_line(written, name):
    comments, _ = _table(written / name)
    page = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    reads = re.findall(rf"read_csv\('benchmarks/results/{re.escape(name)}'[^}}]*nrows=(\d+)",
                       page)
    assert reads == [str(comments)]
