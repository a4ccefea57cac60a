"""MagArea's log-stretched Hermite rule (``method="hermite_log"``) and the ``cc25`` name of the
default rule: closed forms (REFERENCE.md §1), the adaptive reference, the scales it solves, and
the batch, large-n and torch paths."""

import math

import numpy as np
import pytest
from point_clouds import clustered, equidistant, line
from test_hermite_rule import solved_scales

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _quadrature, mag_areas
from diversity_core.magnitude.settings import MagnitudeSettings


@pytest.mark.parametrize("alpha", [0.25, 2.0, 3.0])
def test_the_stretch_maps_0_and_1_to_0_and_t_cut_exactly_with_its_derivatives(alpha):
    T = 7.3
    s = np.linspace(0.0, 1.0, 11)
    t, dt, ddt = _quadrature._log_stretch(s, T, alpha)
    assert t[0] == 0.0 and t[-1] == T and np.all(np.diff(t) > 0)
    h = 1e-6
    up, down = _quadrature._log_stretch(s + h, T, alpha), _quadrature._log_stretch(s - h, T, alpha)
    np.testing.assert_allclose(dt, (up[0] - down[0]) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(ddt, (up[1] - down[1]) / (2 * h), rtol=1e-7)


def test_the_stretch_rate_grows_with_reach_within_its_bounds():
    rates = [_quadrature._stretch_rate(r) for r in (0.0, 5.0, 20.0, 40.0, 80.0, 1e6)]
    assert rates[0] == rates[1] == 0.25 and rates[-1] == 3.0
    assert np.all(np.diff(rates) >= 0) and 0.25 < rates[3] < rates[4] < 3.0


def test_its_fifteen_point_rule_integrates_polynomials_of_degree_28_exactly():
    s = _quadrature._cc_nodes(0.0, 1.0, 14)
    rng = np.random.default_rng(0)
    p = np.polynomial.Polynomial(rng.normal(size=29))
    estimate, _ = _quadrature._hermite_rule(p(s), p.deriv()(s[1:]), 1.0)
    assert estimate == pytest.approx(p.integ()(1.0) - p.integ()(0.0), rel=1e-12)


@pytest.mark.parametrize("d", [0.3, 1.0, 4.0, 40.0])
def test_two_points(d):
    T = 5.0
    # ∫_0^T 2 / (1 + e^{-td}) dt = (2/d) (log(1 + e^{Td}) - log 2)
    expected = 2.0 / d * (np.logaddexp(0.0, T * d) - np.log(2.0))
    assert dc.mag_area(equidistant(2, d), T, method="hermite_log") == pytest.approx(
        expected, rel=1e-6)


@pytest.mark.parametrize("rtol", [1e-6, 1e-9])
def test_equidistant_points_and_the_line(rtol):
    n, d, T = 12, 0.7, 9.0
    # ∫_0^T n / (1 + (n-1) e^{-td}) dt = n (T + (log(1 + (n-1) e^{-Td}) - log n) / d)
    expected = n * (T + (np.log1p((n - 1) * np.exp(-T * d)) - np.log(n)) / d)
    area = dc.mag_area(equidistant(n, d), T, method="hermite_log", rtol=rtol)
    assert area == pytest.approx(expected, rel=rtol)
    x = np.random.default_rng(1).uniform(0, 3, size=25)
    gaps = np.diff(np.sort(x))
    # ∫_0^T 1 + Σ tanh(t a/2) dt = T + Σ (2/a) log cosh(T a/2)
    for T in (9.0, 400.0):  # 400: the rise from 1 is a small share of [0, T]
        expected = T + np.sum(2.0 / gaps * np.log(np.cosh(T * gaps / 2)))
        assert dc.mag_area(line(x), T, method="hermite_log", rtol=rtol) == pytest.approx(
            expected, rel=rtol)


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "cityblock"])
@pytest.mark.parametrize("n", [150, 600])  # 600: conjugate gradients answer most scales
def test_agrees_with_the_adaptive_reference(metric, n):
    D = dc.pairwise_distances(clustered(n, 12, seed=n), metric)
    for target in (0.5, 0.95, 0.99):
        t_cut = dc.convergence_scale(D, target)
        reference = MagnitudeSpace(D).mag_area(t_cut, rtol=1e-10)
        assert dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_log") == pytest.approx(
            reference, rel=1e-6)


def test_after_the_search_it_solves_thirteen_scales_where_its_estimate_suffices():
    """t_cut = t_conv: the search solved Mag and dMag/dt there; 13 of the 15 scales remain (0
    is Mag(0) = 1). The default rule solves 23 on the same space."""
    D = dc.pairwise_distances(clustered(200, 3, seed=0))
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(0.99)
    solved = solved_scales(space)
    area = space.mag_area(t_cut, method="hermite_log")
    assert t_cut not in solved and len(solved) == 13
    alpha = _quadrature._stretch_rate(t_cut * space.diameter)
    alone, error = _quadrature._log_hermite(space.magnitude, space._known_slope, t_cut,
                                            math.inf, alpha)
    assert area == alone and error <= 1e-6 * area  # it stopped at 15 scales
    reference = MagnitudeSpace(D).mag_area(t_cut, rtol=1e-10)
    assert area == pytest.approx(reference, rel=1e-6)


def test_where_its_estimate_falls_short_clenshaw_curtis_reuses_its_scales():
    """A rule whose estimate falls short (here: made so by a tolerance below what 15 scales
    reach) goes on with Clenshaw–Curtis in the stretched variable on 29 and 57 points, which
    contain its 15: 14 and 28 more solves, none off those grids, and the tolerance met."""
    D = dc.pairwise_distances(clustered(200, 32, seed=2), "cosine")
    t_cut = dc.convergence_scale(D, 0.99)
    space = MagnitudeSpace(D)
    space.convergence_scale(0.99)
    solved = solved_scales(space)
    area = space.mag_area(t_cut, method="hermite_log", rtol=1e-9)
    assert len(solved) in (13 + 14, 13 + 14 + 28)
    alpha = _quadrature._stretch_rate(t_cut * space.diameter)
    grid = _quadrature._log_stretch(_quadrature._cc_nodes(0.0, 1.0, 56), t_cut, alpha)[0]
    assert all(np.isclose(grid, t, rtol=1e-14, atol=0).any() for t in solved)
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-11), rel=1e-9)


def test_batch_members_integrate_as_single_spaces():
    spaces = [dc.pairwise_distances(clustered(n, 6, seed=n)) for n in (30, 80, 120)]
    t_cut = 0.8 * np.median([dc.convergence_scale(D) for D in spaces])
    batch = mag_areas(spaces, t_cut, method="hermite_log")
    single = [dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_log") for D in spaces]
    np.testing.assert_allclose(batch, single, rtol=1e-9)


def test_the_large_path_integrates_by_the_same_rule():
    from diversity_core.magnitude import LargeMagnitudeSpace

    X = clustered(400, 6, seed=3)
    D = dc.pairwise_distances(X)
    t_cut = dc.convergence_scale(D)
    dense = dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_log")
    large = LargeMagnitudeSpace(X)
    assert dc.mag_area(large, t_cut, method="hermite_log") == pytest.approx(dense, rel=1e-6)
    assert large.area_error["relative"] <= 1e-6


def test_the_torch_path_integrates_by_the_same_rule_in_thirteen_factorisations():
    pytest.importorskip("torch")
    from diversity_core.magnitude import TorchMagnitudeSpace

    D = dc.pairwise_distances(clustered(150, 5, seed=4))
    space = TorchMagnitudeSpace(D, device="cpu")
    t_cut = space.convergence_scale(0.99)
    area = space.mag_area(t_cut, method="hermite_log")
    assert space.evaluations["mag_area"] == 13
    numpy_space = MagnitudeSpace(D, solver="direct")
    assert area == pytest.approx(numpy_space.mag_area(t_cut, method="hermite_log"), rel=1e-10)
    assert space.mag_area(t_cut, method="cc25") == pytest.approx(
        numpy_space.mag_area(t_cut, method="chebyshev"), rel=1e-10)


def test_cc25_is_the_default_rule_by_another_name():
    D = dc.pairwise_distances(clustered(120, 4, seed=5))
    t_cut = dc.convergence_scale(D)
    space = MagnitudeSpace(D)
    solved = solved_scales(space)
    named = space.mag_area(t_cut, method="cc25")
    chebyshev = MagnitudeSpace(D)
    solved_chebyshev = solved_scales(chebyshev)
    assert named == chebyshev.mag_area(t_cut, method="chebyshev")
    assert solved == solved_chebyshev
    spaces = [D, dc.pairwise_distances(clustered(60, 4, seed=6))]
    np.testing.assert_array_equal(mag_areas(spaces, t_cut, method="cc25"),
                                  mag_areas(spaces, t_cut, method="chebyshev"))


@pytest.mark.parametrize("method", ["cc25", "hermite_log"])
def test_settings_and_the_configuration_name_it(method):
    settings = MagnitudeSettings.from_config({"integration": method})
    D = dc.pairwise_distances(clustered(60, 4, seed=1))
    t = settings.convergence_scale(D)
    assert settings.mag_area(D, t) == dc.mag_area(D, t, method=method)
    assert method in dc.magnitude.INTEGRATION_METHODS


def test_the_rule_needs_the_derivative():
    with pytest.raises(ValueError, match="derivative"):
        _quadrature._integrate(lambda t: 1.0, 1.0, method="hermite_log", rtol=1e-6, n_ts=2)
