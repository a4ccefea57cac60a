"""The workflow and the code stay lint-clean (snakemake --lint, ruff)."""

import subprocess
import sys

import pytest
from workflow_runner import REPO, run_snakemake


def test_snakemake_lint():
    done = run_snakemake("--lint", check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


def test_ruff():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", str(REPO)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-6000:]


@pytest.mark.parametrize("script", sorted((REPO / "scripts").glob("[!_]*.py")))
def test_rule_scripts_run_outside_snakemake(script):
    """Every rule script answers --help from the command line (PyPSA-Eur style)."""
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr[-2000:]
