"""Running the Snakemake workflow from tests: the repository is the working directory (as for a
user), results and resources go to a temporary folder given on the command line."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_snakemake(*args: str, cwd: Path = REPO, check: bool = True):
    command = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n"
            f"{done.stderr[-6000:]}"
        )
    return done


def run_tiny(configfile: Path, out: Path, target: str, *extra: str):
    """Run ``target`` of a tiny configuration with results and resources under ``out``."""
    return run_snakemake(
        "--configfile", str(configfile),
        "--config", f"results_dir={out / 'results'}", f"resources_dir={out / 'resources'}",
        "--nolock", target, *extra,
    )
