"""Table 1: cross-validated MSE of curvature regressed on MagArea, and a distance baseline."""

import numpy as np
import pandas as pd
from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments.curvature import (
    MIN_CLOUDS_PER_KNOT_INTERVAL,
    cross_validated_mse,
    max_piecewise_knots,
    regressors,
)


def main(clouds: Input, scales: Inputs, functions: Inputs, features: Output, table: Output,
         cv_folds: int, piecewise_knots: int, quantile: float, seed: int):
    """Write FEATURES (.csv, one row per cloud) and TABLE (.csv: method, mse_mean, mse_std)."""
    data = np.load(clouds)
    scale_parts = [np.load(p) for p in scales]
    mag_parts = [np.load(p) for p in functions]
    frame = pd.DataFrame({
        "cloud": np.concatenate([p["index"] for p in scale_parts]),
        "t_conv": np.concatenate([p["t_conv"] for p in scale_parts]),
    }).merge(pd.DataFrame({
        "cloud": np.concatenate([p["index"] for p in mag_parts]),
        "mag_area": np.concatenate([p["mag_area"] for p in mag_parts]),
        "mag_area_trapezoid": np.concatenate([p["mag_area_trapezoid"] for p in mag_parts]),
    }), on="cloud", validate="one_to_one").sort_values("cloud")
    if len(frame) != len(data["curvature"]):
        raise ValueError(f"expected {len(data['curvature'])} clouds, chunks hold {len(frame)}.")
    frame.insert(1, "split", data["split"][frame["cloud"]])
    frame.insert(2, "curvature", data["curvature"][frame["cloud"]])
    with atomic_path(features) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.10g")

    quantiles = np.concatenate([p["distance_quantiles"] for p in scale_parts])
    quantiles = quantiles[np.argsort(np.concatenate([p["index"] for p in scale_parts]))]
    train = (frame["split"] == "train").to_numpy()
    y = frame["curvature"].to_numpy()
    inputs = {
        "MagArea (piecewise linear)": frame[["mag_area"]].to_numpy(),
        "MagArea (quantile)": frame[["mag_area"]].to_numpy(),
        "SVR (distance-matrix quantiles)": quantiles,
    }
    # The configuration is checked before the run (workflow/rules/common.smk); these checks hold
    # for the data as they are, whoever calls the script.
    if cv_folds > train.sum():
        raise ValueError(f"curvature.cv_folds ({cv_folds}) exceeds the {train.sum()} training "
                         "clouds.")
    most = max_piecewise_knots(inputs["MagArea (piecewise linear)"][train], n_folds=cv_folds,
                               seed=seed)
    if piecewise_knots > most:
        raise ValueError(
            f"curvature.piecewise_knots ({piecewise_knots}) is too large for the data: with "
            f"{cv_folds} folds of {train.sum()} training clouds, at most {most} knots leave "
            f"{MIN_CLOUDS_PER_KNOT_INTERVAL} distinct MagArea values per linear piece.")
    models = regressors(piecewise_knots=piecewise_knots, quantile=quantile)
    rows = []
    for method, model in models.items():
        mse = cross_validated_mse(model, inputs[method][train], y[train], n_folds=cv_folds,
                                  seed=seed)
        rows.append({"method": method, "mse_mean": mse.mean(), "mse_std": mse.std(ddof=1)})
        log.info("%s: MSE %.4f ± %.4f over %d folds", method, mse.mean(), mse.std(ddof=1),
                 cv_folds)
    with atomic_path(table) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False, float_format="%.4f")
    return {"n_train_clouds": int(train.sum()), "n_test_clouds": int((~train).sum())}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
