"""benchmarks/bench_hermite_d2.py: a small run's three CSVs (header lines, a row per case with
each rule's solves, true error and time ratios, a row per batch, a summary row per path)."""

from result_tables import benchmark, small_run, table

bench = benchmark("bench_hermite_d2")


def test_a_small_run_writes_its_three_tables(tmp_path):
    out = tmp_path / "d2.csv"
    _, rows = small_run(
        "bench_hermite_d2.py", ["--max-n", "50", "--batches", "6x12", "--out", str(out)], out,
        f"python benchmarks/bench_hermite_d2.py --max-n 50 --out {out} --batches 6x12")
    assert list(rows[0]) == bench.COLUMNS
    assert len(rows) == sum(len(c[4]) for _, c in bench.study.clouds(50))
    for row in rows:  # 50 points: Cholesky, and the first stage's estimate suffices
        assert row["path"] == "cholesky"
        assert int(row["hermite_d2_solves"]) == 9 and int(row["hermite_log_solves"]) >= 13
        assert int(row["cc25_solves"]) in (11, 23)  # the 13- or the 25-point level
        seconds = {}
        for rule in bench.RULES:
            assert 0 <= float(row[f"{rule}_rel_error"]) <= 1e-6
            seconds[rule] = float(row[f"{rule}_seconds"])
            assert seconds[rule] > 0
        for column, top, bottom in bench.RATIOS:  # of the rounded times, to their rounding
            assert abs(float(row[column]) - seconds[top] / seconds[bottom]) \
                <= 0.01 * seconds[top] / seconds[bottom]
    _, batches = table(out.with_name("d2_batch.csv"))
    assert [(r["sets"], r["points"]) for r in batches] == [("6", "12")]
    _, summary = table(out.with_name("d2_summary.csv"))
    assert [r["path"] for r in summary] == ["cholesky"]
    assert int(summary[0]["cases"]) == len(rows)
    assert int(summary[0]["hermite_d2_max_solves"]) == 9
    for column, _, _ in bench.RATIOS:
        assert float(summary[0][f"median_{column}"]) > 0
    assert list(batches[0])[-len(bench.RATIOS):] == [c for c, _, _ in bench.RATIOS]
