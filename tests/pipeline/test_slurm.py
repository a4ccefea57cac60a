"""The workflow on a real SLURM cluster through its profile (workflow/profiles/slurm).

tests/support/slurm/cluster.sh starts a one-node cluster on 127.0.0.1 (munged, slurmctld, slurmd; no
cgroups). The tiny configurations of two experiments run through it with
``--workflow-profile workflow/profiles/slurm`` (the snakemake-executor-plugin-slurm submits every
job with sbatch); the same configurations run locally; the tables must be the same bytes.

Skipped, with the reason, where the daemons cannot run (not root, or Debian's ``slurm-wlm`` and
``munge`` not installed). With ``DIVERSITY_CORE_REQUIRE_SLURM=1`` (set by .ci/run once it has
installed them) a machine that cannot run them fails the test instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workflow_runner import REPO, tiny_config

pytestmark = pytest.mark.slow

CLUSTER = REPO / "tests" / "support" / "slurm" / "cluster.sh"
EXPERIMENTS = ("curvature", "graph_mode_collapse")
# Every rule of the two experiments, as the plugin names its log folders (rule_<name>).
RULES = {
    "curvature_generate", "curvature_convergence", "curvature_t_cut", "curvature_magnitude",
    "curvature_table", "curvature_figure", "curvature_scale_grid", "curvature_sensitivity",
    "curvature_sensitivity_figure", "graphs_fetch_zinc", "graphs_prepare", "graphs_evaluate",
    "graphs_spearman", "graphs_figures",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running one-node cluster: yields (its folder, the environment of a client)."""
    folder = tmp_path_factory.mktemp("slurm")
    done = subprocess.run(["bash", str(CLUSTER), "start", str(folder)], capture_output=True,
                          text=True)
    if done.returncode == 3:
        reason = done.stderr.strip()
        if os.environ.get("DIVERSITY_CORE_REQUIRE_SLURM") == "1":
            pytest.fail(f"DIVERSITY_CORE_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"),
               PATH=f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}")
    try:
        yield folder, env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(folder)], capture_output=True)


def _tables(results: Path) -> dict[str, bytes]:
    """Every CSV the experiments wrote (final tables and interim ones), by relative path."""
    return {str(p.relative_to(results)): p.read_bytes() for p in sorted(results.rglob("*.csv"))}


def test_tiny_experiments_through_sbatch_equal_a_local_run(cluster, tmp_path, tiny_runs):
    folder, env = cluster
    started = time.monotonic()
    out = tmp_path / "slurm"
    command = [
        sys.executable, "-m", "snakemake", *EXPERIMENTS,
        "--workflow-profile", str(REPO / "workflow" / "profiles" / "slurm"),
        "--configfile", *(str(tiny_config(e)) for e in EXPERIMENTS),
        "--config", f"results_dir={out / 'results'}", f"resources_dir={out / 'resources'}",
        "--nolock",
        # This cluster keeps no accounting database, so job states come from squeue (finished
        # jobs stay listed for MinJobAge = 10 min); poll from the first second on.
        "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
        "--slurm-keep-successful-logs", "--slurm-logdir", str(out / "slurm_logs"),
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    slurm_seconds = time.monotonic() - started

    # Every job went through sbatch: the plugin reports a SLURM job id for each, SLURM's job
    # completion record lists each as COMPLETED, and each rule has the plugin's job logs.
    output = done.stdout + done.stderr
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", output))
    records = (folder / "log" / "jobcomp.txt").read_text().splitlines()
    completed = {re.search(r"JobId=(\d+)", r).group(1) for r in records
                 if "JobState=COMPLETED" in r}
    assert len(submitted) >= len(RULES), output[-4000:]
    assert submitted <= completed, (submitted - completed, records[-5:])
    logged = {p.name.removeprefix("rule_") for p in (out / "slurm_logs").glob("rule_*")}
    assert logged == RULES

    # The same configurations locally (the session's tiny runs, beside the other experiments'):
    # the same tables, byte for byte.
    for experiment in EXPERIMENTS:
        local = tiny_runs(experiment)
    folders = {"curvature", "graphs"}  # the two experiments' results folders
    ours = _tables(out / "results")
    theirs = {name: data for name, data in _tables(local / "results").items()
              if name.split("/")[0] in folders}
    assert set(ours) == set(theirs) and len(ours) >= 5, (sorted(ours), sorted(theirs))
    assert {"curvature/table1.csv", "graphs/spearman.csv", "graphs/summary.csv"} <= set(ours)
    different = [name for name in ours if ours[name] != theirs[name]]
    assert not different, different
    print(f"SLURM run of {', '.join(EXPERIMENTS)} (tiny): {slurm_seconds:.0f} s, "
          f"{len(submitted)} sbatch jobs")
