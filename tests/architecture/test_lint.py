"""The workflow and the code stay lint-clean (snakemake --lint, ruff)."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from workflow_runner import REPO, run_snakemake


def test_snakemake_lint():
    done = run_snakemake("--lint", check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


def test_ruff():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", str(REPO)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-6000:]


SCRIPTS = sorted((REPO / "scripts").glob("[!_]*.py"))

# Runs each script given on its command line as `python <script> --help` would (as __main__,
# its folder first on sys.path, argv[0] its path), one after the other in this one interpreter,
# and writes each one's exit status and output to the JSON file named first.
HELP_OF_EACH = r"""
import contextlib, io, json, runpy, sys, traceback
report, scripts = sys.argv[1], sys.argv[2:]
sys.path.insert(0, str(__import__("pathlib").Path(scripts[0]).parent))
answers = {}
for script in scripts:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [script, "--help"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 1
    answers[script] = {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
with open(report, "w") as stream:
    json.dump(answers, stream)
"""


@pytest.fixture(scope="module")
def help_of_each_script(tmp_path_factory):
    """`--help` of every rule script, all in one Python process started from the command line
    (outside Snakemake): script -> its exit status, stdout and stderr."""
    report = tmp_path_factory.mktemp("help") / "help.json"
    done = subprocess.run([sys.executable, "-c", HELP_OF_EACH, str(report), *map(str, SCRIPTS)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return {script: SimpleNamespace(**answer)
            for script, answer in json.loads(report.read_text()).items()}


@pytest.mark.parametrize("script", SCRIPTS)
def test_rule_scripts_run_outside_snakemake(script, help_of_each_script):
    """Every rule script answers --help from the command line (PyPSA-Eur style)."""
    done = help_of_each_script[str(script)]
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr[-2000:]
