"""The product speaks of itself: no issue numbers, no talk of how the work went (sessions,
agents, lent machines), no commit hashes offered as evidence, in the code, the workflow, the
configuration, the tests and the documentation. Provenance records keep their commits (that is
custody): they live in results/, which is not read here, and so do the benchmarks' records
(benchmarks/results/: the command, machine and code version each measurement was made with), as
do the package's pins (a revision is a 40-digit hash after ``revision``, not after ``commit``).

The list is short on purpose; each pattern is written so that the product's own words do not
match it (an HTTP ``User-Agent``, the hub's ``/api/agent-harnesses``, a colour ``#1f77b4``, a
tracker's address ``.../issues/7``, a pytest ``scope="session"``)."""

from __future__ import annotations

import re
import subprocess

from workflow_runner import REPO

# What is read: every file git tracks (or would track) under these paths.
PATHS = ("diversity_core", "scripts", "workflow", "Snakefile", "config.yaml", "configs", ".test",
         "benchmarks", "envs", ".ci", "pyproject.toml", "setup.py", "tests", ".gitignore",
         "README.md", "CHANGELOG.md", "docs")
# Machine-written records of what was measured, with the code version that measured it.
RECORDS = ("benchmarks/results/",)
# Files that are data rather than prose: images, arrays, archives.
BINARY = (".png", ".pdf", ".npy", ".npz", ".gz", ".zip", ".tar", ".so", ".pt", ".parquet",
          ".ico", ".jpg", ".jpeg", ".svg")

FORBIDDEN = {
    # "issue 12", "Issue #12", "issues 12 and 13", "(#12)": the tracker's numbers mean nothing
    # to a user; say what the code does instead.
    "issue number": r"\bissues? ?#?\d+|\(#\d+\)",
    # The process that made the product: sessions, agents, borrowed machines.
    "session": r"\bthis session\b|\bsession's\b",
    "agent": r"(?<![\w/.-])agents?\b(?![-_])",
    "lent machine": r"\blent\b",
    # A commit offered as evidence ("measured at main fb2cef1", "a clone of 9e1af43").
    "commit as evidence": r"\b(?:commit|main|HEAD|clone of)\s+[0-9a-f]{7,40}\b",
}
PATTERN = re.compile("|".join(f"(?P<g{i}>{p})" for i, p in enumerate(FORBIDDEN.values())),
                     re.IGNORECASE)
NAMES = list(FORBIDDEN)


def _files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *PATHS],
        cwd=REPO, check=True, capture_output=True, text=True).stdout
    this = str((REPO / __file__).resolve().relative_to(REPO))
    return sorted(name for name in set(filter(None, listed.split("\0")))
                  if name != this and not name.lower().endswith(BINARY)
                  and not name.startswith(RECORDS)
                  and (REPO / name).is_file())


def hits(names=None) -> list[str]:
    """``file:line: kind: the line`` for every forbidden phrase in ``names`` (default: every
    file of :data:`PATHS`)."""
    found = []
    for name in names if names is not None else _files():
        data = (REPO / name).read_bytes()
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            for match in PATTERN.finditer(line):
                kind = NAMES[int(match.lastgroup[1:])]
                found.append(f"{name}:{number}: {kind}: {line.strip()[:120]}")
    return found


def test_the_patterns_catch_process_talk_and_spare_product_words():
    caught = ["fixed in issue 12", "see Issue #40", "(#7)", "in this session", "the session's run",
              "two other agents were running", "a lent GPU machine", "measured at main fb2cef1",
              "a fresh clone of 9e1af43"]
    spared = ["User-Agent: diversity_core", "GET /api/agent-harnesses", "color='#1f77b4'",
              "https://github.com/org/project/issues/7", 'scope="session"', "a test session",
              "revision: 0123456789abcdef0123456789abcdef01234567", "the agent_id column",
              "silent", "mean of the sample"]
    assert all(PATTERN.search(text) for text in caught), [t for t in caught
                                                           if not PATTERN.search(t)]
    assert not [t for t in spared if PATTERN.search(t)]


def test_no_process_talk_in_the_product():
    found = hits()
    assert not found, f"{len(found)} line(s) of process talk:\n" + "\n".join(found[:60])
