"""results/timings.md: wall time, CPU time and peak memory of each experiment, from Snakemake's
benchmark files (whatever exist: run the workflow first)."""

import os

from _helpers import Inputs, Output, run

from diversity_core.atomic import atomic_write
from diversity_core.reporting.timings import experiment_timings, render_timings


def main(results: Inputs, timings: Output, folders: dict):
    """Write TIMINGS (.md) from the benchmark folders FOLDERS ({experiment: folder}, JSON) of
    the experiments whose final files are RESULTS (waited for, not read)."""
    table = experiment_timings(folders)
    with atomic_write(timings) as out:
        out.write(render_timings(table, cores=os.cpu_count(), load_average=os.getloadavg()))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
