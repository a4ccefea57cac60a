"""Curvature experiment (paper §4.1, Table 1): regressing curvature on MagArea.

The point clouds come from :mod:`diversity_core.data.curvature`; this module holds the features
and models of Table 1, their cross-validation, and what the scale-sensitivity study derives from
magnitude on a :class:`diversity_core.magnitude.ScaleGrid` (one magnitude evaluation per cloud
serves MagArea up to every limit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..data.curvature import (
    hyperbolic_distance_factor,
    hyperbolic_distance_name,
    normal_coordinates,
)
from ..magnitude import ScaleGrid
from ..measures.registry import Measure, ScaleView, evaluate, get_measure, select_measures

__all__ = ["distance_quantile_features", "regressors", "cross_validated_mse",
           "max_piecewise_knots", "MIN_CLOUDS_PER_KNOT_INTERVAL", "check_scale_grid",
           "scale_sensitivity", "fold_spread", "configured_measures", "other_measures",
           "cloud_measures", "piecewise_linear", "measure_rows", "with_measure_rows"]

# Each linear piece of the piecewise-linear fit needs data of its own. On 33 clouds of the default
# data (5 folds, 26 per training fold) the cross-validated MSE was 0.25 with 2 to 4 knots, 0.34
# with 14, 0.57 with 20 and 12 with 30, without any error: below about 4 training clouds per knot
# interval the fit chases noise.
MIN_CLOUDS_PER_KNOT_INTERVAL = 4
# The measure of Table 1's own rows (its features come from the magnitude jobs) and the row of the
# distance baseline, after which no measure's row comes.
MAGAREA = "magarea"
BASELINE_ROW = "SVR (distance-matrix quantiles)"

def distance_quantile_features(D: np.ndarray, n_quantiles: int) -> np.ndarray:
    """Quantiles of the pairwise distances of one cloud: a permutation-invariant summary of its
    distance matrix, for the SVR baseline (Turkeš et al. feed SVRs the distance matrices).

    Returns
    -------
    features : array of shape (n_quantiles,)
    """
    upper = D[np.triu_indices_from(D, k=1)]
    return np.quantile(upper, np.linspace(0.0, 1.0, n_quantiles))


def regressors(*, piecewise_knots: int, quantile: float) -> dict:
    """The regression models of Table 1, keyed by the row name, each predicting K from features.

    * Piecewise linear: a degree-1 B-spline basis (knots at quantiles of MagArea) with least
      squares, i.e. a continuous piecewise-linear function of MagArea.
    * Quantile: linear quantile regression (conditional median by default, no penalty).
    * SVR on distance-matrix quantiles: the distance-matrix baseline, computed on our clouds.
    """
    # scikit-learn is imported where it is used, as in the other experiments: importing it takes
    # about 1.5 CPU seconds, which every Snakemake invocation would pay in its configuration
    # check (config_problems below) and every curvature job in its imports.
    from sklearn.linear_model import QuantileRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVR

    return {
        "MagArea (piecewise linear)": piecewise_linear(piecewise_knots),
        "MagArea (quantile)": make_pipeline(
            StandardScaler(), QuantileRegressor(quantile=quantile, alpha=0.0, solver="highs")
        ),
        BASELINE_ROW: make_pipeline(StandardScaler(), SVR(C=10.0)),
    }


def piecewise_linear(n_knots: int):
    """A continuous piecewise-linear function of one feature: a degree-1 B-spline basis with
    ``n_knots`` knots at quantiles of the feature, fitted by least squares."""
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import SplineTransformer

    return make_pipeline(
        SplineTransformer(n_knots=n_knots, degree=1, knots="quantile", extrapolation="linear"),
        LinearRegression(),
    )


def max_piecewise_knots(X: np.ndarray, *, n_folds: int, seed: int) -> int:
    """Most knots the piecewise-linear fit may have on ``X`` under this cross-validation: each
    knot interval of the smallest training fold keeps :data:`MIN_CLOUDS_PER_KNOT_INTERVAL`
    distinct feature values (the knots sit at their quantiles)."""
    from sklearn.model_selection import KFold

    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    fewest = min(len(np.unique(X[train], axis=0)) for train, _ in folds.split(X))
    return 1 + fewest // MIN_CLOUDS_PER_KNOT_INTERVAL


def cross_validated_mse(model, X: np.ndarray, y: np.ndarray, *, n_folds: int, seed: int):
    """Mean squared error of ``model`` on each of ``n_folds`` shuffled folds.

    Returns
    -------
    mse : array of shape (n_folds,)
    """
    from sklearn.model_selection import KFold

    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    errors = []
    for train, test in folds.split(X):
        model.fit(X[train], y[train])
        errors.append(float(np.mean((model.predict(X[test]) - y[test]) ** 2)))
    return np.array(errors)


# -- the other measures of Table 1 (rules curvature_measures, curvature_measures_table) ----------

def configured_measures(section: Mapping) -> list[str]:
    """The curvature section's ``measures`` (checked against the registry: measures of a set
    alone, with the scale of the clouds' median convergence scale where they need one) and
    after them every measure plugin that fits."""
    return [m.name for m in select_measures(reference=False, scale_rules=("median",),
                                            named=section["measures"])]


def other_measures(names: Sequence[str]) -> list[str]:
    """The measures of ``names`` (a checked ``curvature.measures``) besides MagArea, whose rows
    Table 1 makes from the magnitude jobs."""
    return [name for name in names if name != MAGAREA]


def cloud_measures(measures: Sequence[Measure], polar: np.ndarray, *, t_cut: float,
                   mag_area: float, where: str) -> dict[str, float]:
    """Each of ``measures`` (measures of a set alone) of one cloud, by name.

    A measure that reads points sees the cloud in geodesic normal coordinates
    (:func:`diversity_core.data.curvature.normal_coordinates`); one that needs a scale reads
    the engine's answer for the cloud's geodesic distances: a :class:`ScaleView` of ``t_cut``
    (the median convergence scale of all clouds) and the cloud's ``mag_area`` up to it.
    ``ValueError`` naming the measure and ``where`` (the cloud) when a measure fails or gives
    NaN or inf.
    """
    X = normal_coordinates(polar)
    view = ScaleView(t_cut, area=mag_area)
    values = {}
    for measure in measures:
        try:
            value = float(evaluate(measure, X, where=where, engine=view))
        except ValueError as err:
            if measure.source is not None:
                raise  # a plugin's failure names the measure and the cloud already
            raise ValueError(f"{where}: measure {measure.name} failed: {err}") from err
        if not math.isfinite(value):
            raise ValueError(f"{where}: measure {measure.name} returned {value}.")
        values[measure.name] = value
    return values


def measure_rows(values: pd.DataFrame, curvature: np.ndarray, *, cv_folds: int,
                 piecewise_knots: int, seed: int, log=None) -> pd.DataFrame:
    """One row of Table 1 per measure: curvature regressed on the measure by the piecewise-linear
    fit of MagArea's row (:func:`piecewise_linear`, the knots at quantiles of the measure),
    cross-validated on the same folds.

    ``values``: one column per measure (its name), one row per training cloud; ``curvature``:
    theirs. Returns the rows ``method`` ("<label> (piecewise linear)"), ``mse_mean``,
    ``mse_std``; ``ValueError`` naming the measure when its values leave too few distinct ones
    per linear piece.
    """
    rows = []
    for name in values.columns:
        label = get_measure(name).label
        X = values[[name]].to_numpy(dtype=float)
        most = max_piecewise_knots(X, n_folds=cv_folds, seed=seed)
        if piecewise_knots > most:
            raise ValueError(
                f"curvature.piecewise_knots ({piecewise_knots}) is too large for the values of "
                f"{name}: with {cv_folds} folds of {len(X)} training clouds, at most {most} "
                f"knots leave {MIN_CLOUDS_PER_KNOT_INTERVAL} distinct values per linear piece.")
        mse = cross_validated_mse(piecewise_linear(piecewise_knots), X, curvature,
                                  n_folds=cv_folds, seed=seed)
        rows.append({"method": f"{label} (piecewise linear)", "mse_mean": mse.mean(),
                     "mse_std": mse.std(ddof=1)})
        if log is not None:
            log.info("%s: MSE %.4f ± %.4f over %d folds", rows[-1]["method"], mse.mean(),
                     mse.std(ddof=1), cv_folds)
    return pd.DataFrame(rows, columns=["method", "mse_mean", "mse_std"])


def with_measure_rows(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Table 1 with the measures' ``rows`` after MagArea's and before the distance baseline."""
    baseline = table["method"] == BASELINE_ROW
    return pd.concat([table[~baseline], rows, table[baseline]], ignore_index=True)


def variant_scales(grid: ScaleGrid, values: np.ndarray, n_distinct: np.ndarray, targets,
                   factors: np.ndarray) -> np.ndarray:
    """Convergence scales ``Mag(t_q) = q · n_distinct`` of each cloud for each target q.

    ``factors`` (n_clouds,) are the distance factors of a variant (0.5 for Turkeš et al.'s K < 0
    disks, else 1, see :func:`diversity_core.data.curvature.hyperbolic_distance_factor`):
    distances scaled by f have ``Mag_f(t) = Mag(f·t)``, so ``t_q`` scales by ``1/f``.

    Returns
    -------
    scales : array of shape (n_clouds, n_targets)
    """
    targets = np.atleast_1d(np.asarray(targets, dtype=float))
    return np.stack([grid.scale_at(values, q * n_distinct) for q in targets], axis=1) / \
        np.asarray(factors, dtype=float)[:, None]


def variant_areas(grid: ScaleGrid, values: np.ndarray, limits, factors: np.ndarray, *,
                  log: bool = False) -> np.ndarray:
    """MagArea of each cloud up to each limit, for distances scaled by ``factors``.

    With ``Mag_f(t) = Mag(f·t)``: ``∫_0^L Mag_f dt = ∫_0^{fL} Mag ds / f`` and, in log t,
    ``∫_0^L (Mag_f − 1) dt/t = ∫_0^{fL} (Mag − 1) ds/s``.

    Returns
    -------
    areas : array of shape (n_clouds, n_limits)
    """
    limits = np.atleast_1d(np.asarray(limits, dtype=float))
    factors = np.asarray(factors, dtype=float)
    out = np.empty((values.shape[0], limits.size))
    for f in np.unique(factors):
        rows = factors == f
        areas = grid.integrals(values[rows], f * limits, log=log)
        out[rows] = areas if log else areas / f
    return out


def variant_magnitude(grid: ScaleGrid, values: np.ndarray, scales, factors: np.ndarray):
    """Mag of each cloud at each scale for distances scaled by ``factors``, (n_clouds, n_scales)."""
    scales = np.atleast_1d(np.asarray(scales, dtype=float))
    factors = np.asarray(factors, dtype=float)
    out = np.empty((values.shape[0], scales.size))
    for f in np.unique(factors):
        rows = factors == f
        out[rows] = grid.magnitude_at(values[rows], f * scales)
    return out


def subsample_designs(curvature: np.ndarray, split: np.ndarray, *, n_curvatures=(),
                      repeats: int) -> dict:
    """Sets of clouds to cross-validate on, to see how the fold spread depends on the design.

    * ``"all training clouds"``: every training cloud, ``repeats`` times (different folds);
    * ``"one cloud each of C curvatures"`` for each C in ``n_curvatures``: C training
      curvatures evenly spread over the grid (all of them when C is the grid's size), one cloud
      of each; repeat r takes the r-th cloud of every curvature (cycling);
    * ``"test clouds"``: the held-out clouds alone (K ~ U), ``repeats`` times.

    Returns
    -------
    designs : dict name -> list of ``repeats`` index arrays into the clouds
    """
    train = np.flatnonzero(split == "train")
    grid = np.unique(curvature[train])
    designs = {"all training clouds": [train] * repeats}
    for count in n_curvatures:
        if not 2 <= count <= grid.size:
            raise ValueError(f"curvature.sensitivity.spread_curvatures: {count} curvatures "
                             f"requested, the training grid has {grid.size}.")
        chosen = grid[np.unique(np.round(np.linspace(0, grid.size - 1, count)).astype(int))]
        members = [train[curvature[train] == K] for K in chosen]
        designs[f"one cloud each of {len(chosen)} curvatures"] = [
            np.array([m[r % m.size] for m in members]) for r in range(repeats)]
    test = np.flatnonzero(split == "test")
    if test.size:
        designs["test clouds"] = [test] * repeats
    return designs


# -- the scale-sensitivity study (rule curvature_sensitivity) -----------------------------------

SENSITIVITY_FEATURES = {"MagArea": False, "MagArea (log t)": True}  # name -> integrate in log t
SENSITIVITY_MODELS = {"piecewise linear": "MagArea (piecewise linear)",
                      "quantile": "MagArea (quantile)"}
PAPER_PIECEWISE_MSE = 0.05  # Table 1; the fold-spread study also looks at the limit nearest it


def check_scale_grid(grid: ScaleGrid, values: np.ndarray, n_distinct: np.ndarray, curvature,
                     *, table1_t_cut: float, table1_mag_area: np.ndarray,
                     table1_t_conv: np.ndarray, hyperbolic_distance, target: float,
                     quadrature_rtol: float) -> dict:
    """The scale grid's quadrature error: estimated for every cloud and integral, and checked
    against Table 1's MagArea (an independent adaptive integral) and convergence scales.

    ``values`` (n_clouds, n_scales): magnitude of each cloud on ``grid.nodes``. Raises
    ``ValueError`` when the estimate or either check exceeds ``quadrature_rtol``; returns the
    three figures (relative).
    """
    estimate = max(grid.relative_error_estimate(values).max(),
                   grid.relative_error_estimate(values, log=True).max())
    if estimate > quadrature_rtol:
        raise ValueError(f"estimated relative quadrature error {estimate:.3g} exceeds "
                         f"curvature.sensitivity.quadrature_rtol = {quadrature_rtol:g}: "
                         "add nodes to curvature.sensitivity.grid.")
    own = np.array([hyperbolic_distance_factor(K, hyperbolic_distance) for K in curvature])
    area_check = np.abs(variant_areas(grid, values, [table1_t_cut], own)[:, 0]
                        / table1_mag_area - 1).max()
    t_conv_check = np.abs(variant_scales(grid, values, n_distinct, [target], own)[:, 0]
                          / table1_t_conv - 1).max()
    if max(area_check, t_conv_check) > quadrature_rtol:
        raise ValueError(f"the scale grid misses Table 1's MagArea by {area_check:.3g} or its "
                         f"convergence scales by {t_conv_check:.3g} (relative), more than "
                         f"curvature.sensitivity.quadrature_rtol = {quadrature_rtol:g}.")
    return {"estimate": estimate, "mag_area": area_check, "t_conv": t_conv_check}


def scale_sensitivity(grid: ScaleGrid, values: np.ndarray, n_distinct: np.ndarray,
                      curvature: np.ndarray, split: np.ndarray, *, opts: Mapping, target: float,
                      hyperbolic_distance, cv_folds: int, piecewise_knots: int,
                      quantile: float, seed: int, log=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cross-validated MSE of curvature on MagArea against the integration limit, per distance
    variant (``opts["variants"]``), feature (MagArea in t or in log t) and regression, and the
    fold spread per design (:func:`fold_spread`).

    ``opts``: the configuration's ``curvature.sensitivity`` section; ``target``: the
    convergence target (the default limit is the median convergence scale of the configured
    ``hyperbolic_distance``). Returns (sensitivity table, fold-spread table).
    """
    train = split == "train"
    models = regressors(piecewise_knots=piecewise_knots, quantile=quantile)
    fixed = np.geomspace(opts["t_cut_min"], opts["t_cut_max"], opts["n_t_cuts"])
    targets = np.array(sorted(set(opts["targets"]) | {target}))
    rows, spread_rows = [], []
    for variant in opts["variants"]:
        factors = np.array([hyperbolic_distance_factor(K, variant) for K in curvature])
        t_q = variant_scales(grid, values, n_distinct, targets, factors)
        t_conv = t_q[:, np.flatnonzero(targets == target)[0]]
        limits = pd.DataFrame({
            "limit": ["t_cut"] * fixed.size + ["target"] * targets.size,
            "target": np.concatenate([np.full(fixed.size, np.nan), targets]),
            "t_cut": np.concatenate([fixed, np.median(t_q, axis=0)]),
        })
        limits["mag_fraction"] = np.median(
            variant_magnitude(grid, values, limits["t_cut"], factors) / n_distinct[:, None],
            axis=0)
        # Today's default: the median convergence scale of the configured distance.
        limits["default"] = (limits["target"] == target) & (
            hyperbolic_distance_name(variant) == hyperbolic_distance_name(hyperbolic_distance))
        for feature, in_log in SENSITIVITY_FEATURES.items():
            areas = variant_areas(grid, values, limits["t_cut"], factors, log=in_log)
            for k, limit in limits.iterrows():
                X = areas[:, [k]]
                for regression, name in SENSITIVITY_MODELS.items():
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
            if log is not None:
                log.info("%s, %s: %d limits done", hyperbolic_distance_name(variant), feature,
                         len(limits))
        median_t_conv = limits.loc[limits["target"] == target, "t_cut"].iloc[0]
        spread_rows += fold_spread(rows, variant, median_t_conv, grid, values, factors,
                                   curvature, split, models, n_curvatures=opts["spread_curvatures"],
                                   repeats=opts["spread_repeats"], cv_folds=cv_folds, seed=seed)
    table = pd.DataFrame(rows)
    table = table[["variant", "feature", "regression", "limit", "target", "t_cut",
                   "mag_fraction", "default", "mse_mean", "mse_std", "resid_corr_t_conv"]]
    return table, pd.DataFrame(spread_rows)


def fold_spread(rows: list[dict], variant, median_t_conv: float, grid: ScaleGrid,
                values: np.ndarray, factors: np.ndarray, curvature: np.ndarray, split: np.ndarray,
                models: dict, *, n_curvatures, repeats: int, cv_folds: int,
                seed: int) -> list[dict]:
    """Fold spread of both regressions on MagArea, per design (:func:`subsample_designs`), at
    the median convergence scale (the paper's rule) and at the fixed t_cut whose
    piecewise-linear MSE in ``rows`` is nearest the paper's. Repeat r of a design uses fold seed
    ``seed + r``."""
    label = hyperbolic_distance_name(variant)
    fixed = pd.DataFrame([r for r in rows if r["variant"] == label and r["limit"] == "t_cut"
                          and r["feature"] == "MagArea" and r["regression"] == "piecewise linear"])
    nearest = fixed.iloc[int(np.argmin(np.abs(fixed["mse_mean"] - PAPER_PIECEWISE_MSE)))]
    at = {"median t_conv": median_t_conv,
          "t_cut nearest the paper's piecewise MSE": nearest["t_cut"]}
    designs = subsample_designs(curvature, split, n_curvatures=n_curvatures, repeats=repeats)
    out = []
    for where, limit in at.items():
        area = variant_areas(grid, values, [limit], factors)
        for design, sets in designs.items():
            for regression, name in SENSITIVITY_MODELS.items():
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


def config_problems(section: Mapping) -> list[str]:
    """The constraints between keys of the curvature section (and its sensitivity study) that
    the configuration schema cannot express, as sentences naming the keys (empty if there are
    none). The workflow checks them before any job runs (workflow/rules/common.smk:
    check_config)."""
    curv = section
    problems = []
    if MAGAREA not in curv["measures"]:
        problems.append(
            f"curvature.measures {curv['measures']} must name {MAGAREA}: Table 1 regresses the "
            "curvature on MagArea, and on each other measure named there.")
    if not curv["curvature_min"] < curv["curvature_max"]:
        problems.append(
            f"curvature.curvature_min ({curv['curvature_min']}) must be smaller than "
            f"curvature.curvature_max ({curv['curvature_max']}).")
    n_train = curv["n_train_curvatures"] * curv["clouds_per_curvature"]
    n_clouds = n_train + curv["n_test_clouds"]
    train_sum = (f"curvature.n_train_curvatures x curvature.clouds_per_curvature = "
                 f"{curv['n_train_curvatures']} x {curv['clouds_per_curvature']}")
    if curv["n_chunks"] > n_clouds:
        problems.append(
            f"curvature.n_chunks ({curv['n_chunks']}) exceeds the number of clouds, {n_clouds} "
            f"({train_sum}, plus curvature.n_test_clouds = {curv['n_test_clouds']}): a job "
            "would get no cloud.")
    if curv["cv_folds"] > n_train:
        problems.append(
            f"curvature.cv_folds ({curv['cv_folds']}) exceeds the {n_train} training clouds "
            f"({train_sum}).")
    else:
        fold = n_train - math.ceil(n_train / curv["cv_folds"])
        most = 1 + fold // MIN_CLOUDS_PER_KNOT_INTERVAL
        if curv["piecewise_knots"] > most:
            problems.append(
                f"curvature.piecewise_knots ({curv['piecewise_knots']}) is too large for the "
                f"data: the smallest training fold holds {fold} clouds ({n_train} training "
                f"clouds, curvature.cv_folds = {curv['cv_folds']}), and at most {most} knots "
                f"leave {MIN_CLOUDS_PER_KNOT_INTERVAL} clouds per linear piece.")

    study = curv["sensitivity"]
    if not study["t_cut_min"] < study["t_cut_max"]:
        problems.append(
            f"curvature.sensitivity.t_cut_min ({study['t_cut_min']}) must be smaller than "
            f"curvature.sensitivity.t_cut_max ({study['t_cut_max']}).")
    grid = study["grid"]
    if not grid["t_first"] < grid["t_max"]:
        problems.append(
            f"curvature.sensitivity.grid.t_first ({grid['t_first']}) must be smaller than "
            f"curvature.sensitivity.grid.t_max ({grid['t_max']}).")
    if study["t_cut_max"] > grid["t_max"]:
        problems.append(
            f"curvature.sensitivity.t_cut_max ({study['t_cut_max']}) lies beyond the scale grid: "
            f"raise curvature.sensitivity.grid.t_max ({grid['t_max']}).")
    for count in study["spread_curvatures"]:
        if not curv["cv_folds"] <= count <= curv["n_train_curvatures"]:
            problems.append(
                f"curvature.sensitivity.spread_curvatures: a design of {count} curvatures needs "
                f"at least curvature.cv_folds = {curv['cv_folds']} and at most "
                f"curvature.n_train_curvatures = {curv['n_train_curvatures']}.")
    if 0 < curv["n_test_clouds"] < curv["cv_folds"]:
        problems.append(
            f"curvature.n_test_clouds ({curv['n_test_clouds']}) is below curvature.cv_folds "
            f"({curv['cv_folds']}): the sensitivity study cross-validates on the test clouds "
            "too (use 0 or at least as many as folds).")

    return problems
