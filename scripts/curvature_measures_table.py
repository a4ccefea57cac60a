"""Table 1 with a row per measure besides MagArea: curvature regressed on each measure."""

import numpy as np
import pandas as pd
from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments.curvature import measure_rows, with_measure_rows


def main(clouds: Input, magarea_table: Input, values: Inputs, table: Output, cv_folds: int,
         piecewise_knots: int, seed: int):
    """Write TABLE (.csv: method, mse_mean, mse_std): MAGAREA_TABLE's rows and, before its
    distance baseline, one per measure of the VALUES chunk files (rule curvature_measures)."""
    data = np.load(clouds)
    parts = [np.load(path) for path in values]
    names = [str(name) for name in parts[0]["measures"]]
    for path, part in zip(values, parts, strict=True):
        if [str(name) for name in part["measures"]] != names:
            raise ValueError(f"{path} holds the measures {list(part['measures'])}, "
                             f"{values[0]} holds {names}.")
    per_cloud = pd.DataFrame(np.concatenate([p["values"] for p in parts]), columns=names,
                             index=np.concatenate([p["index"] for p in parts])).sort_index()
    if not np.array_equal(per_cloud.index, np.arange(len(data["curvature"]))):
        raise ValueError(f"expected {len(data['curvature'])} clouds, the chunks hold "
                         f"{len(per_cloud)}.")
    train = data["split"] == "train"
    rows = measure_rows(per_cloud[train], data["curvature"][train], cv_folds=cv_folds,
                        piecewise_knots=piecewise_knots, seed=seed, log=log)
    with atomic_path(table) as tmp:
        with_measure_rows(pd.read_csv(magarea_table), rows).to_csv(tmp, index=False,
                                                                   float_format="%.4f")
    return {"measures": names, "n_train_clouds": int(train.sum())}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
