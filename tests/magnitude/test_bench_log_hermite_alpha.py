"""benchmarks/bench_log_hermite_alpha.py: a small run's tables (a row per case, its engine α and
the grid's best, a summary per set and path), and the committed summary against the committed
cases it is made from."""

from result_tables import benchmark, small_run, table

alpha_study = benchmark("bench_log_hermite_alpha")
COMMITTED = alpha_study.OUT


def typed(row: dict) -> dict:
    """A row read back from the CSV, in the types :func:`bench_log_hermite_alpha.summary`
    counts with."""
    return {**row, **{k: float(row[k]) for k in ("engine_rel_estimate", "best_rel_error",
                                                 "engine_estimate_over_error")}}


def test_a_small_run_writes_a_row_per_case_and_a_summary(tmp_path):
    out = tmp_path / "alpha.csv"
    _, rows = small_run("bench_log_hermite_alpha.py", ["--max-n", "60", "--out", str(out)], out,
                        f"python benchmarks/bench_log_hermite_alpha.py --max-n 60 --out {out}")
    assert {r["set"] for r in rows} == {"study"} and {r["path"] for r in rows} == {"cholesky"}
    assert len(rows) == 12  # the study's four clouds of 50 points, three targets each
    grid = {float(a) for a in alpha_study.ALPHAS}
    for row in rows:
        assert float(row["best_alpha"]) in grid
        # The grid's best is at least as accurate as the engine's α, unless the engine's α is
        # not on the grid; every α whose estimate meets rtol is on it.
        if float(row["engine_alpha"]) in grid:
            assert float(row["best_rel_error"]) <= float(row["engine_rel_error"])
        assert {float(a) for a in row["alphas_within_rtol"].split()} <= grid
        assert float(row["least_rel_estimate"]) <= float(row["best_rel_estimate"])
    _, summary = table(out.with_name("alpha_summary.csv"))
    assert summary == [{k: str(v) for k, v in line.items()}
                       for line in alpha_study.summary([typed(r) for r in rows])]


def test_the_committed_summary_is_that_of_the_committed_cases():
    _, rows = table(COMMITTED)
    _, summary = table(COMMITTED.with_name("log_hermite_alpha_summary.csv"))
    assert summary == [{k: str(v) for k, v in line.items()}
                       for line in alpha_study.summary([typed(r) for r in rows])]
    for line in summary:
        cases, ends = int(line["cases"]), int(line["engine_ends_at_13"])
        assert ends <= int(line["some_alpha_ends_at_13"]) <= cases
