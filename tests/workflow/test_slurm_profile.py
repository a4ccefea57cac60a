"""The SLURM profiles as docs/cluster.md documents them: the cluster's partition and account in a
profile of the user's own (a copy of workflow/profiles/slurm-site), every rule's memory and run
time from the workflow profile (workflow/profiles/slurm), both kept when the two are combined.

A workflow profile's top-level key replaces the same key of ``--profile``: so the workflow
profile sets no ``default-resources`` (the user's pass through) and lists every rule that runs a
job under ``set-resources``."""

from __future__ import annotations

import re

import yaml
from workflow_runner import REPO, run_snakemake

WORKFLOW_PROFILE = REPO / "workflow" / "profiles" / "slurm"
SITE_PROFILE = REPO / "workflow" / "profiles" / "slurm-site" / "config.yaml"


def _rules_with_jobs() -> set[str]:
    """Every rule of workflow/rules/ that runs something (a script, shell or run block) on a
    compute node, i.e. neither a target that only gathers inputs nor a local rule."""
    names = set()
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        blocks = re.split(r"^\s*rule (\w+):", path.read_text(encoding="utf-8"), flags=re.M)
        for name, body in zip(blocks[1::2], blocks[2::2], strict=True):
            runs = re.search(r"^\s+(script|shell|run|wrapper|notebook):", body, flags=re.M)
            local = re.search(r"^\s+localrule:\s*True", body, flags=re.M)
            if runs and not local:
                names.add(name)
    return names


def test_every_rule_that_runs_a_job_has_memory_and_run_time():
    profile = yaml.safe_load((WORKFLOW_PROFILE / "config.yaml").read_text(encoding="utf-8"))
    assert "default-resources" not in profile  # it would hide the user's partition and account
    requests = profile["set-resources"]
    rules = _rules_with_jobs()
    assert len(rules) > 40, sorted(rules)
    missing = sorted(rule for rule in rules
                     if not {"mem_mb", "runtime"} <= set(requests.get(rule, {})))
    assert not missing, f"rules without mem_mb and runtime in the SLURM profile: {missing}"
    assert not set(requests) - rules, sorted(set(requests) - rules)  # no stale names


def test_documented_command_keeps_the_site_and_the_rule_resources(tmp_path):
    """The documented command, target first, planned (dry run): every job carries the user's
    partition and account and its rule's memory and run time."""
    site = tmp_path / "slurm-site"
    site.mkdir()
    text = SITE_PROFILE.read_text(encoding="utf-8")
    assert "<partition>" in text and "<account>" in text
    (site / "config.yaml").write_text(
        text.replace("<partition>", "short").replace("<account>", "lab42"), encoding="utf-8")
    done = run_snakemake(
        "curvature", "--profile", str(site), "--workflow-profile", str(WORKFLOW_PROFILE),
        "--configfile", ".test/config_curvature.yaml", "--dry-run",
        "--config", f"results_dir={tmp_path / 'results'}",
        f"resources_dir={tmp_path / 'resources'}")
    jobs = re.findall(r"^rule (\w+):\n(.*?)^\s+resources: ([^\n]*)", done.stdout,
                      flags=re.M | re.S)
    requests = yaml.safe_load((WORKFLOW_PROFILE / "config.yaml").read_text())["set-resources"]
    ran = [(rule, dict(item.split("=", 1) for item in resources.split(", ")))
           for rule, _, resources in jobs if rule != "curvature"]
    assert len(ran) == 12, done.stdout[-3000:]  # the tiny configuration's jobs
    for rule, resources in ran:
        assert resources["slurm_partition"] == "short", (rule, resources)
        assert resources["slurm_account"] == "lab42", (rule, resources)
        assert resources["mem_mb"] == str(requests[rule]["mem_mb"]), (rule, resources)
        assert resources["runtime"] == str(requests[rule]["runtime"]), (rule, resources)
