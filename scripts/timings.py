"""results/timings.md: wall time, CPU time and peak memory of each experiment's latest run, from
Snakemake's benchmark files (whatever exist: run the workflow first) and the start times of the
Snakemake invocations in ``.snakemake/log`` of the working directory (where they exist)."""

import os

from _contract import Inputs, Output
from _job import run

from diversity_core.atomic import atomic_write
from diversity_core.reporting.timing_runs import (
    invocation_starts,
    latest_run_timings,
    render_run_timings,
)


def main(results: Inputs, timings: Output, folders: dict):
    """Write TIMINGS (.md) from the benchmark folders FOLDERS ({experiment: folder}, JSON) of
    the experiments whose final files are RESULTS (waited for, not read)."""
    invocations = invocation_starts(os.path.join(".snakemake", "log"))
    table, runs = latest_run_timings(folders, invocations=invocations)
    with atomic_write(timings) as out:
        out.write(render_run_timings(table, runs, cores=os.cpu_count(),
                                     load_average=os.getloadavg()))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
