"""Which cells of the model experiment another run moved beyond the published spread (issue 42).

    .venv/bin/python benchmarks/cells_beyond_spread.py results/models/interim \\
        /elsewhere/results/models/interim results/models/stability.csv [--collection fortunes]

REFERENCE and OTHER are two runs' ``interim`` folders of ``model_distinguishing``; every
``accuracy/<collection>_<variant>.csv`` of OTHER (the cells as classified, unrounded) is
compared with REFERENCE's, cell by cell, against the spread that STABILITY (``stability.csv``,
written from REFERENCE) publishes (``diversity_core.experiments.stability.beyond_spread``).
Prints how many cells were compared, how many changed their printed value, and each cell
beyond its spread; exit status 1 if there is one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from diversity_core.experiments.stability import beyond_spread


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", type=Path, help="the interim folder the spread was measured on")
    ap.add_argument("other", type=Path, help="another run's interim folder")
    ap.add_argument("stability", type=Path, help="the published stability.csv")
    ap.add_argument("--collection", action="append",
                    help="compare only this collection's blocks (repeatable; default: all)")
    args = ap.parse_args(argv)
    blocks = sorted(p.name for p in (args.other / "accuracy").glob("*.csv")
                    if args.collection is None
                    or any(p.name.startswith(f"{c}_") for c in args.collection))
    if not blocks:
        ap.error(f"no accuracy/*.csv in {args.other}")
    reference = pd.concat(pd.read_csv(args.reference / "accuracy" / b) for b in blocks)
    other = pd.concat(pd.read_csv(args.other / "accuracy" / b) for b in blocks)
    spread = pd.read_csv(args.stability)
    moved = beyond_spread(spread, reference, other)
    merged = other.merge(reference, on=["dataset", "preprocessing", "distance", "measure", "k"])
    printed = (merged["accuracy_mean_x"].round(4) != merged["accuracy_mean_y"].round(4)).sum()
    print(f"{len(other)} cells of {len(blocks)} blocks compared; {printed} printed values "
          f"changed; {len(moved)} beyond their spread")
    if len(moved):
        print(moved.to_string(index=False))
    return 1 if len(moved) else 0


if __name__ == "__main__":
    sys.exit(main())
