"""MagArea's log-stretched Hermite rule (``method="hermite_log"``) and the ``cc25`` name of the
default rule: its change of variable, the adaptive reference, the scales it solves, and the torch
path (closed forms, the batch and large-n paths: test_hermite_rule.py)."""

import math

import numpy as np
import pytest
from point_clouds import clustered
from test_hermite_rule import solved_scales

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _chebyshev, _quadrature, mag_areas


@pytest.mark.parametrize("alpha", [0.25, 2.0, 3.0])
def test_the_stretch_maps_0_and_1_to_0_and_t_cut_exactly_with_its_derivatives(alpha):
    T = 7.3
    s = np.linspace(0.0, 1.0, 11)
    t, dt, ddt = _chebyshev._log_stretch(s, T, alpha)
    assert t[0] == 0.0 and t[-1] == T and np.all(np.diff(t) > 0)
    h = 1e-6
    up, down = _chebyshev._log_stretch(s + h, T, alpha), _chebyshev._log_stretch(s - h, T, alpha)
    np.testing.assert_allclose(dt, (up[0] - down[0]) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(ddt, (up[1] - down[1]) / (2 * h), rtol=1e-7)


def test_the_stretch_rate_grows_with_reach_within_its_bounds():
    rates = [_chebyshev._stretch_rate(r) for r in (0.0, 5.0, 20.0, 40.0, 80.0, 1e6)]
    assert rates[0] == rates[1] == 0.25 and rates[-1] == 3.0
    assert np.all(np.diff(rates) >= 0) and 0.25 < rates[3] < rates[4] < 3.0


def test_its_fifteen_point_rule_integrates_polynomials_of_degree_28_exactly():
    s = _chebyshev._cc_nodes(0.0, 1.0, 14)
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
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    alone, error = _quadrature._log_hermite(space.magnitude, space._known_slope, t_cut,
                                            math.inf, alpha)
    assert area == alone and error <= 1e-6 * area  # it stopped at 15 scales
    reference = MagnitudeSpace(D).mag_area(t_cut, rtol=1e-10)
    assert area == pytest.approx(reference, rel=1e-6)


def stretched(indices, t_cut: float, alpha: float, n: int = 28) -> np.ndarray:
    """The scales t(s) at the given points of the n + 1 Chebyshev–Lobatto points of s."""
    return _chebyshev._log_stretch(_chebyshev._cc_nodes(0.0, 1.0, n), t_cut, alpha)[0][
        list(indices)]


@pytest.mark.parametrize(("stages", "points"), [(2, 17), (3, 22)])
def test_its_later_stages_integrate_polynomials_of_their_degree_exactly(stages, points):
    """15 + 2 points: 17 values and 16 derivatives, degree 32; 15 + 2 + 5: 22 and 21, degree
    42."""
    s = _chebyshev._cc_nodes(0.0, 1.0, 28)
    known = sorted([0, *(i for stage in _quadrature._LOG_HERMITE_STAGES[:stages] for i in stage)])
    assert len(known) == points
    basis = _quadrature._hermite_basis_at(tuple(2.0 * s[known] - 1.0))
    rng = np.random.default_rng(1)
    p = np.polynomial.Polynomial(rng.normal(size=2 * points - 1))
    estimate, _ = _quadrature._hermite_rule(p(s[known]), p.deriv()(s[known][1:]), 1.0,
                                            basis=basis)
    assert estimate == pytest.approx(p.integ()(1.0) - p.integ()(0.0), rel=1e-11)


@pytest.mark.parametrize(("stage", "new_scales"), [(1, 2), (2, 2 + 5)])
def test_where_fifteen_points_fall_short_the_next_stages_add_their_scales(stage, new_scales):
    """A tolerance between two stages' estimates: the rule stops at the later one, having
    solved its points of the 29-point grid (1 and 17; then 5, 9, ..., 25) besides the 13, and
    the tolerance kept."""
    D = dc.pairwise_distances(clustered(200, 32, seed=2), "cosine")
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(0.5)
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    stages = _quadrature._log_hermite_stages(space.magnitude, space._known_slope, t_cut, alpha,
                                             np.full(29, np.nan))
    results = [tuple(next(stages)) for _ in range(stage + 1)]
    (h_before, e_before), (h_stop, e_stop) = results[-2:]
    assert all(e / h > e_before / h_before for h, e in results[:-2])
    rtol = math.sqrt(e_before / h_before * e_stop / h_stop)  # between the two estimates
    assert e_stop / h_stop < rtol < e_before / h_before
    fresh = MagnitudeSpace(D)
    fresh.convergence_scale(0.5)
    solved = solved_scales(fresh)
    area = fresh.mag_area(t_cut, method="hermite_log", rtol=rtol)
    assert area == h_stop and len(solved - {t_cut}) == 13 + new_scales  # (t_cut: see the search)
    added = [i for later in _quadrature._LOG_HERMITE_STAGES[1:stage + 1] for i in later]
    assert all(np.isclose(stretched(added, t_cut, alpha), t, rtol=1e-14, atol=0).any()
               for t in solved - set(stretched(_quadrature._LOG_HERMITE_STAGES[0], t_cut, alpha)))
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-11), rel=rtol)


def test_past_its_hermite_stages_clenshaw_curtis_reuses_their_scales():
    """A tolerance below what the 29 points' estimate reaches: Clenshaw–Curtis in s on 57
    points, which contain the 29 (28 solves more, none off that grid), and the tolerance met."""
    D = dc.pairwise_distances(clustered(200, 32, seed=2), "cosine")
    t_cut = dc.convergence_scale(D, 0.99)
    space = MagnitudeSpace(D)
    space.convergence_scale(0.99)
    solved = solved_scales(space)
    area = space.mag_area(t_cut, method="hermite_log", rtol=1e-12)
    assert len(solved - {t_cut}) == 13 + 7 + 7 + 28
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    grid = stretched(range(57), t_cut, alpha, n=56)
    assert all(np.isclose(grid, t, rtol=1e-14, atol=0).any() for t in solved)
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-13), rel=1e-11)


def test_an_integrand_no_stage_resolves_is_bisected_to_the_tolerance():
    """A bump of width 0.002 (poles that close to the axis): every Hermite stage and the 57
    points fall short, and the bisected panels meet the tolerance."""
    w = 2e-3
    asked = []

    def f(t):
        asked.append(t)
        return 1.0 + 1.0 / (1.0 + ((t - 0.3) / w)**2)

    def slope(t):
        return f(t), -2.0 * (t - 0.3) / w**2 / (1.0 + ((t - 0.3) / w)**2)**2

    area, error = _quadrature._log_hermite(f, slope, 1.0, 1e-8, 1.0)
    exact = 1.0 + w * (math.atan(0.7 / w) + math.atan(0.3 / w))
    assert len(set(asked)) > 57 and error <= 1e-8 * area
    assert area == pytest.approx(exact, rel=1e-8)


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


@pytest.mark.parametrize("rtol", [1e-6, 1e-9, 1e-12])  # 1e-12: stages 2, 3 and Clenshaw–Curtis
def test_the_batch_integrates_every_member_as_its_own_space_does(rtol):
    """Members of 10 points (the stacked solver), of 80 and 120 (the looped one), solved stage
    by stage together: each member's area is its single space's, to round-off."""
    spaces = [dc.pairwise_distances(clustered(10, 384, seed=k), "cosine") for k in range(6)]
    spaces += [dc.pairwise_distances(clustered(n, 6, seed=n)) for n in (80, 120)]
    t_cut = float(np.median([dc.convergence_scale(D) for D in spaces]))
    batch = mag_areas(spaces, t_cut, method="hermite_log", rtol=rtol)
    single = [dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_log", rtol=rtol)
              for D in spaces]
    np.testing.assert_allclose(batch, single, rtol=1e-12, atol=0)


def test_many_integrands_take_one_call_per_stage_and_each_its_own_result():
    """Integrands that stop at different stages: one call of ``slopes`` per stage for all the
    unfinished ones, and each result that of the integrand alone."""
    widths = np.array([0.5, 0.05, 0.01])  # smooth to hard: Lorentzian bumps at t = 0.3
    alphas = np.array([0.5, 1.0, 2.0])

    def f(k, t):
        return 1.0 + 1.0 / (1.0 + ((t - 0.3) / widths[k])**2)

    def df(k, t):
        return -2.0 * (t - 0.3) / widths[k]**2 / (1.0 + ((t - 0.3) / widths[k])**2)**2

    calls = []

    def slopes(rows, ts):
        calls.append(len(rows))
        return f(rows, ts), df(rows, ts)

    estimate, error = _quadrature._log_hermite_many(
        slopes, lambda rows, ts: f(rows, ts), f(np.arange(3), 0.0), 1.0, 1e-7, alphas)
    stages = len(_quadrature._LOG_HERMITE_STAGES)
    assert calls[0] == 3 * 14 and 1 < len(calls) <= stages and calls[-1] < calls[0]
    for k in range(3):
        alone, alone_error = _quadrature._log_hermite(
            lambda t, k=k: float(f(k, t)), lambda t, k=k: (float(f(k, t)), float(df(k, t))),
            1.0, 1e-7, float(alphas[k]))
        many = (estimate[k], error[k])
        if error[k] > 1e-7 * abs(estimate[k]):  # past the 57 points: bisection, one at a time
            many = _chebyshev._stretched_refine(lambda t, k=k: float(f(k, t)), 1.0,
                                                   float(alphas[k]), float(estimate[k]), 1e-7)
        assert many == pytest.approx((alone, alone_error), rel=1e-12)


def test_conjugate_gradients_solve_its_scales_to_the_accuracy_the_integral_allows():
    """600 points: conjugate gradients answer, stopping on Mag's estimated error as for the
    default rule; the scales so solved are known to be less accurate (a full-accuracy request
    solves them again), and the integral keeps its tolerance."""
    D = dc.pairwise_distances(clustered(600, 12, seed=600))
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(0.95)
    area = space.mag_area(t_cut, method="hermite_log")
    assert space._slope_error and all(e > 0 for e in space._slope_error.values())
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-10), rel=1e-6)
    t = next(iter(space._slope_error))
    exact = MagnitudeSpace(D, solver="direct").magnitude_and_derivative(t)
    assert space._known_slope(t) == pytest.approx(exact, rel=1e-8)
    assert t not in space._slope_error and t not in space._cache_error
