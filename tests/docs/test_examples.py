"""Every example of the README and the manual runs.

Every fenced ```python and ```bash (``sh``, ``shell``) block of ``README.md`` and ``docs/*.md``
is executed, unless the line right before its fence is ``<!-- no-run: REASON -->``. Fences in
other languages (yaml, toml, text, console output, no language) are shown, never run.

- The blocks of one page run in order, in a process of the page's own
  (``tests/support/page_runner.py``), so that nothing a page does reaches the tests or another
  page: its Python blocks share one namespace; every block runs with the repository root as its
  working directory, and ``TMPDIR`` (``tempfile.gettempdir()``,
  ``mktemp -d``) a fresh folder of the page's own: examples that write files write there.
- Shell blocks run with ``bash -e -o pipefail`` and call the tools as ``.venv/bin/...`` (CI
  creates ``.venv`` in the repository root; locally, link it to the shared virtualenv).
- A page may not change what git tracks or sees (``results/`` above all): the repository's
  ``git status`` is the same after the page as before it.

Why a collector of our own rather than Sybil or pytest-markdown-docs: the rule above (a marker
on the line before the fence, shell and Python blocks of a page sharing a working folder, the
reasons counted) is a few dozen lines here, while pytest-markdown-docs runs Python only and
marks skips inside the info string, and Sybil would need the same custom parser and evaluator
for the marker and the shell blocks on top of its own machinery.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = {"python": "python", "py": "python", "bash": "bash", "sh": "bash",
                 "shell": "bash"}
MARKER = re.compile(r"^\s*<!--\s*no-run:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^\s`{]*)")
# A shell block that would run the workflow into the committed results/ is refused unrun: it has
# to be a dry run, use a .test/ configuration (which writes to .test/results/) or name its own
# results_dir, or carry a no-run marker.
WORKFLOW = re.compile(r"\bsnakemake\b")
SAFE_WORKFLOW = re.compile(r"(\s-n\b|--dry-run|--configfile\s+\.test/|results_dir=)")
# Generated pages (docs/gen_pages.py) and the build's helpers are not hand-written pages.
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    language: str  # the info string's first word, lower case ("" if none)
    code: str
    no_run: str | None  # the marker's reason, or None


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = opening.groups()
        end = i + 1
        while end < len(lines) and not re.match(
                rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip()
                for line in lines[i + 1:end]]
        marker = MARKER.match(lines[i - 1]) if i else None
        found.append(Block(path.relative_to(REPO).as_posix(), i + 1, info.lower(),
                           "\n".join(body) + "\n", marker.group(1) if marker else None))
        i = end + 1
    return found


def markers(path: Path) -> list[tuple[int, str]]:
    """Every ``no-run`` marker of a page: (line, reason)."""
    return [(n, m.group(1)) for n, line in enumerate(
        path.read_text(encoding="utf-8").splitlines(), start=1) if (m := MARKER.match(line))]


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def _page_id(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize("page", [p for p in PAGES if any(
    b.language in RUN_LANGUAGES and b.no_run is None for b in blocks(p))], ids=_page_id)
def test_examples_run(page, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    before = _git_status()
    runnable = []
    for block in blocks(page):
        kind = RUN_LANGUAGES.get(block.language)
        if kind is None or block.no_run is not None:
            continue
        where = f"{block.page}:{block.line}"
        if kind == "bash":
            unsafe = [line for line in block.code.splitlines()
                      if WORKFLOW.search(line) and not SAFE_WORKFLOW.search(line)]
            assert not unsafe, (f"{where}: runs the workflow into results/ ({unsafe[0].strip()}):"
                                " make it a dry run or a .test/ configuration, or mark it no-run")
        runnable.append({"where": where, "kind": kind, "code": block.code})
    listing = tmp_path / "blocks.json"
    listing.write_text(json.dumps(runnable), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "tests.support.page_runner", str(listing)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    after = _git_status()
    changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
    assert after == before, (f"{_page_id(page)}'s examples changed the repository (write into "
                             "$TMPDIR instead):\n" + "\n".join(changed))


def test_no_run_markers():
    """Every marker marks a runnable block and says why; the count is reported."""
    reasons, problems, run = [], [], 0
    for page in PAGES:
        marked = {b.line - 1: b for b in blocks(page)}
        for line, reason in markers(page):
            block = marked.get(line)
            where = f"{_page_id(page)}:{line}"
            if block is None or block.language not in RUN_LANGUAGES:
                problems.append(f"{where}: the marker is not right before a python or bash fence")
            elif not reason:
                problems.append(f"{where}: the marker gives no reason")
            reasons.append(f"{where}: {reason}")
        run += sum(b.language in RUN_LANGUAGES and b.no_run is None for b in blocks(page))
    assert not problems, "\n".join(problems)
    print(f"\n{run} example blocks run, {len(reasons)} marked no-run:\n" + "\n".join(reasons))
    assert run > 0


@pytest.mark.parametrize("block", [b for p in PAGES for b in blocks(p)
                                   if b.language in RUN_LANGUAGES and b.no_run],
                         ids=lambda b: f"{b.page}:{b.line}")
def test_marked_example(block):
    """Each example marked no-run, reported as skipped with its reason (``pytest -ra`` lists
    them), so that the count of what is not run here is in every test report."""
    pytest.skip(f"{block.page}:{block.line - 1}: no-run: {block.no_run}")


def test_setup_commands_are_what_ci_runs():
    """The README's commands marked as run by .ci/run are there, verbatim."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    verbatim = [b for b in blocks(REPO / "README.md") if b.no_run == "run verbatim by .ci/run"]
    assert verbatim, "the README marks no command as run verbatim by .ci/run"
    for block in verbatim:
        for line in block.code.strip().splitlines():
            assert line in ci.splitlines(), f"README.md:{block.line}: not in .ci/run: {line}"
