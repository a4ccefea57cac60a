"""Which cells of the model experiment another run moved beyond the published spread and
outside their bounds.

    .venv/bin/python benchmarks/cells_beyond_spread.py results/models/interim \\
        /elsewhere/results/models/interim results/models/stability.csv [--collection fortunes]

    git show REV:results/models/stability.csv > /tmp/earlier.csv
    .venv/bin/python benchmarks/cells_beyond_spread.py results/models/interim /tmp/earlier.csv \
        results/models/stability.csv --record models_machine_change

REFERENCE and OTHER are two runs' ``interim`` folders of ``model_distinguishing``; every
``accuracy/<collection>_<variant>.csv`` of OTHER (the cells as classified, unrounded) is
compared with REFERENCE's, cell by cell, against the spread that STABILITY (``stability.csv``,
written from REFERENCE) publishes (``diversity_core.experiments.stability.beyond_spread``) and
against the bounds REFERENCE's classification gives each cell under a change of machine
(``outside_reach``). Where both folders hold ``scores/<block>.npz``, it also prints how far the
other run moved the classifier's distances, as a fraction of each block's largest (what
``models.stability.max_distance_change`` must cover). Prints how many cells were compared, how
many changed their printed value, each cell beyond its spread and each outside its bounds;
exit status 1 if a cell lies outside its bounds (without bounds: beyond its spread).

OTHER may instead be another run's published ``stability.csv`` (a committed one, from git: its
machine is the one its provenance and its commit's benchmark files name): its cells are then
the printed (4-decimal) values, and a cell counts as outside its bounds only when its printed
value lies more than half a unit of the last place beyond them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from record import add_record_options, recording

from diversity_core.experiments import model_distinguishing as md
from diversity_core.experiments.stability import MODEL_CELL, beyond_spread, outside_reach


def _read_scores(path: Path) -> dict:
    with np.load(path) as stored:
        return {key: stored[key] for key in stored.files}


def distance_changes(reference: Path, other: Path, blocks: list[str]) -> pd.DataFrame:
    """max |ΔD| / max D of every measure of every block both runs scored."""
    rows = []
    for block in blocks:
        paths = [run / "scores" / block.replace(".csv", ".npz") for run in (reference, other)]
        if not all(path.is_file() for path in paths):
            continue
        ref, oth = map(_read_scores, paths)
        for measure in md.MEASURES:
            D = md.measure_distances(ref, measure)
            change = np.abs(md.measure_distances(oth, measure) - D).max() / D.max()
            rows.append({"block": block[:-4], "measure": measure, "change": change})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", type=Path, help="the interim folder the spread was measured on")
    ap.add_argument("other", type=Path,
                    help="another run's interim folder, or its published stability.csv")
    ap.add_argument("stability", type=Path, help="the published stability.csv")
    ap.add_argument("--collection", action="append",
                    help="compare only this collection's blocks (repeatable; default: all)")
    add_record_options(ap)
    args = ap.parse_args(argv)
    published = args.other.is_file()
    folder = args.reference if published else args.other
    blocks = sorted(p.name for p in (folder / "accuracy").glob("*.csv")
                    if args.collection is None
                    or any(p.name.startswith(f"{c}_") for c in args.collection))
    if not blocks:
        ap.error(f"no accuracy/*.csv in {folder}")
    reference = pd.concat(pd.read_csv(args.reference / "accuracy" / b) for b in blocks)
    if published:
        # the printed cells of the blocks compared, at the printed precision
        other = pd.read_csv(args.other).merge(reference[list(MODEL_CELL)], on=list(MODEL_CELL))
    else:
        other = pd.concat(pd.read_csv(args.other / "accuracy" / b) for b in blocks)
    spread = pd.read_csv(args.stability)
    with recording(args.record, args.note):
        return report(args, blocks, reference, other, spread, published)


def report(args, blocks: list[str], reference: pd.DataFrame, other: pd.DataFrame,
           spread: pd.DataFrame, published: bool) -> int:
    """Print the comparison; its exit status."""
    moved = beyond_spread(spread, reference, other)
    merged = other.merge(reference, on=list(MODEL_CELL))
    printed = (merged["accuracy_mean_x"].round(4) != merged["accuracy_mean_y"].round(4)).sum()
    bounded = "accuracy_low" in reference.columns
    # a printed value stands for every value that rounds to it
    outside = outside_reach(reference, other, tolerance=0.5e-4 if published else 1e-12) \
        if bounded else None
    print(f"{len(other)} cells of {len(blocks)} blocks compared; {printed} printed values "
          f"changed; {len(moved)} beyond their spread"
          + (f"; {len(outside)} outside their bounds" if bounded else "; no bounds"))
    changes = pd.DataFrame() if published else distance_changes(args.reference, args.other,
                                                                   blocks)
    if len(changes):
        largest = changes.loc[changes["change"].idxmax()]
        print(f"distances moved by at most {largest['change']:.2g} of their block's largest "
              f"({largest['measure']}, {largest['block']})")
    if len(moved):
        print(moved.to_string(index=False))
    if bounded and len(outside):
        print(outside.to_string(index=False))
    return 1 if len(outside if bounded else moved) else 0


if __name__ == "__main__":
    sys.exit(main())
