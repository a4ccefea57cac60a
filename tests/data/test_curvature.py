"""The constant-curvature disk generator against independent constructions of the same spaces."""

import dataclasses

import numpy as np
import pytest
import yaml
from scipy import integrate, stats
from workflow_runner import REPO

from diversity_core import MagnitudeSettings, MagnitudeSpace
from diversity_core.data.curvature import (
    curvature_design,
    geodesic_distances,
    hyperbolic_distance_factor,
    sample_disk,
)
from diversity_core.experiments.curvature import (
    cross_validated_mse,
    regressors,
    subsample_designs,
    variant_areas,
    variant_magnitude,
    variant_scales,
)
from diversity_core.magnitude import ScaleGrid


def test_sphere_distances_match_great_circle_arcs():
    K = 1.7
    R = 1 / np.sqrt(K)
    polar = sample_disk(K, 80, np.random.default_rng(0))
    r, theta = polar.T
    xyz = R * np.column_stack([np.sin(r / R) * np.cos(theta), np.sin(r / R) * np.sin(theta),
                               np.cos(r / R)])
    # Great-circle distance via atan2(|u×v|, u·v): accurate for near and far points alike.
    cross = np.linalg.norm(np.cross(xyz[:, None], xyz[None]), axis=-1)
    arcs = R * np.arctan2(cross, xyz @ xyz.T)
    np.testing.assert_allclose(geodesic_distances(polar, K), arcs, atol=1e-12)


def test_hyperbolic_distances_match_the_poincare_disk():
    K = -1.3
    R = 1 / np.sqrt(-K)
    polar = sample_disk(K, 80, np.random.default_rng(1))
    r, theta = polar.T
    z = np.tanh(r / (2 * R)) * np.exp(1j * theta)  # Poincaré disk point at geodesic radius r
    num = np.abs(z[:, None] - z[None]) ** 2
    den = (1 - np.abs(z)[:, None] ** 2) * (1 - np.abs(z)[None] ** 2)
    poincare = R * np.arccosh(1 + 2 * num / den)
    np.testing.assert_allclose(geodesic_distances(polar, K), poincare, atol=1e-10)


def test_flat_disk_and_continuity_in_curvature():
    polar = sample_disk(0.0, 60, np.random.default_rng(2))
    r, theta = polar.T
    xy = np.column_stack([r * np.cos(theta), r * np.sin(theta)])
    flat = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    np.testing.assert_allclose(geodesic_distances(polar, 0.0), flat, atol=1e-12)
    for K in (1e-6, -1e-6):
        np.testing.assert_allclose(geodesic_distances(polar, K), flat, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("K", [-2.0, 0.0, 2.0])
def test_radii_are_area_uniform(K):
    """The share of points within geodesic radius s must equal area(s) / area(1)."""
    r = sample_disk(K, 20000, np.random.default_rng(3))[:, 0]
    assert r.max() <= 1.0 and r.min() >= 0.0
    if K > 0:
        R = 1 / np.sqrt(K)
        cdf = lambda s: (1 - np.cos(s / R)) / (1 - np.cos(1 / R))  # noqa: E731
    elif K < 0:
        R = 1 / np.sqrt(-K)
        cdf = lambda s: (np.cosh(s / R) - 1) / (np.cosh(1 / R) - 1)  # noqa: E731
    else:
        cdf = lambda s: s**2  # noqa: E731
    assert stats.kstest(r, cdf).pvalue > 1e-3


def test_design_and_determinism():
    kwargs = dict(curvature_min=-2, curvature_max=2, n_train_curvatures=101,
                  clouds_per_curvature=10, n_test_clouds=100)
    K, split = curvature_design(**kwargs, rng=np.random.default_rng(0))
    assert (split == "train").sum() == 1010 and (split == "test").sum() == 100
    assert np.unique(K[split == "train"]).size == 101
    K2, _ = curvature_design(**kwargs, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(K, K2)
    with pytest.raises(ValueError, match="does not fit"):
        sample_disk(10.0, 5, np.random.default_rng(0))


def test_regressors_recover_a_monotone_relation():
    rng = np.random.default_rng(4)
    K = rng.uniform(-2, 2, 300)
    area = 1000 + 50 * K + 8 * K**2 + rng.normal(0, 1, K.size)  # monotone on [-2, 2]
    models = regressors(piecewise_knots=6, quantile=0.5)
    mse = cross_validated_mse(models["MagArea (piecewise linear)"], area[:, None], K,
                              n_folds=5, seed=0)
    assert mse.shape == (5,) and mse.mean() < 0.01
    mse_q = cross_validated_mse(models["MagArea (quantile)"], area[:, None], K, n_folds=5, seed=0)
    assert mse_q.mean() < 0.1  # linear in MagArea: the curvature of the relation costs accuracy


def test_too_many_piecewise_knots_are_rejected_in_the_fit(tmp_path):
    """100 knots on the tiny configuration's 33 training clouds finished with exit 0 and a
    meaningless MSE of 3.1; the fit now refuses more knots than the data carry."""
    import sys
    from pathlib import Path

    from diversity_core.experiments.curvature import (
        MIN_CLOUDS_PER_KNOT_INTERVAL,
        max_piecewise_knots,
    )

    X = np.linspace(0, 1, 33)[:, None]
    assert max_piecewise_knots(X, n_folds=5, seed=0) == 1 + 26 // MIN_CLOUDS_PER_KNOT_INTERVAL
    X_ties = np.repeat(np.linspace(0, 1, 11), 3)[:, None]  # 11 distinct values only
    assert max_piecewise_knots(X_ties, n_folds=5, seed=0) == 1 + 11 // 4

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    try:
        import curvature_table
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(0)
    n_train, n_test = 33, 6
    curvature = np.r_[np.repeat(np.linspace(-2, 2, 11), 3), rng.uniform(-2, 2, n_test)]
    n = n_train + n_test
    np.savez(tmp_path / "clouds.npz", curvature=curvature,
             split=np.array(["train"] * n_train + ["test"] * n_test))
    np.savez(tmp_path / "scales.npz", index=np.arange(n), t_conv=rng.uniform(1, 2, n),
             distance_quantiles=rng.uniform(size=(n, 4)))
    area = 100 - 10 * curvature + rng.normal(size=n)
    np.savez(tmp_path / "mag.npz", index=np.arange(n), mag_area=area, mag_area_trapezoid=area)
    args = dict(clouds=tmp_path / "clouds.npz", scales=[tmp_path / "scales.npz"],
                functions=[tmp_path / "mag.npz"], features=tmp_path / "features.csv",
                table=tmp_path / "table1.csv", cv_folds=5, quantile=0.5, seed=0)
    with pytest.raises(ValueError, match=r"curvature.piecewise_knots \(100\) is too large"):
        curvature_table.main(**args, piecewise_knots=100)
    with pytest.raises(ValueError, match=r"curvature.cv_folds \(40\) exceeds the 33"):
        curvature_table.main(**{**args, "cv_folds": 40}, piecewise_knots=4)
    assert not (tmp_path / "table1.csv").exists()
    facts = curvature_table.main(**args, piecewise_knots=4)
    assert (tmp_path / "table1.csv").exists()
    assert facts == {"n_train_clouds": 33, "n_test_clouds": 6}  # for the provenance records


def _turkes_formula(polar, K, factor):
    """Turkeš et al.'s calculate_distance_matrix_hyperbolic, vectorised: Poincaré coordinates
    c = tanh(r/2R)·e^{iθ} and factor·R·artanh(|c1 − c2| / |1 − c1·conj(c2)|); their code has
    factor 1, the commented-out true line factor 2."""
    R = 1 / np.sqrt(-K)
    r, theta = polar.T
    c = np.tanh(r / (2 * R)) * np.exp(1j * theta)
    ratio = np.abs(c[:, None] - c[None]) / np.abs(1 - c[:, None] * np.conj(c[None]))
    return factor * R * np.arctanh(np.clip(ratio, 0, 1))


@pytest.mark.parametrize("K", [-2.0, -0.37])
def test_turkes_distances_are_half_the_true_ones(K):
    polar = sample_disk(K, 70, np.random.default_rng(5))
    true = geodesic_distances(polar, K)
    turkes = geodesic_distances(polar, K, hyperbolic_distance="turkes")
    np.testing.assert_allclose(turkes, _turkes_formula(polar, K, 1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(true, _turkes_formula(polar, K, 2), rtol=1e-9, atol=1e-12)
    off = ~np.eye(len(polar), dtype=bool)
    np.testing.assert_allclose(true[off] / turkes[off], 2.0, rtol=1e-13)  # the factor 2
    assert geodesic_distances(polar, K, "true") == pytest.approx(true, abs=0)
    assert hyperbolic_distance_factor(K, "turkes") == 0.5


@pytest.mark.parametrize("K", [0.0, 1.3])
def test_turkes_option_leaves_flat_and_spherical_disks_alone(K):
    polar = sample_disk(K, 30, np.random.default_rng(6))
    np.testing.assert_array_equal(geodesic_distances(polar, K, "turkes"),
                                  geodesic_distances(polar, K, True))


@pytest.mark.parametrize("bad", [False, 1, "True", "halved", None])
def test_hyperbolic_distance_option_rejects_other_values(bad):
    polar = sample_disk(-1.0, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="curvature.hyperbolic_distance"):
        geodesic_distances(polar, -1.0, bad)


# -- the scale grid of the sensitivity study ---------------------------------------------------
@pytest.fixture(scope="module")
def grid_spaces():
    """Two disks, their magnitude on the default scale grid."""
    rng = np.random.default_rng(7)
    grid = ScaleGrid()
    spaces = [MagnitudeSpace(geodesic_distances(sample_disk(K, 150, rng), K))
              for K in (-1.5, 1.2)]
    values = np.array([space.magnitude_function(grid.nodes) for space in spaces])
    return grid, spaces, values


def test_scale_grid_layout():
    grid = ScaleGrid(t_first=5.0, t_max=1280.0, first_nodes=17, panel_nodes=17, panel_ratio=4.0)
    np.testing.assert_allclose(grid.edges, [0, 5, 20, 80, 320, 1280])
    assert grid.nodes.size == 17 + 4 * 16 + 1  # adjacent panels share their end scale
    assert np.all(np.diff(grid.nodes) > 0) and grid.nodes[0] > 0 and grid.nodes[-1] == 1280.0
    np.testing.assert_allclose(ScaleGrid(t_max=45.0, panel_ratio=3.0).edges, [0, 5, 15, 45])
    assert ScaleGrid(t_max=46.0, panel_ratio=3.0).edges.size == 5  # a factor > 3 left: 3 panels
    with pytest.raises(ValueError, match="t_first < t_max"):
        ScaleGrid(t_first=10.0, t_max=5.0)


def test_scale_grid_integrates_a_closed_form():
    """Two points at distance d: Mag(t) = 2/(1 + e^{-td}),
    ∫_0^L Mag dt = (2/d)(log(1 + e^{Ld}) − log 2)."""
    grid = ScaleGrid()
    for d in (0.01, 0.1, 1.0):
        values = 2 / (1 + np.exp(-grid.nodes * d))
        limits = np.array([0.5, 5.0, 17.0, 124.0, 1280.0])
        exact = 2 / d * (np.logaddexp(0, limits * d) - np.log(2))
        np.testing.assert_allclose(grid.integrals(values, limits)[0], exact, rtol=1e-8)


def test_scale_grid_matches_the_package_integral(grid_spaces):
    grid, spaces, values = grid_spaces
    settings = MagnitudeSettings(integration_rtol=1e-12)
    limits = np.concatenate([[0.3, 5.0], np.random.default_rng(8).uniform(1, 1280, 6)])
    exact = np.array([[settings.mag_area(space, L) for L in limits] for space in spaces])
    error = np.abs(grid.integrals(values, limits) / exact - 1)
    assert error.max() < 1e-6
    # The run's own error estimate is a bound on the true error, and below the default rtol.
    estimate = grid.relative_error_estimate(values)
    assert np.all(error.max(axis=1) <= estimate) and estimate.max() < 1e-6


def test_scale_grid_integrates_in_log_t(grid_spaces):
    grid, spaces, values = grid_spaces
    limits = np.array([2.0, 60.0, 700.0])
    for space, row in zip(spaces, values, strict=True):
        exact = [integrate.quad(lambda t, s=space: (s.magnitude(t) - 1) / t, 0, L,
                                epsrel=1e-11, limit=200)[0] for L in limits]
        np.testing.assert_allclose(grid.integrals(row, limits, log=True)[0], exact, rtol=1e-6)
    assert grid.relative_error_estimate(values, log=True).max() < 1e-6


def test_scale_grid_interpolates_and_finds_convergence_scales(grid_spaces):
    grid, spaces, values = grid_spaces
    scales = np.array([1.3, 33.3, 444.4])
    exact = np.array([[space.magnitude(t) for t in scales] for space in spaces])
    np.testing.assert_allclose(grid.magnitude_at(values, scales), exact, rtol=1e-7)
    n = np.array([space.n_unique for space in spaces])
    for q in (0.5, 0.95, 0.99):
        settings = dataclasses.replace(MagnitudeSettings(), target=q)
        t_q = [settings.convergence_scale(space) for space in spaces]
        np.testing.assert_allclose(grid.scale_at(values, q * n), t_q, rtol=1e-6)
    with pytest.raises(ValueError, match="t_max"):
        grid.scale_at(values, n + 1.0)  # never reached
    with pytest.raises(ValueError, match="outside the scale grid"):
        grid.integrals(values, [2000.0])
    with pytest.raises(ValueError, match="scales"):
        grid.integrals(values[:, :-1], [10.0])


def test_variants_follow_from_the_true_magnitude(grid_spaces):
    """Turkeš et al.'s K < 0 distances are halved, so their Mag(t) is the true Mag(t/2): the study
    derives that variant from the true values without evaluating magnitude again."""
    grid, spaces, values = grid_spaces
    factors = np.array([hyperbolic_distance_factor(K, "turkes") for K in (-1.5, 1.2)])
    halved = MagnitudeSpace(spaces[0].D * 0.5)
    settings = MagnitudeSettings(integration_rtol=1e-12)
    areas = variant_areas(grid, values, [40.0, 300.0], factors)
    np.testing.assert_allclose(areas[0], [settings.mag_area(halved, L) for L in (40.0, 300.0)],
                               rtol=1e-6)
    np.testing.assert_allclose(areas[1], grid.integrals(values[1], [40.0, 300.0])[0], rtol=1e-15)
    np.testing.assert_allclose(variant_magnitude(grid, values, [50.0], factors)[0, 0],
                               halved.magnitude(50.0), rtol=1e-7)
    t_conv = variant_scales(grid, values, np.array([150, 150]), [0.95], factors)
    assert t_conv[0, 0] == pytest.approx(settings.convergence_scale(halved), rel=1e-6)
    assert t_conv[1, 0] == pytest.approx(settings.convergence_scale(spaces[1]), rel=1e-6)


def test_schema_grid_defaults_are_the_package_defaults():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    grid = schema["properties"]["curvature"]["properties"]["sensitivity"]["properties"]["grid"]
    defaults = {key: spec["default"] for key, spec in grid["properties"].items()}
    assert ScaleGrid(**defaults) == ScaleGrid()
    assert set(defaults) == {f.name for f in dataclasses.fields(ScaleGrid)}


def test_fold_spread_designs():
    K, split = curvature_design(curvature_min=-2, curvature_max=2, n_train_curvatures=101,
                                clouds_per_curvature=10, n_test_clouds=100,
                                rng=np.random.default_rng(0))
    designs = subsample_designs(K, split, n_curvatures=[41, 101], repeats=3)
    assert [len(sets) for sets in designs.values()] == [3, 3, 3, 3]
    assert designs["all training clouds"][0].size == 1010
    assert designs["test clouds"][0].size == 100 and np.all(split[designs["test clouds"][0]]
                                                            == "test")
    for count in (41, 101):
        sets = designs[f"one cloud each of {count} curvatures"]
        for idx in sets:
            assert idx.size == count and np.unique(K[idx]).size == count
            assert np.all(split[idx] == "train")
        assert not np.intersect1d(sets[0], sets[1]).size  # other clouds in each repeat
    chosen = np.sort(K[designs["one cloud each of 41 curvatures"][0]])
    assert chosen[0] == -2 and chosen[-1] == 2 and np.diff(chosen).max() <= 0.12 + 1e-12
    with pytest.raises(ValueError, match="spread_curvatures"):
        subsample_designs(K, split, n_curvatures=[500], repeats=2)
