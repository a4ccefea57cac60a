"""The documentation: the site builds without a warning, the README stays a front door, and the
counts of the paper-vs-ours summary quoted by the README and the manual are the summary's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COUNTS = re.compile(r"(\d+) claims: (\d+) reproduced, (\d+) partly, (\d+) not reproduced, "
                    r"(\d+) not run")


def test_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: a broken link, a page missing from the nav, an API name whose
    docstring does not render, each fails the build (about 10 s)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    site = tmp_path / "site"
    for page in ("configuration", "cli", "api", "changelog"):
        assert (site / page / "index.html").is_file(), f"the generated page {page} is missing"
    configuration = (site / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "magnitude.target" in configuration and "t_cut" in configuration
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    import diversity_core

    missing = [name for name in diversity_core.__all__ if f"dc.{name}" not in api]
    assert not missing, f"public names without an API entry: {missing}"


def test_readme_is_a_front_door():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120, "README.md: at most 120 lines"
    paragraph: list[str] = []
    in_fence = False
    for line in [*text.splitlines(), ""]:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        prose = not in_fence and line.strip() and not line.lstrip().startswith(("|", "#", "<!--"))
        item = re.match(r"\s*([-*]|\d+\.) ", line)  # a list item is a paragraph of its own
        if prose and not (item and paragraph):
            paragraph.append(line)
            continue
        assert len(paragraph) <= 6, f"README.md: a paragraph of {len(paragraph)} lines: " \
                                    f"{paragraph[0][:60]}"
        paragraph = [line] if prose else []
    assert "import diversity_core as dc" in text


def test_quoted_summary_counts_are_the_summary_s():
    summary = COUNTS.findall((REPO / "results" / "summary.md").read_text(encoding="utf-8"))
    assert len(summary) == 1, "results/summary.md: one line of counts"
    quoting = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    quoted = {p.relative_to(REPO).as_posix(): COUNTS.findall(p.read_text(encoding="utf-8"))
              for p in quoting}
    assert quoted["README.md"], "README.md quotes the summary's counts"
    for page, counts in quoted.items():
        for found in counts:
            assert found == summary[0], (
                f"{page} quotes '{found}', results/summary.md says '{summary[0]}'")
