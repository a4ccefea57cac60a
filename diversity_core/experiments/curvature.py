"""Curvature experiment (paper §4.1, Table 1): regressing curvature on MagArea.

The point clouds come from :mod:`diversity_core.data.curvature`; this module holds the features
and models of Table 1, their cross-validation, and the scale grid of the scale-sensitivity study
(:class:`ScaleGrid`: one magnitude evaluation per cloud serves MagArea up to every limit).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping

import numpy as np
from numpy.polynomial import chebyshev
from scipy.optimize import brentq
from sklearn.linear_model import LinearRegression, QuantileRegressor
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import SplineTransformer, StandardScaler
from sklearn.svm import SVR

__all__ = ["distance_quantile_features", "regressors", "cross_validated_mse",
           "max_piecewise_knots", "MIN_CLOUDS_PER_KNOT_INTERVAL", "ScaleGrid"]

# Each linear piece of the piecewise-linear fit needs data of its own. On 33 clouds of the default
# data (5 folds, 26 per training fold) the cross-validated MSE was 0.25 with 2 to 4 knots, 0.34
# with 14, 0.57 with 20 and 12 with 30, without any error: below about 4 training clouds per knot
# interval the fit chases noise.
MIN_CLOUDS_PER_KNOT_INTERVAL = 4

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
    return {
        "MagArea (piecewise linear)": make_pipeline(
            SplineTransformer(n_knots=piecewise_knots, degree=1, knots="quantile",
                              extrapolation="linear"),
            LinearRegression(),
        ),
        "MagArea (quantile)": make_pipeline(
            StandardScaler(), QuantileRegressor(quantile=quantile, alpha=0.0, solver="highs")
        ),
        "SVR (distance-matrix quantiles)": make_pipeline(StandardScaler(), SVR(C=10.0)),
    }


def max_piecewise_knots(X: np.ndarray, *, n_folds: int, seed: int) -> int:
    """Most knots the piecewise-linear fit may have on ``X`` under this cross-validation: each
    knot interval of the smallest training fold keeps :data:`MIN_CLOUDS_PER_KNOT_INTERVAL`
    distinct feature values (the knots sit at their quantiles)."""
    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    fewest = min(len(np.unique(X[train], axis=0)) for train, _ in folds.split(X))
    return 1 + fewest // MIN_CLOUDS_PER_KNOT_INTERVAL


def cross_validated_mse(model, X: np.ndarray, y: np.ndarray, *, n_folds: int, seed: int):
    """Mean squared error of ``model`` on each of ``n_folds`` shuffled folds.

    Returns
    -------
    mse : array of shape (n_folds,)
    """
    folds = KFold(n_splits=n_folds, shuffle=True, random_state=seed)
    errors = []
    for train, test in folds.split(X):
        model.fit(X[train], y[train])
        errors.append(float(np.mean((model.predict(X[test]) - y[test]) ** 2)))
    return np.array(errors)


@dataclasses.dataclass(frozen=True)
class ScaleGrid:
    """Scales at which one evaluation of each magnitude function serves MagArea up to any limit.

    The scale-sensitivity study integrates every cloud's magnitude function up to dozens of
    limits (fixed t_cut from 5 to 300, medians of convergence scales for targets 0.5 to 0.99,
    halved limits for the Turkeš variant). Instead of one adaptive integral per limit, magnitude
    is evaluated once per cloud at the scales of this grid, and every integral is the exact
    integral of a piecewise Chebyshev interpolant of those values:

    * a first panel ``[0, t_first]`` with ``first_nodes`` Chebyshev points of the first kind
      (0 is not among them, so ``(Mag − 1)/t`` is never needed at t = 0);
    * panels geometric in t from ``t_first`` to ``t_max``, each spanning a factor of at most
      ``panel_ratio``, with ``panel_nodes`` Chebyshev–Lobatto points in ``u = log t`` (adjacent
      panels share their end scale). Magnitude saturates towards n over decades of t and is
      smooth in log t, which is why the panels are geometric.

    Integrals are linear in the values, so one weight vector per limit serves every cloud:
    ``∫_0^L Mag dt`` interpolates ``Mag`` in t on the first panel and ``Mag·e^u`` in u on the
    others; MagArea in log t, ``∫_0^L (Mag − 1) dt/t``, interpolates ``(Mag − 1)/t`` and
    ``Mag − 1`` (it differs from ``∫_ε^L Mag d(log t)`` by ``log(L/ε)`` plus a term that
    vanishes with ε, the same for every cloud at a given L). On clouds of 500 points the
    defaults (82 scales per cloud) agreed with :func:`diversity_core.mag_area` (rtol 1e-11) to
    1e-9 at limits from 0.7 to 1280, where :meth:`relative_error_estimate`, the bound each run
    checks, gave at most 5e-7 (13 nodes per panel: true errors 2e-8, estimates 2e-6);
    ``tests/test_curvature.py`` checks 1e-6.

    Attributes
    ----------
    t_first, t_max : float, 0 < t_first < t_max
        End of the first panel and of the grid (scale units: 1 / distance).
    first_nodes, panel_nodes : int >= 3
    panel_ratio : float > 1
    """

    t_first: float = 5.0
    t_max: float = 1280.0
    first_nodes: int = 17
    panel_nodes: int = 17
    panel_ratio: float = 4.0

    def __post_init__(self):
        if not 0 < self.t_first < self.t_max:
            raise ValueError(f"scale grid: need 0 < t_first < t_max; got t_first={self.t_first}, "
                             f"t_max={self.t_max}.")
        if self.first_nodes < 3 or self.panel_nodes < 3:
            raise ValueError("scale grid: first_nodes and panel_nodes must be at least 3; got "
                             f"{self.first_nodes}, {self.panel_nodes}.")
        if not self.panel_ratio > 1:
            raise ValueError(f"scale grid: panel_ratio must exceed 1; got {self.panel_ratio}.")

    # -- layout ----------------------------------------------------------------------------
    @functools.cached_property
    def edges(self) -> np.ndarray:
        """Panel ends, shape (n_panels + 1,): 0, t_first, ..., t_max."""
        n_log = int(np.ceil(np.log(self.t_max / self.t_first) / np.log(self.panel_ratio) - 1e-9))
        logs = np.linspace(np.log(self.t_first), np.log(self.t_max), n_log + 1)
        ends = np.exp(logs)
        ends[0], ends[-1] = self.t_first, self.t_max  # exactly
        return np.concatenate([[0.0], ends])

    @functools.cached_property
    def _layout(self):
        """Per panel: (a, b, x in [-1, 1], node indices, scales); x ascending."""
        panels = []
        x1 = chebyshev.chebpts1(self.first_nodes)
        scales = [0.5 * self.t_first * (x1 + 1.0)]
        panels.append((0.0, self.t_first, x1, np.arange(self.first_nodes)))
        x2 = chebyshev.chebpts2(self.panel_nodes)
        next_index = self.first_nodes
        for a, b in zip(self.edges[1:-1], self.edges[2:], strict=True):
            ua, ub = np.log(a), np.log(b)
            t = np.exp(ua + 0.5 * (ub - ua) * (x2 + 1.0))
            t[0], t[-1] = a, b
            # Adjacent log panels share their end scale; the first one starts a new node.
            shared = len(panels) > 1
            first = next_index - 1 if shared else next_index
            index = np.arange(first, first + self.panel_nodes)
            scales.append(t[1:] if shared else t)
            next_index = first + self.panel_nodes
            panels.append((a, b, x2, index))
        return panels, np.concatenate(scales)

    @property
    def nodes(self) -> np.ndarray:
        """The scales to evaluate magnitude at, shape (n_nodes,), ascending, all > 0."""
        return self._layout[1]

    @staticmethod
    @functools.cache
    def _inverse_vandermonde(x: tuple) -> np.ndarray:
        """Values at the points x -> Chebyshev coefficients of their interpolant, (m, m)."""
        xs = np.array(x)
        return np.linalg.inv(chebyshev.chebvander(xs, len(xs) - 1))

    def _panel(self, t: float) -> int:
        """Index of the panel holding scale t (0 <= t <= t_max)."""
        return int(min(np.searchsorted(self.edges, t, side="right") - 1, len(self.edges) - 2))

    def _local(self, p: int, t: float) -> float:
        """Scale t mapped to [-1, 1] on panel p (linear in t on the first, in log t after)."""
        a, b = self.edges[p], self.edges[p + 1]
        if p == 0:
            return 2.0 * t / b - 1.0
        return 2.0 * (np.log(t) - np.log(a)) / (np.log(b) - np.log(a)) - 1.0

    def _check_scale(self, t: float, what: str) -> float:
        t = float(t)
        if not 0.0 <= t <= self.t_max * (1 + 1e-12):
            raise ValueError(f"{what} {t:.6g} lies outside the scale grid [0, {self.t_max:.6g}]: "
                             "raise curvature.sensitivity.grid.t_max.")
        return min(t, self.t_max)

    # -- integrals --------------------------------------------------------------------------
    def integral_weights(self, limit: float, *, log: bool = False) -> tuple[np.ndarray, float]:
        """Weights ``w`` (n_nodes,) and offset ``c`` with ``∫_0^limit = w @ Mag(nodes) + c``.

        ``log=False``: ``∫_0^limit Mag(t) dt`` (MagArea, c = 0). ``log=True``:
        ``∫_0^limit (Mag(t) − 1) dt / t`` (MagArea in log t).
        """
        limit = self._check_scale(limit, "integration limit")
        weights = np.zeros(self.nodes.size)
        offset = 0.0
        panels, _ = self._layout
        for p, (a, b, x, index) in enumerate(panels):
            if limit <= a:
                break
            s = 1.0 if limit >= b else self._local(p, limit)
            # ∫_{-1}^{s} of the interpolant of unit values at each node.
            unit = chebyshev.chebval(s, chebyshev.chebint(self._inverse_vandermonde(tuple(x)),
                                                          lbnd=-1))
            t = self.nodes[index]
            if p == 0:
                half = 0.5 * b
                w = unit * half / t if log else unit * half
            else:
                half = 0.5 * (np.log(b) - np.log(a))
                w = unit * half if log else unit * half * t  # Mag·e^u in u
            weights[index] += w
            if log:
                offset -= w.sum()
        return weights, offset

    def integrals(self, values: np.ndarray, limits, *, log: bool = False) -> np.ndarray:
        """Integrals of each magnitude function up to each limit.

        Parameters
        ----------
        values : array of shape (n_clouds, n_nodes)
            Magnitude at :attr:`nodes`.
        limits : array of shape (n_limits,)

        Returns
        -------
        areas : array of shape (n_clouds, n_limits)
        """
        values = self._check_values(values)
        pairs = [self.integral_weights(L, log=log) for L in np.atleast_1d(limits)]
        W = np.stack([w for w, _ in pairs], axis=1)
        return values @ W + np.array([c for _, c in pairs])

    # -- the interpolant itself -------------------------------------------------------------
    def magnitude_at(self, values: np.ndarray, scales) -> np.ndarray:
        """Interpolated Mag at ``scales``, shape (n_clouds, n_scales)."""
        values = self._check_values(values)
        panels, _ = self._layout
        out = np.empty((values.shape[0], np.size(scales)))
        for k, t in enumerate(np.atleast_1d(scales)):
            t = self._check_scale(t, "scale")
            p = self._panel(t)
            _, _, x, index = panels[p]
            unit = chebyshev.chebval(self._local(p, t), self._inverse_vandermonde(tuple(x)))
            out[:, k] = values[:, index] @ unit
        return out

    def scale_at(self, values: np.ndarray, levels) -> np.ndarray:
        """For each cloud, the smallest scale at which the interpolated Mag reaches its level.

        Parameters
        ----------
        values : array of shape (n_clouds, n_nodes)
        levels : array of shape (n_clouds,)
            E.g. ``q · n_distinct`` for a convergence target q.

        Returns
        -------
        scales : array of shape (n_clouds,)

        Raises ``ValueError`` when a level is not reached on the grid (raise ``t_max``) or is
        reached within the first panel (below ``t_first``, where convergence targets of
        interest never lie).
        """
        values = self._check_values(values)
        levels = np.broadcast_to(np.asarray(levels, dtype=float), values.shape[:1])
        panels, _ = self._layout
        out = np.empty(values.shape[0])
        for i, (row, level) in enumerate(zip(values, levels, strict=True)):
            above = np.flatnonzero(row >= level)
            if above.size == 0:
                raise ValueError(
                    f"cloud {i}: Mag reaches {row[-1]:.6g} < {level:.6g} by t_max = "
                    f"{self.t_max:.6g}; raise curvature.sensitivity.grid.t_max.")
            j = above[0]
            if j <= self.first_nodes:  # node first_nodes is t_first, the first log panel's start
                raise ValueError(f"cloud {i}: Mag reaches {level:.6g} at or below t_first = "
                                 f"{self.t_first:.6g}; lower curvature.sensitivity.grid.t_first.")
            # Nodes j - 1 and j are consecutive Lobatto points of one log panel, where the
            # interpolant equals the values: the bracket holds a sign change.
            p = next(q for q in range(1, len(panels)) if j in panels[q][3][1:])
            a, b, x, index = panels[p]
            coef = self._inverse_vandermonde(tuple(x)) @ row[index]
            lo, hi = self._local(p, self.nodes[j - 1]), self._local(p, self.nodes[j])
            s = brentq(_shifted_chebval, lo, hi, args=(coef, level), xtol=1e-14, rtol=1e-13)
            out[i] = np.exp(np.log(a) + 0.5 * (s + 1.0) * (np.log(b) - np.log(a)))
        return out

    def relative_error_estimate(self, values: np.ndarray, *, log: bool = False) -> np.ndarray:
        """Estimated relative error of every integral of each cloud, shape (n_clouds,).

        On each panel, the interpolated function's error is estimated by the sum of its last two
        Chebyshev coefficients (they decay geometrically for smooth functions) and divided by
        the function's smallest value there; the largest ratio over the panels bounds
        ``|error| / integral`` for every limit, since the integrands are positive.
        """
        values = self._check_values(values)
        panels, _ = self._layout
        worst = np.zeros(values.shape[0])
        for p, (_, _, x, index) in enumerate(panels):
            t = self.nodes[index]
            f = values[:, index]
            if log:
                f = (f - 1.0) / t if p == 0 else f - 1.0
            elif p > 0:
                f = f * t
            coef = f @ self._inverse_vandermonde(tuple(x)).T
            tail = np.abs(coef[:, -2:]).sum(axis=1)
            floor = np.abs(f).min(axis=1)
            worst = np.maximum(worst, tail / np.where(floor > 0, floor, np.inf))
        return worst

    def _check_values(self, values) -> np.ndarray:
        values = np.atleast_2d(np.asarray(values, dtype=float))
        if values.shape[1] != self.nodes.size:
            raise ValueError(f"expected magnitude at the grid's {self.nodes.size} scales; got "
                             f"{values.shape[1]} per cloud.")
        if not np.all(np.isfinite(values)):
            raise ValueError("magnitude values must be finite.")
        return values


def _shifted_chebval(s: float, coef: np.ndarray, level: float) -> float:
    return chebyshev.chebval(s, coef) - level


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


def config_problems(section: Mapping) -> list[str]:
    """The constraints between keys of the curvature section (and its sensitivity study) that
    the configuration schema cannot express, as sentences naming the keys (empty if there are
    none). The workflow checks them before any job runs (workflow/rules/common.smk:
    check_config)."""
    curv = section
    problems = []
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
