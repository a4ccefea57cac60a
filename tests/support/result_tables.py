"""The benchmarks' result tables as the tests read them: ``# key: value`` header lines, then a
CSV (``benchmarks/record.py``'s ``write_csv``)."""

import csv
from pathlib import Path


def table(path: Path) -> tuple[list[str], list[dict]]:
    """(the header lines, the rows as dicts) of a result table."""
    lines = path.read_text().splitlines()
    comments = sum(line.startswith("#") for line in lines)
    return lines[:comments], list(csv.DictReader(lines[comments:]))
