"""One coherent run per experiment in ``results/timings.md``.

An experiment's benchmark folder keeps one file per job, each from whichever Snakemake run last
made that job's outputs: after a rerun of a few rules, or a run resumed days later, its files
come from several runs, and a *span* from the first job's start to the last job's end would
cover the days between them. Here every experiment is summarised over the jobs of **its latest
run** only, and the files of its earlier runs are counted and named as left out.

What makes a run: the benchmark files carry no identifier of the Snakemake invocation that
wrote them, so runs are told apart by time, over the jobs of every experiment together (a run
is the workflow's: in a run of everything, one experiment's jobs may pause for an hour while the
others' run). A job runs from ``end - s`` to ``end`` (``end``: the file's modification time,
``s``: its wall time). Sorted by start, a job begins a new run

* when it starts more than ``gap_s`` seconds after every earlier job ended (the workflow was
  idle that long: within one invocation, jobs follow each other within seconds, and the
  unbenchmarked jobs between them, fetches and figures, take minutes at most), or
* when a Snakemake invocation started between the end of the earlier jobs and its start
  (``invocations``: the start times of the logs in ``.snakemake/log/``, where they exist).

A total across experiments (a row ``all``) is given only when every row is the same run (one
``snakemake`` of the whole workflow, none of its experiments rerun since): then its span is that
run's wall time. Otherwise the rows are different runs, and their spans do not add up to the
wall time of anything.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from .timings import COLUMNS, read_benchmarks, render_timings, summarise_jobs

__all__ = ["RUN_GAP_S", "invocation_starts", "latest_run_timings", "render_run_timings",
           "split_runs"]

# Idle time (seconds) that ends a run: longer than any pause between the jobs of one invocation
# (an unbenchmarked fetch or figure), shorter than the time between two invocations by hand.
RUN_GAP_S = 600.0

# ``.snakemake/log/2026-11-26T175311.422379.snakemake.log``: the invocation's local start time.
_LOG_NAME = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{6}\.\d+)\.snakemake\.log")


def invocation_starts(log_folder) -> list[float]:
    """The start times (POSIX seconds) of the Snakemake invocations logged in ``log_folder``
    (``.snakemake/log``: one file per invocation, named by its local start time); empty when
    the folder does not exist."""
    folder = Path(log_folder)
    if not folder.is_dir():
        return []
    starts = []
    for path in folder.iterdir():
        match = _LOG_NAME.fullmatch(path.name)
        if match:  # Snakemake names its logs by datetime.now(): local time
            starts.append(dt.datetime.strptime(match[1], "%Y-%m-%dT%H%M%S.%f").timestamp())
    return sorted(starts)


def split_runs(jobs: Sequence[Mapping], *, gap_s: float = RUN_GAP_S,
               invocations: Iterable[float] = ()) -> list[list[Mapping]]:
    """Group benchmarked jobs into runs, by the rules of the module docstring.

    Parameters
    ----------
    jobs : records of :func:`~diversity_core.reporting.timings.read_benchmark` (``s``: wall
        seconds, ``end``: POSIX seconds)
    gap_s : idle seconds that end a run
    invocations : start times (POSIX seconds) of Snakemake invocations, if known

    Returns
    -------
    runs : lists of jobs, in order of their first start; each run's jobs in order of start
    """
    if gap_s < 0:
        raise ValueError(f"gap_s must be >= 0; got {gap_s}.")
    starts = sorted(invocations)
    ordered = sorted(jobs, key=lambda job: job["end"] - job["s"])
    runs: list[list[Mapping]] = []
    last_end = None
    for job in ordered:
        start = job["end"] - job["s"]
        new = (last_end is None or start > last_end + gap_s
               or any(last_end < t <= start for t in starts))
        if new:
            runs.append([])
            last_end = job["end"]
        runs[-1].append(job)
        last_end = max(last_end, job["end"])
    return runs


def latest_run_timings(folders: Mapping[str, str | os.PathLike], *, gap_s: float = RUN_GAP_S,
                       invocations: Iterable[float] = ()) -> tuple[pd.DataFrame, dict]:
    """Per experiment (``{name: its benchmark folder}``) the timings of its latest run.

    Returns
    -------
    table : the columns of :data:`~diversity_core.reporting.timings.COLUMNS` (seconds and MB),
        one row per experiment that has benchmark files, in the order given, over the jobs of
        its latest run only; then a row ``all`` over them together if, and only if, two or
        more experiments have files and their latest runs are one run
    runs : ``{name: {"start": POSIX seconds of the run's first start, "jobs": its jobs,
        "left_out": benchmark files of earlier runs, "earlier_runs": how many}}``, ``all``
        too when the table has that row
    """
    invocations = list(invocations)
    counts, everyone = {}, []
    for name, folder in folders.items():
        jobs = read_benchmarks(folder)
        if jobs:
            counts[name] = len(jobs)
            everyone += [dict(job, experiment=name) for job in jobs]
    # Runs are the workflow's, not an experiment's: in one run of everything an experiment's jobs
    # may pause for an hour while the others' run.
    grouped = split_runs(everyone, gap_s=gap_s, invocations=invocations)
    rows, runs, latest_index = [], {}, {}
    for name in counts:
        having = [i for i, run in enumerate(grouped) if any(j["experiment"] == name for j in run)]
        latest_index[name] = having[-1]
        latest = [job for job in grouped[having[-1]] if job["experiment"] == name]
        rows.append(summarise_jobs(name, latest))
        runs[name] = {"start": min(job["end"] - job["s"] for job in latest),
                      "jobs": len(latest), "left_out": counts[name] - len(latest),
                      "earlier_runs": len(having) - 1}
    shared = set(latest_index.values())
    if len(rows) > 1 and len(shared) == 1:
        last = grouped[shared.pop()]  # every experiment's latest run is this one run
        rows.append(summarise_jobs("all", last))
        runs["all"] = {"start": min(job["end"] - job["s"] for job in last),
                       "jobs": len(last), "left_out": 0, "earlier_runs": 0}
    return pd.DataFrame(rows, columns=list(COLUMNS)), runs


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def render_run_timings(table: pd.DataFrame, runs: Mapping[str, Mapping], *,
                       gap_s: float = RUN_GAP_S, cores: int | None = None,
                       load_average: tuple[float, float, float] | None = None) -> str:
    """Markdown of :func:`latest_run_timings`: the table
    (:func:`~diversity_core.reporting.timings.render_timings`), then which run each row is and
    what was left out."""
    text = render_timings(table, cores=cores, load_average=load_average)
    if table.empty:
        return text
    rule = ("Each row is the experiment's latest run: its jobs from one Snakemake run (a job "
            f"more than {gap_s / 60:g} min after every earlier job ended, or after a new "
            "invocation began, starts a new run); benchmark files of earlier runs are left "
            "out.")
    if "all" in runs:
        total = (f" Every row is the same run, which began {_when(runs['all']['start'])}: "
                 "*all* is that run as a whole, its span the run's wall time from its first "
                 "benchmarked job's start to its last one's end.")
    else:
        total = (" The rows are different runs: no total is given (their spans do not add up "
                 "to a wall time).")
    lines = [text.rstrip("\n"), "", rule + total, ""]
    for name, run in runs.items():
        if name == "all":
            continue
        left = ""
        if run["left_out"]:
            left = (f"; {run['left_out']} benchmark file{'s' if run['left_out'] > 1 else ''} "
                    f"of {run['earlier_runs']} earlier run"
                    f"{'s' if run['earlier_runs'] > 1 else ''} left out")
        lines.append(f"- {name}: the run that began {_when(run['start'])}, {run['jobs']} "
                     f"job{'s' if run['jobs'] > 1 else ''}{left}.")
    return "\n".join(lines + [""])
