"""results/timings.md shows one run per experiment (diversity_core.reporting.timing_runs): runs
told apart by idle gaps and by Snakemake invocations, on synthetic benchmark files."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diversity_core.reporting import timing_runs as R

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400.0


def _benchmark(path, seconds, end, *, cpu=None, rss=100.0):
    """A Snakemake benchmark file of a job of ``seconds`` that ended at ``end``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cpu = seconds if cpu is None else cpu
    path.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\t"
                    f"cpu_time\n{seconds}\t0:00:00\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")
    os.utime(path, (end, end))


def _job(start, seconds, name="j"):
    return {"job": name, "s": float(seconds), "cpu_time": float(seconds), "max_rss": 1.0,
            "end": float(start + seconds)}


def test_split_runs_by_idle_gap():
    jobs = [_job(0, 10, "a"), _job(12, 100, "b"), _job(110, 5, "c"),  # one run: ends at 115
            _job(115 + 601, 3, "d"), _job(720, 4, "e")]                # 601 s idle: a new one
    runs = R.split_runs(jobs, gap_s=600)
    assert [[j["job"] for j in run] for run in runs] == [["a", "b", "c"], ["d", "e"]]
    # The gap is measured from the end of every earlier job, not the last one started.
    assert len(R.split_runs([_job(0, 1000), _job(10, 1), _job(900, 1)], gap_s=600)) == 1
    assert len(R.split_runs(jobs, gap_s=10_000)) == 1
    assert R.split_runs([], gap_s=600) == []
    with pytest.raises(ValueError, match="gap_s"):
        R.split_runs(jobs, gap_s=-1)


def test_split_runs_by_invocation():
    jobs = [_job(0, 10, "a"), _job(15, 10, "b"), _job(30, 10, "c")]
    # An invocation that began between b's end and c's start: c is another run, whatever the gap.
    runs = R.split_runs(jobs, gap_s=600, invocations=[-5.0, 27.0])
    assert [[j["job"] for j in run] for run in runs] == [["a", "b"], ["c"]]
    # One that began while jobs ran (a dry run beside them) splits nothing.
    assert len(R.split_runs(jobs, gap_s=600, invocations=[5.0])) == 1


def test_latest_run_per_experiment_and_no_total(tmp_path):
    day1, day3 = 1_000_000.0, 1_000_000.0 + 2 * DAY
    a = tmp_path / "a" / "benchmarks"
    _benchmark(a / "old_fetch.tsv", 50.0, day1 + 50)          # first run, two days earlier
    _benchmark(a / "old_embed.tsv", 3000.0, day1 + 3100)
    _benchmark(a / "embed.tsv", 20.0, day3 + 20)               # the rerun
    _benchmark(a / "figure.tsv", 30.0, day3 + 60, rss=300.0)
    b = tmp_path / "b" / "benchmarks"
    _benchmark(b / "one.tsv", 5.0, day1 + 10)
    table, runs = R.latest_run_timings({"A": a, "B": b, "C": tmp_path / "c"}, gap_s=600)
    assert list(table["experiment"]) == ["A", "B"]  # no "all" row (two runs); C has no files
    row = table.set_index("experiment").loc["A"]
    assert row["jobs"] == 2 and row["wall_s"] == 50 and row["span_s"] == pytest.approx(60)
    assert row["longest_job"] == "figure" and row["peak_rss_mb"] == 300
    assert runs["A"] == {"start": day3, "jobs": 2, "left_out": 2, "earlier_runs": 1}
    assert runs["B"]["left_out"] == 0
    text = R.render_run_timings(table, runs, gap_s=600, cores=2, load_average=(1.0, 1.0, 1.0))
    assert "| A | 2 | 1 min 00 s | 50 s |" in text
    assert "| all |" not in text and "no total is given" in text
    when = dt.datetime.fromtimestamp(day3, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    assert f"- A: the run that began {when}, 2 jobs; 2 benchmark files of 1 earlier run left out." \
        in text
    assert "- B: the run that began" in text and "1 job." in text
    assert "No benchmark files" in R.render_run_timings(*R.latest_run_timings({}))


def test_a_total_only_when_every_row_is_one_run(tmp_path):
    day1 = 1_000_000.0
    a, b = tmp_path / "a" / "benchmarks", tmp_path / "b" / "benchmarks"
    # One full run: A's jobs, then B's while A's last one still runs, then A's figure.
    _benchmark(a / "embed.tsv", 100.0, day1 + 100, cpu=150.0, rss=500.0)
    _benchmark(b / "scores.tsv", 40.0, day1 + 130, cpu=30.0, rss=900.0)
    _benchmark(a / "figure.tsv", 10.0, day1 + 400)
    table, runs = R.latest_run_timings({"A": a, "B": b}, gap_s=600)
    assert list(table["experiment"]) == ["A", "B", "all"]
    total = table.set_index("experiment").loc["all"]
    assert total["jobs"] == 3 and total["span_s"] == pytest.approx(400)
    assert total["wall_s"] == 150 and total["cpu_s"] == 190 and total["peak_rss_mb"] == 900
    assert total["longest_job"] == "embed"
    assert runs["all"] == {"start": day1, "jobs": 3, "left_out": 0, "earlier_runs": 0}
    text = R.render_run_timings(table, runs, gap_s=600)
    assert "| all | 3 | 6 min 40 s |" in text and "Every row is the same run" in text
    assert "no total is given" not in text and "- all:" not in text

    # Experiments interleave in one run: C's two jobs, half an hour apart, are one run while D's
    # jobs fill the half hour (the workflow was never idle for 10 minutes).
    c, d = tmp_path / "c" / "benchmarks", tmp_path / "d" / "benchmarks"
    _benchmark(c / "early.tsv", 60.0, day1 + 60)
    for k in range(6):
        _benchmark(d / f"step{k}.tsv", 300.0, day1 + 60 + 300 * (k + 1))
    _benchmark(c / "late.tsv", 60.0, day1 + 1920)
    table, runs = R.latest_run_timings({"C": c, "D": d}, gap_s=600)
    assert runs["C"]["jobs"] == 2 and runs["C"]["left_out"] == 0
    assert table.set_index("experiment").loc["C", "span_s"] == pytest.approx(1920)
    assert runs["all"]["jobs"] == 8

    # B rerun a day later: the rows are two runs, and no total is given.
    _benchmark(b / "scores.tsv", 40.0, day1 + DAY)
    table, runs = R.latest_run_timings({"A": a, "B": b}, gap_s=600)
    assert list(table["experiment"]) == ["A", "B"] and "all" not in runs
    # A rerun of one of A's jobs: A's latest run is that job alone, B's is the full run's.
    _benchmark(b / "scores.tsv", 40.0, day1 + 130)
    _benchmark(a / "figure.tsv", 10.0, day1 + DAY)
    table, runs = R.latest_run_timings({"A": a, "B": b}, gap_s=600)
    assert list(table["experiment"]) == ["A", "B"]
    # One experiment alone: its row, no total.
    table, runs = R.latest_run_timings({"B": b}, gap_s=600)
    assert list(table["experiment"]) == ["B"]


def test_invocation_starts_from_snakemake_logs(tmp_path):
    logs = tmp_path / ".snakemake" / "log"
    assert R.invocation_starts(logs) == []
    logs.mkdir(parents=True)
    (logs / "2026-11-26T175311.422379.snakemake.log").write_text("")
    (logs / "2026-11-25T090000.000001.snakemake.log").write_text("")
    (logs / "notes.txt").write_text("")
    starts = R.invocation_starts(logs)
    expected = [dt.datetime(2026, 11, 25, 9, 0, 0, 1).timestamp(),
                dt.datetime(2026, 11, 26, 17, 53, 11, 422379).timestamp()]
    assert starts == pytest.approx(expected)


def test_timings_script_reports_the_latest_run(tmp_path):
    now = 2_000_000.0
    _benchmark(tmp_path / "curvature" / "benchmarks" / "old.tsv", 3.0, now - DAY)
    _benchmark(tmp_path / "curvature" / "benchmarks" / "x.tsv", 4.0, now)
    out = tmp_path / "timings.md"
    folders = json.dumps({"curvature": str(tmp_path / "curvature" / "benchmarks")})
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "timings.py"), "--results",
                           "--timings", str(out), "--folders", folders], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    assert "| curvature | 1 | 4 s |" in text and "1 benchmark file of 1 earlier run" in text
