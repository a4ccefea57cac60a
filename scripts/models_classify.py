"""k-NN classification of the embedding model from each measure, for one (collection, variant):
that block's rows of Table 2 and Table S.5, and its MagDiff confusion counts.

A variant is a preprocessing and the distance of magnitude. For each measure, the distance
matrix between the subsamples (MagDiff between magnitude functions; |difference| of the scalar
scores otherwise) feeds a k-nearest-neighbour classifier, scored by repeated stratified k-fold
cross-validation (the same folds for every measure and k). One job per block, so that the blocks
run side by side; scripts/models_tables.py gathers them.
"""

import numpy as np
import pandas as pd
from _contract import Input, Output
from _job import run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import model_distinguishing as md


def main(scores: Input, accuracy: Output, confusion: Output, k: int, ks: list, cv_folds: int,
         cv_repeats: int, seed: int, max_distance_change: float):
    """Write ``accuracy`` (one row per measure and k of KS and K: mean and population sd of the
    fold accuracies, unrounded) and ``confusion`` (MagDiff's counts at K neighbours, summed over
    the folds), from CV_REPEATS repeats of CV_FOLDS-fold stratified cross-validation; each value
    with the bounds it can reach when every distance moves by at most MAX_DISTANCE_CHANGE of
    the measure's largest in the block (a change of machine)."""
    with np.load(scores) as stored:
        summary = {key: stored[key] for key in stored.files}
    rows, confusion_rows = md.classify_block(summary, ks=ks, k=k, n_splits=cv_folds,
                                             n_repeats=cv_repeats, seed=seed,
                                             max_distance_change=max_distance_change)
    # Full precision (repr round-trips): the tables round once, when gathered.
    with atomic_path(accuracy) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    with atomic_path(confusion) as tmp:
        pd.DataFrame(confusion_rows).to_csv(tmp, index=False)
    return {"accuracy": "mean and population sd over the cv_folds x cv_repeats folds",
            "bounds": "every k-NN decision that a change of each distance by at most "
                      f"{max_distance_change} of the measure's largest can reach, counted "
                      "both ways"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
