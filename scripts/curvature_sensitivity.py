"""Scale sensitivity of Table 1: cross-validated MSE against the integration limit, for the true
and Turkeš et al.'s hyperbolic distances; and how the fold spread depends on the design."""

import json

import numpy as np
import pandas as pd
from _helpers import Input, Inputs, Output, log, run

from diversity_core import MagnitudeSettings
from diversity_core.data.curvature import hyperbolic_distance_factor, hyperbolic_distance_name
from diversity_core.experiments.curvature import (
    cross_validated_mse,
    regressors,
    subsample_designs,
    variant_areas,
    variant_magnitude,
    variant_scales,
)
from diversity_core.magnitude import ScaleGrid

FEATURES = {"MagArea": False, "MagArea (log t)": True}  # name -> integrate in log t
MODELS = {"piecewise linear": "MagArea (piecewise linear)", "quantile": "MagArea (quantile)"}
PAPER_PIECEWISE_MSE = 0.05  # Table 1; the fold-spread study also looks at the limit nearest it


def main(clouds: Input, grid: Inputs, t_cut: Input, features: Input, sensitivity: Output,
         spread: Output, settings_section: dict, magnitude: dict, hyperbolic_distance: bool | str,
         cv_folds: int, piecewise_knots: int, quantile: float, seed: int):
    """Write SENSITIVITY (.csv, one row per variant x limit x feature x regression) and SPREAD
    (.csv, fold spread per design) from the GRID chunk files (magnitude on the scale grid).
    SETTINGS_SECTION: the configuration's ``curvature.sensitivity`` section; MAGNITUDE: its
    ``magnitude`` section; T_CUT and FEATURES: Table 1's limit and MagAreas, which the scale
    grid must reproduce (a check of its quadrature error)."""
    opts = settings_section
    settings = MagnitudeSettings.from_config(magnitude)
    scale_grid = ScaleGrid(**opts["grid"])
    data = np.load(clouds)
    parts = [np.load(p) for p in grid]
    order = np.argsort(np.concatenate([p["index"] for p in parts]))
    values = np.concatenate([p["magnitude"] for p in parts])[order]
    n_distinct = np.concatenate([p["n_distinct"] for p in parts])[order]
    if values.shape[0] != data["curvature"].size:
        raise ValueError(f"expected {data['curvature'].size} clouds, the grid chunks hold "
                         f"{values.shape[0]}.")
    if not np.allclose(parts[0]["scales"], scale_grid.nodes, rtol=1e-15, atol=0):
        raise ValueError("the grid chunks were computed on other scales than "
                         "curvature.sensitivity.grid gives.")
    curvature, split = data["curvature"], data["split"]
    train = split == "train"

    # The quadrature error: estimated for every cloud and integral, and checked against Table
    # 1's MagArea (an independent adaptive integral) and convergence scales.
    estimate = max(scale_grid.relative_error_estimate(values).max(),
                   scale_grid.relative_error_estimate(values, log=True).max())
    if estimate > opts["quadrature_rtol"]:
        raise ValueError(f"estimated relative quadrature error {estimate:.3g} exceeds "
                         f"curvature.sensitivity.quadrature_rtol = {opts['quadrature_rtol']:g}: "
                         "add nodes to curvature.sensitivity.grid.")
    with open(t_cut) as f:
        default_t_cut = json.load(f)["t_cut"]
    table1 = pd.read_csv(features).sort_values("cloud")
    own = np.array([hyperbolic_distance_factor(K, hyperbolic_distance) for K in curvature])
    area_check = np.abs(variant_areas(scale_grid, values, [default_t_cut], own)[:, 0]
                        / table1["mag_area"].to_numpy() - 1).max()
    t_conv_check = np.abs(variant_scales(scale_grid, values, n_distinct, [settings.target],
                                         own)[:, 0] / table1["t_conv"].to_numpy() - 1).max()
    log.info("scale grid: %d scales; estimated quadrature error %.2g; against Table 1: MagArea "
             "%.2g, t_conv %.2g (relative)", scale_grid.nodes.size, estimate, area_check,
             t_conv_check)
    if max(area_check, t_conv_check) > opts["quadrature_rtol"]:
        raise ValueError(f"the scale grid misses Table 1's MagArea by {area_check:.3g} or its "
                         f"convergence scales by {t_conv_check:.3g} (relative), more than "
                         f"curvature.sensitivity.quadrature_rtol = {opts['quadrature_rtol']:g}.")

    models = regressors(piecewise_knots=piecewise_knots, quantile=quantile)
    fixed = np.geomspace(opts["t_cut_min"], opts["t_cut_max"], opts["n_t_cuts"])
    targets = np.array(sorted(set(opts["targets"]) | {settings.target}))
    rows, spread_rows = [], []
    for variant in opts["variants"]:
        factors = np.array([hyperbolic_distance_factor(K, variant) for K in curvature])
        t_q = variant_scales(scale_grid, values, n_distinct, targets, factors)
        t_conv = t_q[:, np.flatnonzero(targets == settings.target)[0]]
        limits = pd.DataFrame({
            "limit": ["t_cut"] * fixed.size + ["target"] * targets.size,
            "target": np.concatenate([np.full(fixed.size, np.nan), targets]),
            "t_cut": np.concatenate([fixed, np.median(t_q, axis=0)]),
        })
        limits["mag_fraction"] = np.median(
            variant_magnitude(scale_grid, values, limits["t_cut"], factors) / n_distinct[:, None],
            axis=0)
        # Today's default: the median convergence scale of the configured distance.
        limits["default"] = (limits["target"] == settings.target) & (
            hyperbolic_distance_name(variant) == hyperbolic_distance_name(hyperbolic_distance))
        for feature, in_log in FEATURES.items():
            areas = variant_areas(scale_grid, values, limits["t_cut"], factors, log=in_log)
            for k, limit in limits.iterrows():
                X = areas[:, [k]]
                for regression, name in MODELS.items():
                    mse = cross_validated_mse(models[name], X[train], curvature[train],
                                              n_folds=cv_folds, seed=seed)
                    # In-sample residuals against each cloud's own convergence scale: how much
                    # of what is left is sampling (how close the drawn points lie).
                    fitted = models[name].fit(X[train], curvature[train]).predict(X[train])
                    corr = np.corrcoef(curvature[train] - fitted, t_conv[train])[0, 1]
                    rows.append({"variant": hyperbolic_distance_name(variant), **limit.to_dict(),
                                 "feature": feature, "regression": regression,
                                 "mse_mean": mse.mean(), "mse_std": mse.std(ddof=1),
                                 "resid_corr_t_conv": corr})
            log.info("%s, %s: %d limits done", hyperbolic_distance_name(variant), feature,
                     len(limits))
        median_t_conv = limits.loc[limits["target"] == settings.target, "t_cut"].iloc[0]
        spread_rows += fold_spread(rows, variant, median_t_conv, scale_grid, values, factors,
                                   curvature, split, models, opts, cv_folds, seed)

    table = pd.DataFrame(rows)
    table = table[["variant", "feature", "regression", "limit", "target", "t_cut",
                   "mag_fraction", "default", "mse_mean", "mse_std", "resid_corr_t_conv"]]
    table.to_csv(sensitivity, index=False, float_format="%.6g")
    pd.DataFrame(spread_rows).to_csv(spread, index=False, float_format="%.6g")
    return {"n_scales": int(scale_grid.nodes.size),
            "quadrature_error_estimate": float(f"{estimate:.3g}"),
            "table1_mag_area_max_rel_diff": float(f"{area_check:.3g}"),
            "table1_t_conv_max_rel_diff": float(f"{t_conv_check:.3g}")}


def fold_spread(rows, variant, median_t_conv, scale_grid, values, factors, curvature, split,
                models, opts, cv_folds, seed):
    """Fold spread of both regressions on MagArea, per design, at the median convergence scale
    (the paper's rule) and at the fixed t_cut whose piecewise-linear MSE is nearest the paper's.
    Repeat r of a design uses fold seed ``seed + r``."""
    label = hyperbolic_distance_name(variant)
    fixed = pd.DataFrame([r for r in rows if r["variant"] == label and r["limit"] == "t_cut"
                          and r["feature"] == "MagArea" and r["regression"] == "piecewise linear"])
    nearest = fixed.iloc[int(np.argmin(np.abs(fixed["mse_mean"] - PAPER_PIECEWISE_MSE)))]
    at = {"median t_conv": median_t_conv,
          "t_cut nearest the paper's piecewise MSE": nearest["t_cut"]}
    designs = subsample_designs(curvature, split, n_curvatures=opts["spread_curvatures"],
                                repeats=opts["spread_repeats"])
    out = []
    for where, limit in at.items():
        area = variant_areas(scale_grid, values, [limit], factors)
        for design, sets in designs.items():
            for regression, name in MODELS.items():
                folds = np.array([
                    cross_validated_mse(models[name], area[idx], curvature[idx], n_folds=cv_folds,
                                        seed=seed + r)
                    for r, idx in enumerate(sets)])  # (repeats, folds)
                sd = folds.std(axis=1, ddof=1)
                out.append({"variant": label, "at": where, "t_cut": limit, "design": design,
                            "n_clouds": sets[0].size, "regression": regression,
                            "repeats": len(sets), "mse_mean": folds.mean(),
                            "fold_sd_median": np.median(sd), "fold_sd_min": sd.min(),
                            "fold_sd_max": sd.max()})
    return out


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
