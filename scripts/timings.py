"""results/timings.md: wall time, CPU time and peak memory of each experiment, from Snakemake's
benchmark files (whatever exist: run the workflow first)."""

import os
from pathlib import Path

from _helpers import Inputs, Output, run

from diversity_core.reporting.timings import experiment_timings, render_timings


def main(results: Inputs, timings: Output, folders: dict):
    """Write TIMINGS (.md) from the benchmark folders FOLDERS ({experiment: folder}, JSON) of
    the experiments whose final files are RESULTS (waited for, not read)."""
    table = experiment_timings(folders)
    tmp = Path(str(timings) + ".tmp")
    tmp.write_text(render_timings(table, cores=os.cpu_count(), load_average=os.getloadavg()))
    os.replace(tmp, timings)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
