"""Run time of each experiment, from the benchmark files Snakemake writes (``benchmark:``).

Snakemake writes one tab-separated file per benchmarked job, with the job's wall time ``s``, its
CPU time ``cpu_time`` (user + system seconds of the job and its children) and its peak resident
memory ``max_rss`` (MB). :func:`experiment_timings` sums them per experiment, and also gives the
*span* of the experiment: from the first job's start to the last job's end, where a job ends when
its benchmark file was last written and starts ``s`` seconds before that. The span is the
experiment's wall time in a run that made all its jobs, whatever ran beside them; when the files
come from several runs (a rerun of one rule), it covers the pause between them too, so the sums
are given as well. Whatever benchmark files exist are used; an experiment without any is left out.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ("experiment", "jobs", "span_s", "wall_s", "cpu_s", "longest_job", "longest_s",
           "peak_rss_mb")


def read_benchmark(path) -> dict:
    """One benchmark file: wall and CPU seconds, peak RSS (MB), and when the job ended."""
    path = Path(path)
    table = pd.read_csv(path, sep="\t")
    if table.empty or "s" not in table.columns:
        raise ValueError(f"{path}: not a Snakemake benchmark file (no column 's').")
    # A rule benchmarked with `repeat(...)` has several rows: the job ran that many times.
    row = table.iloc[-1]

    def number(column):
        value = pd.to_numeric(row.get(column), errors="coerce")
        return float(value) if value is not None and np.isfinite(value) else float("nan")

    return {"job": path.stem, "s": number("s"), "cpu_time": number("cpu_time"),
            "max_rss": number("max_rss"), "end": os.stat(path).st_mtime}


def read_benchmarks(folder) -> list[dict]:
    """The records (:func:`read_benchmark`) of every benchmark file (``*.tsv``) in ``folder``,
    in order of name; empty when there are none."""
    return [read_benchmark(p) for p in sorted(Path(folder).glob("*.tsv"))]


def experiment_timings(folders: dict[str, str | os.PathLike]) -> pd.DataFrame:
    """Per experiment (``{name: its benchmark folder}``) the timings described in the module.

    Returns a frame with the columns of ``COLUMNS`` (seconds and MB), one row per experiment that
    has benchmark files, in the order given, plus a row ``all`` when there are two or more.
    """
    rows, everything = [], []
    for name, folder in folders.items():
        jobs = read_benchmarks(folder)
        if not jobs:
            continue
        everything += jobs
        rows.append(summarise_jobs(name, jobs))
    if len(rows) > 1:
        rows.append(summarise_jobs("all", everything))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def summarise_jobs(name: str, jobs: list[dict]) -> dict:
    """One row of ``COLUMNS`` over ``jobs`` (records of :func:`read_benchmark`, at least one):
    their count, span (first start to last end), summed wall and CPU seconds, the longest job
    and the peak RSS (MB)."""
    frame = pd.DataFrame(jobs)
    start = (frame["end"] - frame["s"]).min()
    longest = frame.loc[frame["s"].idxmax()]
    return {
        "experiment": name,
        "jobs": len(frame),
        "span_s": float(frame["end"].max() - start),
        "wall_s": float(frame["s"].sum()),
        "cpu_s": float(frame["cpu_time"].sum(min_count=1)),
        "longest_job": longest["job"],
        "longest_s": float(longest["s"]),
        "peak_rss_mb": float(frame["max_rss"].max()),
    }


def _duration(seconds: float) -> str:
    if not np.isfinite(seconds):
        return "—"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def render_timings(table: pd.DataFrame, cores: int | None = None,
                   load_average: tuple[float, float, float] | None = None) -> str:
    """Markdown table of :func:`experiment_timings`, with how to read it."""
    lines = [
        "# Run time per experiment",
        "",
        "From Snakemake's benchmark files (`results/<experiment>/benchmarks/*.tsv`; "
        "`scripts/timings.py`). *Span*: first job's start to last job's end (the experiment's "
        "wall time in the run that made its files); *jobs' wall* and *CPU*: sums over its jobs "
        "(the wall time on one core, and the work done); *peak RSS*: the largest job.",
        "",
    ]
    context = []
    if cores:
        context.append(f"{cores} CPU cores")
    if load_average:
        loads = ", ".join(f"{x:.1f}" for x in load_average)
        context.append(f"load average when summarised {loads}")
    if context:
        lines += ["Machine: " + "; ".join(context) + ".", ""]
    if table.empty:
        return "\n".join(lines + ["No benchmark files yet: run the workflow first.", ""])
    lines += [
        "| experiment | jobs | span | jobs' wall | CPU | longest job | peak RSS |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        lines.append(
            f"| {row.experiment} | {row.jobs} | {_duration(row.span_s)} | "
            f"{_duration(row.wall_s)} | {_duration(row.cpu_s)} | "
            f"{row.longest_job} ({_duration(row.longest_s)}) | {row.peak_rss_mb:.0f} MB |")
    return "\n".join(lines + [""])
