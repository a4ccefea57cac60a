"""k-NN classification of the embedding model from each measure: Table 2 and Table S.5.

For every (collection, preprocessing) and measure, the distance matrix between the subsamples
(MagDiff between magnitude functions; |difference| of the scalar scores otherwise) feeds a
k-nearest-neighbour classifier, scored by repeated stratified k-fold cross-validation (the same
folds for every measure and k).
"""

import numpy as np
import pandas as pd
from _helpers import Inputs, Output, log, run

from diversity_core.experiments import model_distinguishing as md


def main(scores: Inputs, table2: Output, table_s5: Output, confusion: Output, k: int, ks: list,
         cv_folds: int, cv_repeats: int, seed: int):
    """Write ``table2`` (K neighbours), ``table_s5`` (every k of KS, and K) and the MagDiff
    confusion counts (``confusion``, K neighbours), from CV_REPEATS repeats of CV_FOLDS-fold
    stratified cross-validation."""
    k_main = k
    ks = sorted({*ks, k_main})
    rows, confusion_rows = [], []
    for path in scores:
        with np.load(path) as stored:
            summary = {key: stored[key] for key in stored.files}
        collection, variant = str(summary["collection"]), str(summary["variant"])
        models, labels = summary["models"].tolist(), summary["labels"]
        for measure in md.MEASURES:
            D = md.measure_distances(summary, measure)
            cv = md.knn_cross_validation(
                D, labels, ks=ks, n_splits=cv_folds, n_repeats=cv_repeats, seed=seed,
                confusion_k=k_main if measure == "magdiff" else None)
            for k, accuracy in cv["accuracy"].items():
                rows.append({"dataset": collection, "preprocessing": variant,
                             "measure": md.MEASURE_LABELS[measure], "k": k,
                             "accuracy_mean": accuracy.mean(), "accuracy_std": accuracy.std()})
            if measure == "magdiff":
                for i, true in enumerate(models):
                    for j, predicted in enumerate(models):
                        confusion_rows.append({"dataset": collection, "preprocessing": variant,
                                               "true_model": true, "predicted_model": predicted,
                                               "count": int(cv["confusion"][i, j])})
            log.info("%s / %s / %s: accuracy at k=%d %.3f", collection, variant, measure,
                     k_main, cv["accuracy"][k_main].mean())
    table = pd.DataFrame(rows).round({"accuracy_mean": 4, "accuracy_std": 4})
    main_table = table[table.k == k_main].drop(columns="k")
    main_table.to_csv(table2, index=False)
    table.to_csv(table_s5, index=False)
    pd.DataFrame(confusion_rows).to_csv(confusion, index=False)
    return {"accuracy": "mean and population sd over the cv_folds x cv_repeats folds"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
