"""Running the Snakemake workflow from tests: the repository is the working directory (as for a
user), results and resources go to a temporary folder given on the command line."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# One tiny configuration per experiment, overlaid on config.yaml (snakemake-workflows' .test/).
TEST_CONFIGS = REPO / ".test"


def tiny_config(experiment: str) -> Path:
    """The tiny configuration of ``experiment`` (its Snakemake target name)."""
    return TEST_CONFIGS / f"config_{experiment}.yaml"


def run_snakemake(*args: str, cwd: Path = REPO, check: bool = True, env: dict | None = None):
    """Snakemake on 2 cores; ``env``: variables added to this process's environment. Without
    Snakemake's lock of the working folder: the test processes (pytest-xdist's workers) run
    Snakemake side by side on their own result folders, and the fetches into the shared
    resources/ hold the package's own folder locks."""
    command = [sys.executable, "-m", "snakemake", "--cores", "2", "--nolock", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env} if env else None)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n"
            f"{done.stderr[-6000:]}"
        )
    return done


def run_tiny(experiment: str, out: Path, *extra: str, resources: Path | None = None,
             check: bool = True):
    """Run ``experiment`` on its tiny configuration with results (and, unless ``resources`` is
    given, resources) under ``out``."""
    resources = resources if resources is not None else out / "resources"
    return run_snakemake(
        experiment, "--configfile", str(tiny_config(experiment)),
        "--config", f"results_dir={out / 'results'}", f"resources_dir={resources}",
        *extra, check=check,
    )


def git(*args: str, cwd: Path) -> str:
    """``git args`` in ``cwd`` (with an identity of its own for commits); its output."""
    command = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout


def clean_copy(dest: Path) -> Path:
    """A fresh checkout as a user's clone would be: the repository's working tree without what
    git ignores (build outputs, resources/, earlier runs' files), committed into a new git
    repository at ``dest``, so that ``git status`` there shows what a run changes."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO)
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a deleted, not yet committed file is listed but absent
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git("init", "-q", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "clone", cwd=dest)
    return dest
