"""results/timings.md: wall time, CPU time and peak memory of each experiment, from Snakemake's
benchmark files (whatever exist: run the workflow first)."""

import json
import os
from pathlib import Path

from _helpers import run

from diversity_core.reporting.timings import experiment_timings, render_timings


def main(timings, folders=None, results_dir="results"):
    """Write TIMINGS (.md) from the benchmark folders FOLDERS ({experiment: folder}, JSON); by
    default every RESULTS_DIR/<experiment>/benchmarks/ folder."""
    if isinstance(folders, str):  # from the command line
        folders = json.loads(folders)
    if not folders:
        folders = {p.parent.name: str(p) for p in sorted(Path(results_dir).glob("*/benchmarks"))}
    table = experiment_timings(folders)
    tmp = Path(str(timings) + ".tmp")
    tmp.write_text(render_timings(table, cores=os.cpu_count(), load_average=os.getloadavg()))
    os.replace(tmp, timings)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
