"""The benchmarks as the tests run them: their modules, small runs, and their result tables
(``# key: value`` header lines, then a CSV: ``benchmarks/record.py``'s ``write_csv``)."""

import csv
import importlib
import subprocess
import sys
from pathlib import Path


def table(path: Path) -> tuple[list[str], list[dict]]:
    """(the header lines, the rows as dicts) of a result table."""
    lines = path.read_text().splitlines()
    comments = sum(line.startswith("#") for line in lines)
    return lines[:comments], list(csv.DictReader(lines[comments:]))


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def benchmark(name: str):
    """The module ``benchmarks/<name>.py``. The benchmarks import each other by module name:
    their folder is on the path for the import only."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def small_run(script: str, argv: list[str], out: Path,
              command: str) -> tuple[list[str], list[dict]]:
    """Run ``benchmarks/<script>`` with ``argv`` in the repository root, check that it succeeded
    and that the table it wrote to ``out`` names ``command`` as the line that reproduces it
    (after any BLAS thread setting); that table (:func:`table`)."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *argv],
                          capture_output=True, text=True, timeout=600, cwd=BENCHMARKS.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    header, rows = table(out)
    assert any(line.startswith("# command: ") and line.endswith(command) for line in header), \
        header
    return header, rows
