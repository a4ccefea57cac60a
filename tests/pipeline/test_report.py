"""`snakemake --report report.html` on the tiny configurations of every experiment: every final
table and figure (and results/summary.md) is in the report, with its caption."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from workflow_runner import REPO, TEST_CONFIGS, run_snakemake, tiny_config

pytestmark = pytest.mark.slow

# Every experiment that has a tiny configuration (.test/config_<target>.yaml).
EXPERIMENTS = sorted(p.stem.removeprefix("config_") for p in TEST_CONFIGS.glob("config_*.yaml"))
CAPTIONS = REPO / "workflow" / "report"


def _job_counts(output: str) -> dict[str, int]:
    """Snakemake's "Job stats" table: rule -> jobs to run (empty when nothing is to be done)."""
    lines = output.split("Job stats:", 1)[1].splitlines() if "Job stats:" in output else []
    counts = {}
    for line in lines[3:]:
        if not line.strip() or line.split()[0] == "total":
            break
        rule, count = line.split()
        counts[rule] = int(count)
    return counts


@pytest.fixture(scope="module")
def report(tiny_runs):
    """The tiny configurations of all experiments in one results folder (each the shared
    run of it), then rule `all` over them all (one run: only results/summary.md and the
    leaderboard are left to make), then the report."""
    for experiment in EXPERIMENTS:
        out = tiny_runs(experiment)
    arguments = [
        "--configfile", *(str(tiny_config(e)) for e in EXPERIMENTS),
        "--config", f"results_dir={out / 'results'}", f"resources_dir={tiny_runs.resources}",
        f"experiments=[{','.join(EXPERIMENTS)}]", "--nolock",
    ]
    done = run_snakemake("all", *arguments)
    # The experiments' own runs are those of rule `all`: the merged configuration changes none.
    assert _job_counts(done.stdout + done.stderr) == {"all": 1, "summary": 1, "leaderboard": 1}, \
        done.stderr[-4000:]
    run_snakemake("all", *arguments, "--report", str(out / "report.html"))
    return out / "results", (out / "report.html").read_text()


def _final_results(results: Path) -> list[Path]:
    """The final tables and figures: the files at the top of results/ and results/<experiment>/
    (not interim/, logs/, benchmarks/), without their provenance records."""
    files = [p for p in results.glob("*") if p.is_file()]
    files += [p for p in results.glob("*/*")
              if p.is_file() and p.parent.name not in ("logs", "interim", "benchmarks")]
    return sorted(p for p in files if not p.name.endswith(".provenance.json"))


def test_every_final_result_is_in_the_report(report):
    results, page = report
    finals = _final_results(results)
    names = {p.name for p in finals}
    # Each experiment's tables and figures (PNG and PDF), and the summary.
    assert {"table1.csv", "figure2.png", "figure2.pdf", "axioms.csv", "axioms_summary.md",
            "mode_dropping.csv", "scenario_agreement.csv", "figure5.png", "figure5.pdf",
            "spearman.csv", "summary.csv", "figure6.png", "figure6.pdf",
            "figure_all_datasets.png", "figure_all_datasets.pdf", "summary.md",
            "r2_scores.csv", "ranking.csv", "gains.csv", "figure3.png", "figure3.pdf",
            "figure4.png", "figure4.pdf", "table2.csv", "table_s5.csv", "confusion_magdiff.csv",
            "magnitude_functions.png", "magnitude_functions.pdf", "confusion_magdiff.png",
            "confusion_magdiff.pdf"} <= names
    missing = [str(p.relative_to(results)) for p in finals
               if f'"{p}"' not in page or f"filename={p.name};base64," not in page]
    assert not missing, f"not in the report: {missing}"


def test_every_caption_is_used_and_rendered(report):
    _, page = report
    # The report holds captions as HTML (apostrophes escaped) inside JSON (non-ASCII as \uXXXX).
    text = html.unescape(page)
    used = set()
    for rules in (REPO / "workflow" / "rules").glob("*.smk"):
        used |= set(re.findall(r'caption="\.\./report/([\w.]+\.rst)"', rules.read_text()))
    captions = {p.name for p in CAPTIONS.glob("*.rst")} - {"workflow.rst"}
    assert captions == used, (captions - used, used - captions)
    for name in sorted(captions):
        # The first words of each caption, as the report renders them (reStructuredText bold).
        first = re.sub(r"\*\*|``", "", (CAPTIONS / name).read_text()).split(".")[0][:40]
        first = first.split("(")[0].strip()
        assert first in text or json.dumps(first)[1:-1] in text, name
    assert "Metric Space Magnitude for Evaluating the Diversity" in text  # workflow.rst
