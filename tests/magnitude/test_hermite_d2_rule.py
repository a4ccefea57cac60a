"""MagArea's ``hermite_d2`` rule: values, first and second derivatives on 11 stretched scales.
Its quadrature, the second derivative of every dense solver against closed forms and
differences, the scales it solves, the batches, the torch paths, and the large-n path that
refuses it (closed forms of the integral: test_hermite_rule.py)."""

import math

import numpy as np
import pytest
from point_clouds import clustered, equidistant
from test_hermite_rule import solved_scales
from test_magnitude import k32

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _chebyshev, _hermite_d2, mag_areas
from diversity_core.magnitude._batch import _Batch

FINEST = _hermite_d2.D2_FINEST
# The grid indices known at the end of each stage.
STAGE_GRIDS = [sorted(set().union(*_hermite_d2.D2_STAGES[:k + 1]))
               for k in range(len(_hermite_d2.D2_STAGES))]


def stage_estimate(grid: list[int], g, dg, ddg) -> float:
    """The integral over [0, 1] of s from g, g' and g'' at the grid's points."""
    s = _chebyshev._cc_nodes(0.0, 1.0, FINEST)
    basis = _hermite_d2._birkhoff_basis(tuple(2.0 * s[grid] - 1.0),
                                        _hermite_d2._stage_orders(len(grid)))
    data = np.concatenate([g(s[grid]), dg(s[grid[1:]]) / 2.0, ddg(s[grid[1:-1]]) / 4.0])
    coef = basis @ data
    even = np.arange(0, coef.size, 2)
    return float(0.5 * np.sum(coef[even] * 2.0 / (1.0 - even**2.0)))


def test_the_stages_add_eleven_then_two_then_six_points_of_one_grid():
    """9 solves (t = 0 and t_cut known), 11, 19: each stage's points are new, and together they
    are the 21 Chebyshev–Lobatto points, symmetric about s = 1/2 at every stage."""
    assert [len(grid) for grid in STAGE_GRIDS] == [11, 13, 21]
    assert sum(len(stage) for stage in _hermite_d2.D2_STAGES) == FINEST + 1
    for grid in STAGE_GRIDS:
        assert grid == sorted(FINEST - i for i in grid)


@pytest.mark.parametrize("grid", STAGE_GRIDS, ids=lambda grid: f"{len(grid)}points")
def test_each_stage_integrates_polynomials_of_its_degree_exactly(grid):
    """11 points: 11 values, 10 first and 9 second derivatives (degree 29); 13 points: degree
    35; 21 points: degree 59 (the value alone at s = 0, no second derivative at t_cut)."""
    degree = 3 * len(grid) - 4
    p = np.polynomial.Chebyshev(np.random.default_rng(len(grid)).normal(size=degree + 1),
                                domain=[0.0, 1.0])
    exact = p.integ()(1.0) - p.integ()(0.0)
    assert stage_estimate(grid, p, p.deriv(1), p.deriv(2)) == pytest.approx(exact, rel=1e-9)
    q = np.polynomial.Chebyshev.basis(degree + 1, domain=[0.0, 1.0])  # one degree more: not
    assert stage_estimate(grid, q, q.deriv(1), q.deriv(2)) != pytest.approx(
        q.integ()(1.0) - q.integ()(0.0), abs=1e-6)


@pytest.mark.parametrize("t", [0.05, 0.7, 3.0])
@pytest.mark.parametrize("n", [2, 7])
def test_the_second_derivative_of_equidistant_points_is_its_closed_form(n, t):
    """Mag(t) = n / (1 + (n − 1) q) with q = e^{-td}: Mag' = n (n − 1) d q / (1 + (n − 1) q)²,
    Mag'' = n (n − 1) d² q ((n − 1) q − 1) / (1 + (n − 1) q)³."""
    d = 1.7
    q = math.exp(-t * d)
    k = n - 1
    expected = (n / (1 + k * q), n * k * d * q / (1 + k * q)**2,
                n * k * d**2 * q * (k * q - 1) / (1 + k * q)**3)
    got = MagnitudeSpace(equidistant(n, d)).magnitude_and_derivatives(t)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("n, options", [
    (120, {}),  # Cholesky
    (120, {"precision": "mixed"}),  # the float32 factor; the float64 one for Z⁻¹v
    (700, {}),  # conjugate gradients, twice
])
def test_every_dense_solver_gives_the_second_derivative_of_its_slope(n, options):
    """Against a central difference of the Cholesky path's dMag/dt (error of order h²)."""
    D = dc.pairwise_distances(clustered(n, 6, seed=n))
    exact = MagnitudeSpace(D, solver="direct")
    for t in (0.1, 1.0, 4.0):
        t *= exact.convergence_scale(0.5)
        h = 1e-4 * t
        difference = (exact.magnitude_and_derivative(t + h)[1]
                      - exact.magnitude_and_derivative(t - h)[1]) / (2 * h)
        mag, slope, second = MagnitudeSpace(D, **options).magnitude_and_derivatives(t)
        assert mag == pytest.approx(exact.magnitude(t), rel=1e-9)
        assert slope == pytest.approx(exact.magnitude_and_derivative(t)[1], rel=1e-7)
        assert second == pytest.approx(difference, rel=1e-5)


def test_a_similarity_matrix_not_positive_definite_gives_it_by_its_fallback():
    """K_{3,2}'s graph distances are not of negative type: at t = 0.2 Z_t is indefinite; the
    fallback's derivatives still agree with differences of its magnitude."""
    D = k32()
    t, h = 0.2, 1e-4
    space = MagnitudeSpace(D)
    with pytest.warns(dc.MagnitudeWarning, match="not positive definite"):
        mag, slope, second = space.magnitude_and_derivatives(t)
        values = [MagnitudeSpace(D).magnitude(t + k * h) for k in (-1, 0, 1)]
    assert slope == pytest.approx((values[2] - values[0]) / (2 * h), rel=1e-6)
    assert second == pytest.approx((values[2] - 2 * values[1] + values[0]) / h**2, rel=1e-4)


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "cityblock"])
@pytest.mark.parametrize("n", [150, 600])  # 600: conjugate gradients answer most scales
def test_agrees_with_the_adaptive_reference(metric, n):
    D = dc.pairwise_distances(clustered(n, 12, seed=n), metric)
    for target in (0.5, 0.95, 0.99):
        t_cut = dc.convergence_scale(D, target)
        reference = MagnitudeSpace(D).mag_area(t_cut, method="chebyshev", rtol=1e-10)
        assert dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_d2") == pytest.approx(
            reference, rel=1e-6)


def test_after_the_search_it_solves_nine_scales_where_its_estimate_suffices():
    """t_cut = t_conv: the search solved Mag and dMag/dt there, all the rule asks at t_cut; the
    9 other positive points of the 11 remain."""
    D = dc.pairwise_distances(clustered(200, 3, seed=0))
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(0.99)
    solved = solved_scales(space)
    area = space.mag_area(t_cut, method="hermite_d2")
    assert t_cut not in solved and len(solved) == 9
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    alone, error = _hermite_d2.hermite_d2(space.magnitude, space._known_derivatives, t_cut,
                                          math.inf, alpha)
    assert area == alone and error <= 1e-6 * area  # it stopped at 11 points
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-10), rel=1e-6)


def test_where_eleven_points_fall_short_the_next_stages_add_two_then_eight_scales():
    D = dc.pairwise_distances(clustered(200, 32, seed=2), "cosine")
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(0.5)
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    first = _hermite_d2.hermite_d2(space.magnitude, space._known_derivatives, t_cut, math.inf,
                                   alpha)
    fresh = MagnitudeSpace(D)
    fresh.convergence_scale(0.5)
    solved = solved_scales(fresh)
    rtol = 0.1 * first[1] / first[0]  # below the first stage's estimate
    area = fresh.mag_area(t_cut, method="hermite_d2", rtol=rtol)
    # a later stage, or past them (t_cut too, where the search did not solve it)
    assert len(solved - {t_cut}) in (9 + 2, 9 + 2 + 8, 9 + 2 + 8 + 20)
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-12), rel=rtol)
    grid = _chebyshev._log_stretch(_chebyshev._cc_nodes(0.0, 1.0, FINEST), t_cut, alpha)[0]
    if len(solved) < 20:
        assert all(np.isclose(grid, t, rtol=1e-14, atol=0).any() for t in solved)


def test_past_its_stages_clenshaw_curtis_and_bisection_meet_the_tolerance():
    D = dc.pairwise_distances(clustered(200, 32, seed=2), "cosine")
    t_cut = dc.convergence_scale(D, 0.99)
    area = dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_d2", rtol=1e-12)
    assert area == pytest.approx(MagnitudeSpace(D).mag_area(t_cut, rtol=1e-13), rel=1e-11)


@pytest.mark.parametrize("rtol", [1e-6, 1e-12])
def test_the_batch_integrates_every_member_as_its_own_space_does(rtol):
    """Members of 10 points (the stacked solver), of 80 and 120 (the looped one), solved stage
    by stage together: each member's derivatives and area are its single space's."""
    spaces = [dc.pairwise_distances(clustered(10, 384, seed=k), "cosine") for k in range(4)]
    spaces += [dc.pairwise_distances(clustered(n, 6, seed=n)) for n in (80, 120)]
    t_cut = float(np.median([dc.convergence_scale(D) for D in spaces]))
    mag, slope, second = _Batch(spaces).evaluate_derivatives(np.arange(6), np.full(6, t_cut))
    for k, D in enumerate(spaces):
        np.testing.assert_allclose((mag[k], slope[k], second[k]),
                                   MagnitudeSpace(D).magnitude_and_derivatives(t_cut),
                                   rtol=1e-10)
    batch = mag_areas(spaces, t_cut, method="hermite_d2", rtol=rtol)
    single = [dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_d2", rtol=rtol)
              for D in spaces]
    np.testing.assert_allclose(batch, single, rtol=max(rtol, 1e-10), atol=0)


def test_the_large_path_refuses_it_by_name():
    """Its weightings come from conjugate gradients on products formed on the fly: no factor
    gives the second derivative."""
    from diversity_core.magnitude import LargeMagnitudeSpace

    large = LargeMagnitudeSpace(clustered(300, 4, seed=1))
    with pytest.raises(ValueError, match="hermite_d2 .*use hermite_log"):
        large.mag_area(large.convergence_scale(), method="hermite_d2")


def test_the_torch_path_integrates_by_the_same_rule_in_nine_factorisations():
    pytest.importorskip("torch")
    from diversity_core.magnitude import TorchMagnitudeSpace

    D = dc.pairwise_distances(clustered(150, 5, seed=4))
    space = TorchMagnitudeSpace(D, device="cpu")
    t_cut = space.convergence_scale(0.99)
    area = space.mag_area(t_cut, method="hermite_d2")
    assert space.evaluations["mag_area"] == 9
    numpy_space = MagnitudeSpace(D, solver="direct")
    assert area == pytest.approx(numpy_space.mag_area(t_cut, method="hermite_d2"), rel=1e-10)
    np.testing.assert_allclose(TorchMagnitudeSpace(D, device="cpu").magnitude_and_derivatives(
        0.5 * t_cut), numpy_space.magnitude_and_derivatives(0.5 * t_cut), rtol=1e-10)


def test_the_torch_batch_gives_the_numpy_batchs_derivatives_and_areas():
    pytest.importorskip("torch")
    from diversity_core.magnitude import TorchMagnitudeBatch, torch_mag_areas

    spaces = [dc.pairwise_distances(clustered(n, 6, seed=n)) for n in (10, 10, 40)]
    spaces.append(k32())  # not positive definite below log √2: the host's fallback
    torch_batch = TorchMagnitudeBatch(spaces, device="cpu")
    members = np.arange(len(spaces))
    with pytest.warns(dc.MagnitudeWarning):
        np.testing.assert_allclose(
            torch_batch.evaluate_derivatives(members, np.full(4, 0.2)),
            _Batch(spaces).evaluate_derivatives(members, np.full(4, 0.2)), rtol=1e-10)
    positive = spaces[:3]
    t_cut = float(np.median([dc.convergence_scale(D) for D in positive]))
    np.testing.assert_allclose(torch_mag_areas(positive, t_cut, method="hermite_d2"),
                               mag_areas(positive, t_cut, method="hermite_d2"), rtol=1e-10)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_distances_whose_squares_overflow_are_refused_by_name(scale):
    """d²Mag/dt² grows as the squared distances and the rule multiplies it by t_cut²: beyond
    largest distances of 1e150 (or below 1e-150) one of them leaves float64's range, and the
    rule says so before any solve, on a space and in a batch, where hermite_log integrates."""
    D = dc.pairwise_distances(clustered(40, 3, seed=7)) * scale
    t_cut = dc.convergence_scale(D)
    with pytest.raises(ValueError, match="takes largest distances between 1e-150 and 1e.150.*"
                                         "use hermite_log"):
        dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_d2")
    with pytest.raises(ValueError, match="^member 1: .*use hermite_log"):
        mag_areas([D / scale, D], t_cut, method="hermite_d2")
    assert np.isfinite(dc.mag_area(MagnitudeSpace(D), t_cut, method="hermite_log"))


def areas_and_solves(D, t_cut: float, method: str, **options) -> tuple[float, int]:
    """MagArea on a fresh space after its convergence-scale search, and the scales it solved."""
    space = MagnitudeSpace(D, **options)
    space.convergence_scale(0.95)
    before = len(solved_scales(space))
    area = space.mag_area(t_cut, method=method)
    return area, len(solved_scales(space)) - before


@pytest.mark.parametrize("n, options, rule", [
    (150, {}, "hermite_d2"),  # a float64 Cholesky factor at every scale
    (150, {"precision": "mixed"}, "hermite_log"),  # Z⁻¹v would need a float64 factor more
    (600, {}, "hermite_log"),  # conjugate gradients: a second solve per scale
    (600, {"solver": "direct"}, "hermite_d2"),
])
def test_auto_takes_hermite_d2_where_a_float64_factor_answers_and_hermite_log_elsewhere(
        n, options, rule):
    D = dc.pairwise_distances(clustered(n, 5, seed=n))
    t_cut = MagnitudeSpace(D).convergence_scale(0.95)
    assert areas_and_solves(D, t_cut, "auto", **options) == areas_and_solves(D, t_cut, rule,
                                                                             **options)


def test_auto_in_a_batch_takes_each_members_rule():
    """The batch's members are factored in float64: hermite_d2, except for a member whose
    largest distance is beyond its range, which takes hermite_log."""
    spaces = [dc.pairwise_distances(clustered(n, 6, seed=n)) for n in (10, 30, 80)]
    spaces.append(spaces[1] * 1e-200)
    t_cut = np.array([dc.convergence_scale(D) for D in spaces])
    auto = mag_areas(spaces, t_cut, method="auto")
    np.testing.assert_array_equal(auto[:3], mag_areas(spaces[:3], t_cut[:3], method="hermite_d2"))
    assert auto[3] == mag_areas(spaces[3:], t_cut[3:], method="hermite_log")[0]


def test_auto_on_the_large_path_and_the_torch_path():
    from diversity_core.magnitude import LargeMagnitudeSpace

    def large_area(method: str) -> float:
        large = LargeMagnitudeSpace(clustered(300, 4, seed=1))
        return large.mag_area(large.convergence_scale(), method=method)

    assert large_area("auto") == large_area("hermite_log")
    pytest.importorskip("torch")
    from diversity_core.magnitude import TorchMagnitudeSpace

    D = dc.pairwise_distances(clustered(150, 5, seed=4))
    space = TorchMagnitudeSpace(D, device="cpu")
    area = space.mag_area(space.convergence_scale(0.99), method="auto")
    assert space.evaluations["mag_area"] == 9  # hermite_d2's first stage
    assert area == TorchMagnitudeSpace(D, device="cpu").mag_area(
        space.convergence_scale(0.99), method="hermite_d2")
