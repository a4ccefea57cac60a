"""MagArea's log-stretched Hermite rule (``method="hermite_log"``) and the ``cc25`` name of the
default rule: its change of variable, the adaptive reference, the scales it solves, and the torch
path (closed forms, the batch and large-n paths: test_hermite_rule.py)."""

import math

import numpy as np
import pytest
from point_clouds import clustered
from test_hermite_rule import solved_scales

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _quadrature, mag_areas


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
    is Mag(0) = 1)."""
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
