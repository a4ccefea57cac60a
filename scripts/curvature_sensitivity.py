"""Scale sensitivity of Table 1: cross-validated MSE against the integration limit, for the true
and Turkeš et al.'s hyperbolic distances; and how the fold spread depends on the design
(the protocol: diversity_core.experiments.curvature.scale_sensitivity)."""

import json

import numpy as np
import pandas as pd
from _contract import Input, Inputs, Output
from _job import log, run

from diversity_core import MagnitudeSettings
from diversity_core.atomic import atomic_path
from diversity_core.experiments.curvature import check_scale_grid, scale_sensitivity
from diversity_core.magnitude import ScaleGrid


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
    with open(t_cut) as f:
        table1_t_cut = json.load(f)["t_cut"]
    table1 = pd.read_csv(features).sort_values("cloud")
    checks = check_scale_grid(scale_grid, values, n_distinct, curvature,
                              table1_t_cut=table1_t_cut,
                              table1_mag_area=table1["mag_area"].to_numpy(),
                              table1_t_conv=table1["t_conv"].to_numpy(),
                              hyperbolic_distance=hyperbolic_distance, target=settings.target,
                              quadrature_rtol=opts["quadrature_rtol"])
    log.info("scale grid: %d scales; estimated quadrature error %.2g; against Table 1: MagArea "
             "%.2g, t_conv %.2g (relative)", scale_grid.nodes.size, checks["estimate"],
             checks["mag_area"], checks["t_conv"])
    table, spread_table = scale_sensitivity(
        scale_grid, values, n_distinct, curvature, split, opts=opts, target=settings.target,
        hyperbolic_distance=hyperbolic_distance, cv_folds=cv_folds,
        piecewise_knots=piecewise_knots, quantile=quantile, seed=seed, log=log)
    with atomic_path(sensitivity) as tmp:
        table.to_csv(tmp, index=False, float_format="%.6g")
    with atomic_path(spread) as tmp:
        spread_table.to_csv(tmp, index=False, float_format="%.6g")
    return {"n_scales": int(scale_grid.nodes.size),
            "quadrature_error_estimate": float(f"{checks['estimate']:.3g}"),
            "table1_mag_area_max_rel_diff": float(f"{checks['mag_area']:.3g}"),
            "table1_t_conv_max_rel_diff": float(f"{checks['t_conv']:.3g}")}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
