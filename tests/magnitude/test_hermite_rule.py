"""MagArea's Hermite rule (``method="hermite"``): values and derivatives on the 13 Chebyshev
scales, Clenshaw–Curtis where its estimate falls short. Closed forms (REFERENCE.md §1), agreement
with the default rule, and the scales it solves."""

import numpy as np
import pytest
from point_clouds import clustered, equidistant, line

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _chebyshev, _quadrature, mag_areas
from diversity_core.magnitude.settings import MagnitudeSettings


def solved_scales(space: MagnitudeSpace) -> set:
    """The distinct scales the space's solver is asked for from now on."""
    solved = set()
    solver = space._solver
    for name in ("magnitude_with_error", "weights", "magnitude_and_derivative",
                 "magnitude_and_derivatives"):
        inner = getattr(solver, name)

        def spy(t, *args, inner=inner, **kwargs):
            solved.add(float(t))
            return inner(t, *args, **kwargs)

        setattr(solver, name, spy)
    return solved


def test_the_rule_integrates_polynomials_of_degree_24_exactly():
    T = 3.0
    ts = _chebyshev._cc_nodes(0.0, T, 12)
    rng = np.random.default_rng(0)
    p = np.polynomial.Polynomial(rng.normal(size=25))
    estimate, _ = _quadrature._hermite_rule(p(ts), p.deriv()(ts[1:]), T)
    assert estimate == pytest.approx(p.integ()(T) - p.integ()(0.0), rel=1e-12)


# The closed forms, for the three Hermite rules (``hermite_log``: also
# test_log_hermite_rule.py; ``hermite_d2``: test_hermite_d2_rule.py).
@pytest.mark.parametrize("method", ["hermite", "hermite_log", "hermite_d2"])
@pytest.mark.parametrize("d", [0.3, 1.0, 4.0, 40.0])
def test_two_points(d, method):
    T = 5.0
    # ∫_0^T 2 / (1 + e^{-td}) dt = (2/d) (log(1 + e^{Td}) - log 2)
    expected = 2.0 / d * (np.logaddexp(0.0, T * d) - np.log(2.0))
    assert dc.mag_area(equidistant(2, d), T, method=method) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("method", ["hermite", "hermite_log", "hermite_d2"])
@pytest.mark.parametrize("rtol", [1e-6, 1e-9])
def test_equidistant_points_and_the_line(rtol, method):
    n, d, T = 12, 0.7, 9.0
    # ∫_0^T n / (1 + (n-1) e^{-td}) dt = n (T + (log(1 + (n-1) e^{-Td}) - log n) / d)
    expected = n * (T + (np.log1p((n - 1) * np.exp(-T * d)) - np.log(n)) / d)
    area = dc.mag_area(equidistant(n, d), T, method=method, rtol=rtol)
    assert area == pytest.approx(expected, rel=rtol)
    x = np.random.default_rng(1).uniform(0, 3, size=25)
    gaps = np.diff(np.sort(x))
    # ∫_0^T 1 + Σ tanh(t a/2) dt = T + Σ (2/a) log cosh(T a/2)
    for T in (9.0, 400.0):  # 400: the rise from 1 is a small share of [0, T]
        expected = T + np.sum(2.0 / gaps * np.log(np.cosh(T * gaps / 2)))
        assert dc.mag_area(line(x), T, method=method, rtol=rtol) == pytest.approx(expected,
                                                                                   rel=rtol)


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "cityblock"])
@pytest.mark.parametrize("n", [150, 600])  # 600: conjugate gradients answer most scales
def test_agrees_with_the_default_rule(metric, n):
    X = clustered(n, 12, seed=n)
    D = dc.pairwise_distances(X, metric)
    for target in (0.5, 0.95, 0.99):
        t_cut = dc.convergence_scale(D, target)
        default = dc.mag_area(MagnitudeSpace(D), t_cut)
        assert dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite") == pytest.approx(
            default, rel=1e-6)


def test_after_the_search_it_solves_eleven_scales_where_its_estimate_suffices():
    """t_cut = t_conv: 11 of the 13 scales inside (0, t_cut) (Mag(0) = 1 is known), and
    t_cut itself, which the search ended on without solving it. The chebyshev rule (cc25)
    solves 23 inside on the same space."""
    D = dc.pairwise_distances(clustered(200, 3, seed=0))
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale()
    solved = solved_scales(space)
    area = space.mag_area(t_cut, method="hermite")
    assert t_cut in solved and len(solved) == 12
    h13, error = _quadrature._hermite_panel(space._known_slope, 1.0, t_cut)
    assert area == h13 and error <= 1e-6 * area  # it stopped at 13 scales
    cc25 = MagnitudeSpace(D)
    cc25.convergence_scale()
    solved = solved_scales(cc25)
    assert cc25.mag_area(t_cut, method="cc25") == pytest.approx(area, rel=1e-6)
    assert len(solved - {t_cut}) == 23


def test_where_its_estimate_falls_short_the_default_rule_answers_on_the_same_scales():
    """Cosine clusters at target 0.99: the 13 scales do not reach rtol; the Clenshaw–Curtis
    levels reuse all of them, and the result is the chebyshev rule's (both solve in full below
    the conjugate-gradient size; the Hermite rule's values come with their weighting, w.sum()
    rather than ‖L⁻¹1‖², hence round-off)."""
    D = dc.pairwise_distances(clustered(200, 32, seed=2), "cosine")
    t_cut = dc.convergence_scale(D, 0.99)
    space = MagnitudeSpace(D)
    solved = solved_scales(space)
    area = space.mag_area(t_cut, method="hermite")
    h13, error = _quadrature._hermite_panel(space._known_slope, 1.0, t_cut)
    assert error > 1e-6 * abs(h13)
    cc25 = MagnitudeSpace(D)
    solved_cc25 = solved_scales(cc25)
    assert cc25.mag_area(t_cut, method="chebyshev") == pytest.approx(area, rel=1e-13)
    assert solved == solved_cc25


# The batch, large-n, settings and argument checks of both Hermite rules (``hermite_log``:
# test_log_hermite_rule.py).
@pytest.mark.parametrize("method", ["hermite", "hermite_log"])
def test_batch_members_integrate_as_single_spaces(method):
    spaces = [dc.pairwise_distances(clustered(n, 6, seed=n)) for n in (30, 80, 120)]
    t_cut = 0.8 * np.median([dc.convergence_scale(D) for D in spaces])
    batch = mag_areas(spaces, t_cut, method=method)
    single = [dc.mag_area(MagnitudeSpace(D), t_cut, method=method) for D in spaces]
    np.testing.assert_allclose(batch, single, rtol=1e-9)


@pytest.mark.parametrize("method", ["hermite", "hermite_log"])
def test_the_large_path_integrates_by_the_same_rule(method):
    from diversity_core.magnitude import LargeMagnitudeSpace

    X = clustered(400, 6, seed=3)
    D = dc.pairwise_distances(X)
    t_cut = dc.convergence_scale(D)
    dense = dc.mag_area(MagnitudeSpace(D), t_cut, method=method)
    large = LargeMagnitudeSpace(X)
    assert dc.mag_area(large, t_cut, method=method) == pytest.approx(dense, rel=1e-6)
    assert large.area_error["relative"] <= 1e-6


@pytest.mark.parametrize("method", ["hermite", "hermite_log", "cc25"])
def test_settings_and_the_configuration_name_it(method):
    settings = MagnitudeSettings.from_config({"integration": method})
    D = dc.pairwise_distances(clustered(60, 4, seed=1))
    t = settings.convergence_scale(D)
    assert settings.mag_area(D, t) == dc.mag_area(D, t, method=method)
    assert method in dc.magnitude.INTEGRATION_METHODS


@pytest.mark.parametrize("method", ["hermite", "hermite_log"])
def test_the_rule_needs_the_derivative(method):
    with pytest.raises(ValueError, match="derivative"):
        _quadrature._integrate(lambda t: 1.0, 1.0, method=method, rtol=1e-6, n_ts=2)
