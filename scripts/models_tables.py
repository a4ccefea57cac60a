"""Table 2, Table S.5 and the MagDiff confusion counts of every (collection, variant) block,
gathered from the per-block classifications (scripts/models_classify.py) in the configuration's
order: collections, then variants."""

import pandas as pd
from _contract import Inputs, Output
from _job import run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import stability as ms

_ACCURACY = [*ms.BLOCK, "measure", "k", "accuracy_mean", "accuracy_std"]
_CONFUSION = [*ms.BLOCK, "true_model", "predicted_model", "count"]


def _read(path, columns) -> pd.DataFrame:
    table = ms.read_exact_csv(path)  # rounding must see the accuracies as computed
    missing = [c for c in columns if c not in table.columns]
    if missing or table.empty:
        raise ValueError(f"{path}: not a block's classification (missing columns {missing} or "
                         "no rows); rerun models_classify.")
    return table


def main(accuracy: Inputs, confusion: Inputs, table2: Output, table_s5: Output,
         confusion_table: Output, k: int):
    """Write ``table2`` (K neighbours), ``table_s5`` (every k) and ``confusion_table``, the
    accuracies rounded to 4 decimals."""
    # The tables print the values; their bounds under a change of machine are stability.csv's.
    table = pd.concat([_read(path, _ACCURACY)[_ACCURACY] for path in accuracy],
                      ignore_index=True)
    table = table.round({"accuracy_mean": 4, "accuracy_std": 4})
    if k not in set(table.k):
        raise ValueError(f"k = {k} is not among the classified k: {sorted(set(table.k))}.")
    with atomic_path(table2) as tmp:
        table[table.k == k].drop(columns="k").to_csv(tmp, index=False)
    with atomic_path(table_s5) as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(confusion_table) as tmp:
        pd.concat([_read(path, _CONFUSION) for path in confusion], ignore_index=True).to_csv(
            tmp, index=False)
    return {"accuracy": "mean and population sd over the cv_folds x cv_repeats folds"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
