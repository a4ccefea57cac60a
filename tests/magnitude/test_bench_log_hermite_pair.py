"""benchmarks/bench_log_hermite_pair.py: a small run's table (header lines, a row per pair of
the seven points 1, 5, ..., 25), and the engine's second stage against the committed table."""

from pathlib import Path

from result_tables import small_run, table

from diversity_core.magnitude import _quadrature

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "benchmarks" / "results" / "log_hermite_pair.csv"


def test_a_small_run_writes_a_row_per_pair(tmp_path):
    out = tmp_path / "pairs.csv"
    _, rows = small_run("bench_log_hermite_pair.py", ["--max-n", "120", "--out", str(out)], out,
                        f"python benchmarks/bench_log_hermite_pair.py --max-n 120 --out {out}")
    seven = _quadrature._LOG_HERMITE_STAGES[1] + _quadrature._LOG_HERMITE_STAGES[2]
    assert sorted(tuple(map(int, r["pair"].split())) for r in rows) == sorted(
        (a, b) for a in seven for b in seven if a < b)
    for row in rows:
        for which in ("study", "holdout"):
            cases, past = int(row[f"{which}_cases"]), int(row[f"{which}_past_15"])
            assert cases > 0 and 0 <= int(row[f"{which}_ended_at_17"]) <= past <= cases
            assert 0 <= float(row[f"{which}_worst_rel_error_ended"]) <= 1e-6
            assert float(row[f"{which}_least_estimate_over_error"]) > 0


def test_the_second_stage_is_the_pair_the_committed_study_chooses():
    """Among the pairs whose estimate never undershot the true error on the study's clouds, the
    one that ended the most cases at 17 points."""
    _, rows = table(COMMITTED)
    reliable = [r for r in rows if float(r["study_least_estimate_over_error"]) >= 1.0]
    best = max(reliable, key=lambda r: int(r["study_ended_at_17"]))
    assert tuple(map(int, best["pair"].split())) == _quadrature._LOG_HERMITE_STAGES[1]
    assert [r["pair"] for r in reliable if r["study_ended_at_17"] == best["study_ended_at_17"]] \
        == [best["pair"]]
