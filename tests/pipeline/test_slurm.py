"""The workflow on a real SLURM cluster through its profile (workflow/profiles/slurm).

tests/support/slurm/cluster.sh starts a one-node cluster on 127.0.0.1 (munged, slurmctld, slurmd; no
cgroups). The tiny configuration of an experiment runs through it with docs/cluster.md's
command, as written, in a fresh clone (the axioms, one job; the curvature experiment's chain of
jobs and the graph experiment in the extended tier): the targets, ``--profile`` (a copy of
workflow/profiles/slurm-site filled in for this cluster), ``--workflow-profile
workflow/profiles/slurm`` (the snakemake-executor-plugin-slurm submits every job with sbatch);
the same configuration runs locally; the tables must be the same bytes.

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
import yaml
from workflow_runner import REPO, clean_copy, git, tiny_config

pytestmark = pytest.mark.slow

CLUSTER = REPO / "tests" / "support" / "slurm" / "cluster.sh"
# experiment -> (its results folder, every rule as the plugin names its log folders
# (rule_<name>), the final tables that must be among those compared).
EXPERIMENTS = {
    "axioms": ("axioms", {"axioms_check"}, {"axioms/axioms.csv"}),
    "curvature": ("curvature", {
        "curvature_generate", "curvature_convergence", "curvature_t_cut", "curvature_magnitude",
        "curvature_table", "curvature_figure", "curvature_scale_grid", "curvature_sensitivity",
        "curvature_sensitivity_figure"}, {"curvature/table1.csv"}),
    "graph_mode_collapse": ("graphs", {
        "graphs_fetch_zinc", "graphs_prepare", "graphs_evaluate", "graphs_spearman",
        "graphs_figures"}, {"graphs/spearman.csv", "graphs/summary.csv"}),
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


def _site_profile(folder: Path, cluster: Path) -> Path:
    """The user's copy of workflow/profiles/slurm-site for this cluster: its partition, no
    account (it keeps no accounting), and the options docs/cluster.md gives for a cluster
    without an accounting database, plus the job logs the test reads."""
    text = (REPO / "workflow" / "profiles" / "slurm-site" / "config.yaml").read_text()
    lines = [line for line in text.replace("<partition>", "test").splitlines()
             if "slurm_account" not in line]
    lines += ["slurm-status-command: squeue",
              # Poll from the first second on (finished jobs stay listed for MinJobAge = 10 min).
              "slurm-init-seconds-before-status-checks: 1",
              "slurm-keep-successful-logs: true",
              f"slurm-logdir: {cluster / 'slurm_logs'}"]
    folder.mkdir()
    (folder / "config.yaml").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("experiment", [
    "axioms", *(pytest.param(e, marks=pytest.mark.extended)
                for e in ("curvature", "graph_mode_collapse"))])
def test_a_tiny_experiment_through_sbatch_equals_a_local_run(experiment, cluster, tmp_path,
                                                             tiny_runs):
    folder, env = cluster
    results, rules, tables = EXPERIMENTS[experiment]
    started = time.monotonic()
    # docs/cluster.md's command, as written, in a fresh clone: the target first, the user's
    # profile, the workflow profile, the tiny configuration (which writes to .test/results).
    clone = clean_copy(tmp_path / "clone")
    site = _site_profile(tmp_path / "slurm-site", tmp_path)
    command = [
        sys.executable, "-m", "snakemake", experiment,
        "--profile", str(site), "--workflow-profile", "workflow/profiles/slurm",
        "--configfile", str(tiny_config(experiment).relative_to(REPO)),
    ]
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    slurm_seconds = time.monotonic() - started
    out = clone / ".test"
    assert git("status", "--porcelain", cwd=clone) == ""  # results/ untouched

    output = done.stdout + done.stderr
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", output))
    records = (folder / "log" / "jobcomp.txt").read_text().splitlines()
    completed = {re.search(r"JobId=(\d+)", r).group(1) for r in records
                 if "JobState=COMPLETED" in r}
    assert len(submitted) >= len(rules), output[-4000:]
    assert submitted <= completed, (submitted - completed, records[-5:])
    # Each job ran in the user's partition with a rule's run time and memory from the workflow
    # profile (the partition itself has no time limit, and the node offers all its memory).
    profile = yaml.safe_load((REPO / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())
    asked = {(str(r["runtime"]), f"{r['mem_mb']}M") for r in profile["set-resources"].values()}
    for record in (r for r in records if re.search(r"JobId=(\d+)", r).group(1) in submitted):
        limits = (re.search(r"TimeLimit=(\S+)", record).group(1),
                  re.search(r"\bmem=(\w+)", record).group(1))
        assert "Partition=test " in record and limits in asked, record
    logged = {p.name.removeprefix("rule_") for p in (tmp_path / "slurm_logs").glob("rule_*")}
    assert logged == rules

    # The same configuration locally (the shared tiny run, beside the other experiments'):
    # the same tables, byte for byte.
    local = tiny_runs(experiment)
    ours = _tables(out / "results")
    theirs = {name: data for name, data in _tables(local / "results").items()
              if name.split("/")[0] == results}
    assert set(ours) == set(theirs) and tables <= set(ours), (sorted(ours), sorted(theirs))
    different = [name for name in ours if ours[name] != theirs[name]]
    assert not different, different
    print(f"SLURM run of {experiment} (tiny): {slurm_seconds:.0f} s, "
          f"{len(submitted)} sbatch jobs")
