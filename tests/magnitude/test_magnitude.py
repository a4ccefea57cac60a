"""The magnitude engine against closed forms, axioms and its own slower paths."""

import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from point_clouds import equidistant, line
from rules import default_rule_solves
from scipy import integrate

import diversity_core as dc
from diversity_core import _threads
from diversity_core.magnitude import (
    MagnitudeWarning,
    _chebyshev,
    _common,
    _elementwise,
    _similarity,
    _solver,
)

ROOT = Path(__file__).resolve().parents[2]


def k32():
    """Leinster's complete bipartite graph K_{3,2}: not of negative type; Z_t singular at log √2."""
    D = np.full((5, 5), 2.0)
    D[:3, 3:] = D[3:, :3] = 1.0
    np.fill_diagonal(D, 0.0)
    return D


@pytest.fixture(scope="module")
def cloud():
    rng = np.random.default_rng(7)
    return dc.pairwise_distances(rng.normal(size=(120, 3)))


# -- closed forms --------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [0.3, 1.0, 4.0])
def test_two_points(d):
    ts = np.array([0.0, 0.1, 0.7, 2.0, 10.0])
    expected = 2.0 / (1.0 + np.exp(-ts * d))
    expected[0] = 1.0  # Mag(0) := 1 by definition (the formula gives 1 too)
    np.testing.assert_allclose(dc.magnitude_function(equidistant(2, d), ts), expected, rtol=1e-13)


@pytest.mark.parametrize("n", [3, 10, 50])
def test_equidistant_points(n):
    d = 0.8
    ts = np.array([0.05, 0.5, 3.0, 20.0])
    expected = n / (1.0 + (n - 1) * np.exp(-ts * d))
    np.testing.assert_allclose(dc.magnitude_function(equidistant(n, d), ts), expected, rtol=1e-12)


def test_subset_of_the_real_line():
    x = np.random.default_rng(0).normal(size=40)
    gaps = np.diff(np.sort(x))
    ts = np.array([0.1, 1.0, 5.0])
    expected = [1.0 + np.tanh(t * gaps / 2).sum() for t in ts]
    # Input order is irrelevant: x is not sorted.
    np.testing.assert_allclose(dc.magnitude_function(line(x), ts), expected, rtol=1e-10)


@pytest.mark.parametrize("n", [2, 7, 40])
def test_convergence_scale_closed_form(n):
    d = 1.5
    # n / (1 + (n-1) e^{-t d}) = 0.95 n  <=>  t = log(0.95 (n-1) / 0.05) / d
    expected = np.log(0.95 * (n - 1) / 0.05) / d
    assert dc.convergence_scale(equidistant(n, d)) == pytest.approx(expected, rel=1e-9)


def test_convergence_scale_other_target(cloud):
    t = dc.convergence_scale(cloud, target=0.5)
    assert dc.magnitude_function(cloud, t)[0] == pytest.approx(0.5 * len(cloud), rel=1e-9)


@pytest.mark.parametrize("method", ["chebyshev", "quad"])
def test_mag_area_closed_forms(method):
    n, d, T = 12, 0.7, 9.0
    # ∫_0^T n / (1 + (n-1) e^{-td}) dt = n (T + (log(1 + (n-1) e^{-Td}) - log n) / d)
    expected = n * (T + (np.log1p((n - 1) * np.exp(-T * d)) - np.log(n)) / d)
    assert dc.mag_area(equidistant(n, d), T, method=method) == pytest.approx(expected, rel=1e-9)
    x = np.random.default_rng(1).uniform(0, 3, size=25)
    gaps = np.diff(np.sort(x))
    # ∫_0^T 1 + Σ tanh(t a/2) dt = T + Σ (2/a) log cosh(T a/2)
    expected = T + np.sum(2.0 / gaps * np.log(np.cosh(T * gaps / 2)))
    assert dc.mag_area(line(x), T, method=method) == pytest.approx(expected, rel=1e-9)


def test_trapezoid_is_the_papers_grid(cloud):
    t_cut = 3.0
    ts = np.linspace(0, t_cut, 30)
    expected = np.trapezoid(dc.magnitude_function(cloud, ts), ts)
    assert dc.mag_area(cloud, t_cut, method="trapezoid", n_ts=30) == pytest.approx(expected,
                                                                                    rel=1e-14)


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "cityblock"])
def test_chebyshev_integral_meets_its_tolerance(metric):
    rng = np.random.default_rng(11)
    clusters = [rng.normal(size=(40, 8)) + 4 * rng.normal(size=8) for _ in range(4)]
    D = dc.pairwise_distances(np.vstack(clusters), metric)
    t_cut = dc.convergence_scale(D)
    # Independent reference: Gauss–Legendre of high order. Two orders agree to about 1e-10 only:
    # at small t, Z_t of 160 points in 8 dimensions is ill-conditioned (cosine: nearly rank 8),
    # which limits how accurately Mag(t) itself can be evaluated in double precision.
    def gauss(order):
        return integrate.fixed_quad(lambda t: dc.magnitude_function(D, t), 0, t_cut, n=order)[0]

    accurate = gauss(120)
    assert gauss(100) == pytest.approx(accurate, rel=1e-9)
    for rtol in (1e-4, 1e-6, 1e-8):
        area = dc.mag_area(D, t_cut, rtol=rtol)
        assert abs(area - accurate) <= max(rtol, 1e-9) * accurate


def test_integral_when_t_cut_lies_far_beyond_the_rise():
    """A common t_cut can be orders of magnitude beyond a space's own convergence scale: the
    sharp rise near 0 needs finer panels than the flat remainder (adaptive bisection)."""
    x = np.random.default_rng(12).uniform(0, 1, size=30)
    gaps = np.diff(np.sort(x))
    t_conv = dc.convergence_scale(line(x))
    for T in (30 * t_conv, 3000 * t_conv):
        y = T * gaps / 2  # log cosh y = y + log1p(e^{-2y}) - log 2, without overflow
        expected = T + np.sum(2.0 / gaps * (y + np.log1p(np.exp(-2 * y)) - np.log(2)))
        assert dc.mag_area(line(x), T) == pytest.approx(expected, rel=1e-6)  # the default
        assert dc.mag_area(line(x), T, rtol=1e-8) == pytest.approx(expected, rel=1e-9)


# -- axioms and invariances ------------------------------------------------------------------------

def test_axioms_on_a_euclidean_cloud(cloud):
    n = len(cloud)
    ts = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 60)])
    mag = dc.magnitude_function(cloud, ts)
    assert mag[0] == 1.0
    assert np.all(np.diff(mag) >= -1e-9 * n)  # non-decreasing
    assert np.all(mag <= n + 1e-9) and np.all(mag >= 1.0 - 1e-9)
    assert mag[-1] == pytest.approx(n, rel=1e-6)  # -> cardinality


def test_permutation_invariance(cloud):
    perm = np.random.default_rng(3).permutation(len(cloud))
    ts = [0.3, 2.0, 9.0]
    np.testing.assert_allclose(dc.magnitude_function(cloud[np.ix_(perm, perm)], ts),
                               dc.magnitude_function(cloud, ts), rtol=1e-11)
    w = dc.magnitude_weights(cloud, 2.0)
    np.testing.assert_allclose(dc.magnitude_weights(cloud[np.ix_(perm, perm)], 2.0), w[perm],
                               rtol=1e-9, atol=1e-12)


def test_twin_property_keeps_input_order():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2))
    copies = [3, 3, 17, 0]  # point 3 twice more (three copies in all), 17 and 0 once more
    Xd = np.vstack([X, X[copies]])
    D, Dd = dc.pairwise_distances(X), dc.pairwise_distances(Xd)
    ts = [0.5, 4.0]
    np.testing.assert_allclose(dc.magnitude_function(Dd, ts), dc.magnitude_function(D, ts),
                               rtol=1e-12)
    w, wd = dc.magnitude_weights(D, 4.0), dc.magnitude_weights(Dd, 4.0)
    # Z w = 1 holds for the full matrix, duplicates included, and the total weight is unchanged.
    np.testing.assert_allclose(np.exp(-4.0 * Dd) @ wd, 1.0, atol=1e-10)
    assert wd.sum() == pytest.approx(w.sum(), rel=1e-12)
    # Weights stay in input order: the three copies of point 3 carry a third of its weight each.
    np.testing.assert_allclose(wd[[3, 30, 31]], w[3] / 3, rtol=1e-10)
    others = np.setdiff1d(np.arange(30), [0, 3, 17])
    np.testing.assert_allclose(wd[others], w[others], rtol=1e-10)


def test_weights_sum_to_magnitude_and_derivative_matches_finite_differences(cloud):
    t, h = 1.7, 1e-5
    assert dc.magnitude_weights(cloud, t).sum() == pytest.approx(
        dc.magnitude_function(cloud, t)[0], rel=1e-12)
    fd = (dc.magnitude_function(cloud, t + h)[0] - dc.magnitude_function(cloud, t - h)[0]) / (2 * h)
    assert dc.magnitude_derivative(cloud, t)[0] == pytest.approx(fd, rel=1e-6)


# -- MagDiff and scale conventions -------------------------------------------------------------

def test_mag_diff_conventions(cloud):
    small = cloud[:60, :60]
    t_cut = dc.reference_based_t_cut(cloud)
    assert t_cut == dc.convergence_scale(cloud)
    a_ref, a_x = dc.mag_area(cloud, t_cut), dc.mag_area(small, t_cut)
    diff = dc.mag_diff(small, cloud, t_cut)
    assert diff == pytest.approx(a_x - a_ref, rel=1e-12)
    assert diff < 0  # a subset is less diverse
    assert dc.mag_diff(small, cloud, t_cut, normalise="t_cut") == pytest.approx(diff / t_cut)
    assert dc.mag_diff(small, cloud, t_cut, normalise="reference_area") == pytest.approx(
        diff / a_ref)
    assert dc.mag_diff(small, cloud, t_cut, absolute=True) == pytest.approx(-diff)
    assert dc.mag_diff(small, cloud, t_cut, reference_area=a_ref) == diff
    assert dc.mag_diff(cloud, cloud, t_cut) == 0.0


def test_reference_free_t_cut_is_the_median():
    spaces = [equidistant(n, 1.0) for n in (3, 5, 9)]
    scales = [dc.convergence_scale(D) for D in spaces]
    assert dc.reference_free_t_cut(spaces) == pytest.approx(np.median(scales))


# -- non-negative-type spaces ------------------------------------------------------------------

def test_indefinite_similarity_warns_and_is_exact():
    D = k32()
    t = 0.2  # Z_t is indefinite below log √2
    assert np.linalg.eigvalsh(np.exp(-t * D)).min() < 0
    with pytest.warns(MagnitudeWarning, match="not positive definite"):
        mag = dc.magnitude_function(D, t)[0]
    assert mag == pytest.approx(np.linalg.solve(np.exp(-t * D), np.ones(5)).sum(), rel=1e-12)


def test_singular_similarity_warns():
    with pytest.warns(MagnitudeWarning, match="singular"):
        dc.magnitude_function(k32(), np.log(np.sqrt(2.0)))


def test_positive_definite_spaces_do_not_warn(cloud):
    with warnings.catch_warnings():
        warnings.simplefilter("error", MagnitudeWarning)
        dc.magnitude_function(cloud, [0.01, 1.0, 100.0])


# -- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("D", "message"),
    [
        (np.array([[0.0, np.nan], [np.nan, 0.0]]), "NaN"),
        (np.array([[0.0, np.inf], [np.inf, 0.0]]), "inf"),
        (np.zeros((0, 0)), "empty"),
        (np.zeros((2, 3)), "square"),
        (np.array([[0.0, 1.0], [2.0, 0.0]]), "symmetric"),
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), "negative"),
        (np.array([[1.0, 1.0], [1.0, 0.0]]), "diagonal"),
        (np.array([["a", "b"], ["c", "d"]]), "numeric"),
    ],
)
def test_bad_distance_matrices(D, message):
    with pytest.raises(ValueError, match=message):
        dc.magnitude_function(D, [1.0])


def test_bad_scales(cloud):
    with pytest.raises(ValueError, match="negative scales"):
        dc.magnitude_function(cloud, [1.0, -0.5])
    with pytest.raises(ValueError, match="non-finite"):
        dc.mag_area(cloud, np.nan)
    with pytest.raises(ValueError, match="method"):
        dc.mag_area(cloud, 1.0, method="simpson")
    with pytest.raises(ValueError, match="target"):
        dc.convergence_scale(cloud, target=1.0)
    with pytest.raises(ValueError, match="normalise"):
        dc.mag_diff(cloud, cloud, 1.0, normalise="mean")


def test_convergence_scale_counts_distinct_points():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(40, 2))
    with_copies = np.vstack([X, X[:10]])  # 25% duplicates: 0.95 · 50 would be out of reach
    t = dc.convergence_scale(dc.pairwise_distances(with_copies))
    assert t == pytest.approx(dc.convergence_scale(dc.pairwise_distances(X)), rel=1e-12)
    with pytest.raises(ValueError, match="single distinct point"):
        dc.convergence_scale(dc.pairwise_distances(np.ones((5, 3))))


def test_pairwise_distances():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 4))
    D = dc.pairwise_distances(X)
    np.testing.assert_allclose(D, np.linalg.norm(X[:, None] - X[None], axis=-1), atol=1e-12)
    assert np.array_equal(D, D.T) and np.all(np.diag(D) == 0)
    C = dc.pairwise_distances(X, "cosine")
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(C, np.clip(1 - U @ U.T, 0, None), atol=1e-12)
    L1 = dc.pairwise_distances(X, "cityblock")
    np.testing.assert_allclose(L1, np.abs(X[:, None] - X[None]).sum(-1), atol=1e-12)
    with pytest.raises(ValueError, match="zero vector"):
        dc.pairwise_distances(np.vstack([X, np.zeros(4)]), "cosine")
    with pytest.raises(ValueError, match="mismatched dimensions"):
        dc.pairwise_distances(X, Y=np.ones((3, 5)))
    with pytest.raises(ValueError, match="unknown metric"):
        dc.pairwise_distances(X, "chebyshev")
    with pytest.raises(ValueError, match="2-D"):
        dc.pairwise_distances(np.ones(5))


@pytest.mark.parametrize("metric", ["euclidean", "cityblock"])
def test_exact_self_distances_are_cdist_bit_for_bit(metric, monkeypatch):
    """Each pair once and mirrored (pdist, squareform) gives cdist(X, X)'s bits, for sets of
    the model experiment's shape, with duplicates, and above the condensed form's size limit."""
    from scipy.spatial.distance import cdist

    from diversity_core.measures import distances

    rng = np.random.default_rng(8)
    for X in (rng.normal(size=(300, 384)) * 3.7, rng.uniform(size=(57, 5)),
              np.vstack([rng.normal(size=(30, 12))] * 2)):
        D = dc.pairwise_distances(X, metric)
        assert np.array_equal(D, cdist(X, X, metric=metric))
        assert np.array_equal(D, D.T) and np.all(np.diag(D) == 0)
    monkeypatch.setattr(distances, "_CONDENSED_MAX_POINTS", 50)
    assert np.array_equal(dc.pairwise_distances(X, metric), D)  # 60 points: cdist itself


@pytest.mark.parametrize("metric", ["euclidean", "cityblock"])
def test_exact_distances_split_over_threads_keep_every_bit(metric, monkeypatch):
    """From _THREADED_FROM_POINTS points on, the exact distances are cdist's row blocks over the
    allowed threads (here lowered: 301 points in blocks of 16 over 3 shares, the last block
    short): pdist's and cdist's bits, with duplicates, beyond float64's squares, against Y."""
    from scipy.spatial.distance import cdist, pdist, squareform

    from diversity_core.measures import distances

    rng = np.random.default_rng(11)
    X = rng.normal(size=(301, 7)) * 2.3
    X[40] = X[3]
    Y = rng.normal(size=(45, 7))
    square = squareform(pdist(X, metric))
    expected = {"self": square, "huge": square * 2.0**400, "Y": cdist(X, Y, metric)}
    blocks = []

    def counted(A, B, metric):
        blocks.append(len(A))
        return cdist(A, B, metric=metric)

    monkeypatch.setattr(distances, "cdist", counted)
    monkeypatch.setattr(distances, "_THREADED_FROM_POINTS", 100)
    monkeypatch.setattr(distances, "_BLOCK_ROWS", 16)
    monkeypatch.setattr(distances, "allowed_threads", lambda: 3)
    got = {"self": dc.pairwise_distances(X, metric),
           "huge": dc.pairwise_distances(X * 2.0**400, metric),
           "Y": dc.pairwise_distances(X, metric, Y=Y)}
    for name, D in got.items():
        assert np.array_equal(D, expected[name]), name
    assert np.array_equal(got["self"], got["self"].T) and got["self"][40, 3] == 0
    # Each call's 19 blocks (the last one short) went through cdist, in whichever order.
    assert sorted(blocks) == sorted([16] * 18 * 3 + [13] * 3), blocks
    monkeypatch.setattr(distances, "allowed_threads", lambda: 1)  # one thread: pdist, as before
    blocks.clear()
    assert np.array_equal(dc.pairwise_distances(X, metric), expected["self"]) and not blocks


# -- MagnitudeSpace: shared work and the mixed-precision solver ---------------------------------

def test_space_reuses_evaluations(cloud):
    space = dc.MagnitudeSpace(cloud)
    t_conv = space.convergence_scale()
    searched = set(space._cache)
    area = space.mag_area(t_conv)
    assert area == pytest.approx(dc.mag_area(cloud, t_conv), rel=1e-13)
    # The default rule's points end at 0 (Mag = 1) and t_conv (the search's answer, solved
    # once): besides it, only the interior scales of its stages were evaluated.
    assert t_conv in space._cache
    assert len(set(space._cache) - searched - {t_conv}) in default_rule_solves(
        factored=space._solver.factors_in_float64)
    cc25 = dc.MagnitudeSpace(cloud)
    cc25.convergence_scale()
    searched = set(cc25._cache)
    cc25.mag_area(t_conv, method="cc25")
    # The Chebyshev grid of N + 1 scales likewise: its N - 1 interior scales.
    assert len(set(cc25._cache) - searched - {t_conv}) in {
        level - 1 for level in _chebyshev._CC_LEVELS}


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "cityblock"])
def test_mixed_precision_agrees_with_double(metric):
    rng = np.random.default_rng(8)
    D = dc.pairwise_distances(rng.normal(size=(150, 6)), metric)
    t_conv = dc.MagnitudeSpace(D, precision="double").convergence_scale()
    # From tiny scales (Z nearly all ones: float32 cannot factorise it, float64 takes over) to
    # well past the convergence scale.
    ts = np.concatenate([[1e-4 * t_conv], np.linspace(0.01, 2.0, 12) * t_conv])
    mixed = dc.MagnitudeSpace(D, precision="mixed")
    double = dc.MagnitudeSpace(D, precision="double")
    np.testing.assert_allclose(mixed.magnitude_function(ts), double.magnitude_function(ts),
                               rtol=1e-10)
    np.testing.assert_allclose(mixed.weights(t_conv), double.weights(t_conv), rtol=1e-8,
                               atol=1e-12)
    assert mixed.convergence_scale() == pytest.approx(t_conv, rel=1e-9)


def test_mixed_precision_falls_back_on_ill_conditioned_scales():
    rng = np.random.default_rng(9)
    space = dc.MagnitudeSpace(dc.pairwise_distances(rng.normal(size=(200, 2))), precision="mixed")
    assert space._solver._solve_mixed(1e-5) is None  # cond(Z) far beyond float32
    assert space._solver._solve_mixed(50.0) is not None
    with pytest.raises(ValueError, match="precision"):
        dc.MagnitudeSpace(np.zeros((2, 2)), precision="half")


def test_conjugate_gradients_agree_with_cholesky(monkeypatch):
    """The iterative path (used from CG_MIN_POINTS points on) against the direct one."""

    monkeypatch.setattr(_solver, "_CG_MIN_POINTS", 100)
    rng = np.random.default_rng(10)
    X = np.vstack([rng.normal(size=(60, 5)) + 3 * rng.normal(size=5) for _ in range(5)])
    D = dc.pairwise_distances(X)
    iterative = dc.MagnitudeSpace(D)
    direct = dc.MagnitudeSpace(D, solver="direct")
    t_conv = direct.convergence_scale()
    assert iterative.convergence_scale() == pytest.approx(t_conv, rel=1e-9)
    assert iterative.mag_area(t_conv) == pytest.approx(direct.mag_area(t_conv), rel=1e-9)
    assert iterative._solver._cg_last is not None  # CG did solve the scales
    np.testing.assert_allclose(iterative.weights(t_conv), direct.weights(t_conv), rtol=1e-7,
                               atol=1e-10)
    with pytest.raises(ValueError, match="solver"):
        dc.MagnitudeSpace(D, solver="lanczos")


@pytest.mark.parametrize("float32_from", [100, 10**9])
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_conjugate_gradients_reach_float64_accuracy(monkeypatch, metric, float32_from):
    """float32 CG inside float64 refinement (spaces of FLOAT32_CG_FROM points or more) and
    float64 CG (smaller ones): the weighting solves Z w = 1 to _CG_RTOL, and magnitude (its
    variational estimate 1ᵀw + rᵀw) agrees with the Cholesky path at every scale CG accepts."""
    monkeypatch.setattr(_solver, "_CG_MIN_POINTS", 100)
    monkeypatch.setattr(_solver, "FLOAT32_CG_FROM", float32_from)
    rng = np.random.default_rng(11)
    D = dc.pairwise_distances(rng.normal(size=(300, 8)) + 0.3, metric)
    space = dc.MagnitudeSpace(D)
    t_conv = dc.MagnitudeSpace(D, solver="direct").convergence_scale()
    for t in (2.0 * t_conv, t_conv, 0.5 * t_conv):
        solution = space._solver._solve_cg(t)
        assert solution is not None
        w, residual, _ = solution
        np.testing.assert_allclose(residual, 1.0 - np.exp(-t * D) @ w, atol=1e-12)
        assert np.linalg.norm(residual) <= _solver._CG_RTOL * np.sqrt(len(D)) * 10
        expected = dc.magnitude_function(dc.MagnitudeSpace(D, solver="direct"), t)[0]
        assert w.sum() == pytest.approx(expected, rel=1e-8)
        assert space.magnitude(t) == pytest.approx(expected, rel=1e-12)


def test_float64_conjugate_gradients_take_over_where_float32_cannot_help(monkeypatch):
    """At small t, Z_t is too ill-conditioned for float32 refinement, which gives up and marks
    the scale; float64 CG still converges there, within its budget."""
    monkeypatch.setattr(_solver, "_CG_MIN_POINTS", 100)
    monkeypatch.setattr(_solver, "FLOAT32_CG_FROM", 100)
    rng = np.random.default_rng(12)
    D = dc.pairwise_distances(rng.normal(size=(600, 8)))
    t = 0.1 * dc.MagnitudeSpace(D, solver="direct").convergence_scale()
    solver = dc.MagnitudeSpace(D)._solver
    assert solver._solve_cg_mixed(t) is None
    w, residual, _ = solver._solve_cg(t)
    assert solver._cg32_floor == t and solver._cg_floor == 0.0
    exact = np.linalg.solve(np.exp(-t * D), np.ones(len(D)))
    assert w.sum() + residual @ w == pytest.approx(exact.sum(), rel=1e-11)


def test_conjugate_gradients_give_up_where_neither_precision_can(monkeypatch):
    """At tiny t, Z_t is too ill-conditioned for CG of either precision: it returns None within
    its budget, marks the scale, and magnitude comes from the Cholesky factorisation instead."""
    monkeypatch.setattr(_solver, "_CG_MIN_POINTS", 100)
    rng = np.random.default_rng(12)
    D = dc.pairwise_distances(rng.normal(size=(200, 3)))
    space = dc.MagnitudeSpace(D)
    assert space._solver._solve_cg(1e-3) is None
    assert space._solver._cg_floor == 1e-3
    assert space._solver._solve_cg(1e-4) is None  # below the floor: not even tried
    exact = dc.magnitude_function(dc.MagnitudeSpace(D, solver="direct"), 1e-3)[0]
    assert space.magnitude(1e-3) == exact


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("threads", [1, 3, 8])
def test_similarity_fill_matches_numpy(full, threads, monkeypatch):
    """The blocked, threaded exp(-tD) fills the upper triangle (everything if ``full``) and its
    float32 copy exactly as the elementwise exponential over the whole matrix at once (row
    blocks change nothing: 3 rows, or 12 from _MANY_THREADS threads on), tiny entries clamped
    as documented."""
    monkeypatch.setattr(_elementwise, "_BLOCK_ENTRIES", 3 * 157)
    assert _elementwise._block_rows(157, threads) == (12 if threads >= 8 else 3)
    rng = np.random.default_rng(13)
    D = dc.pairwise_distances(rng.normal(size=(157, 4)))  # blocks do not divide n
    t = 400.0 / D.max()  # far enough that some entries fall below exp(-345)
    Z = np.full(D.shape, np.nan)
    Z32 = np.full(D.shape, np.nan, dtype=np.float32)
    _elementwise._fill_similarity(D, t, Z, Z32, fill64=True, full=full, clamp=True, threads=threads)
    expected = np.maximum(D * -t, -_common.EXPONENT_FLOOR)
    _elementwise._exp_inplace(expected)
    np.testing.assert_allclose(expected, np.exp(-t * np.minimum(D, _common.EXPONENT_FLOOR / t)),
                               rtol=1e-15, atol=0)
    upper = np.triu_indices(len(D))
    np.testing.assert_array_equal(Z[upper], expected[upper])
    expected32 = np.where(expected >= _common.FLOAT32_FLOOR, expected, 0.0).astype(np.float32)
    np.testing.assert_array_equal(Z32[upper], expected32[upper])
    lower = np.tril_indices(len(D), -1)
    if full:
        np.testing.assert_array_equal(Z[lower], expected[lower])
    else:
        assert np.isnan(Z[lower]).any()  # the scratch triangle was left alone (mostly)


# The compiled kernels (diversity_core/magnitude/_kernels.c) are built on x86-64 Linux; a build
# that failed silently there would leave the library on NumPy's slower exp without a word.
_LINUX_X86 = sys.platform.startswith("linux") and platform.machine() == "x86_64"


@pytest.mark.skipif(not _LINUX_X86, reason="the compiled exponential is built on x86-64 Linux")
def test_compiled_exponential_is_built_and_close_to_numpy():
    """exp through libmvec: within 4 units in the last place of NumPy's (glibc's scalar or
    NumPy's AVX-512 routine) over the whole range exp(-tD) takes, the same zeros where the
    result underflows, and ±0 → 1."""
    from diversity_core.magnitude import _kernels

    assert dc.magnitude.EXPONENTIAL in ("libmvec-avx2", "glibc-scalar")
    rng = np.random.default_rng(21)
    x = np.concatenate([-rng.uniform(0, 40, 100_000), -rng.uniform(40, 760, 100_000),
                        [0.0, -0.0, -345.0, -708.4, -745.2, -746.0, -1e4, 1e-300, 2.5]])
    got = x.copy()
    _kernels.exp_inplace(got)
    expected = np.exp(x)
    assert np.array_equal(got == 0, expected == 0)
    normal = expected >= np.finfo(float).tiny
    np.testing.assert_allclose(got[normal], expected[normal], rtol=4 * np.finfo(float).eps,
                               atol=0)
    subnormal = ~normal & (expected > 0)
    assert subnormal.any()
    np.testing.assert_allclose(got[subnormal], expected[subnormal], rtol=0, atol=4 * 5e-324)
    assert got[-9] == got[-8] == 1.0


@pytest.mark.skipif(not _LINUX_X86, reason="the compiled exponential is built on x86-64 Linux")
def test_compiled_exponential_depends_on_the_value_only():
    """An entry's bits do not depend on where it sits (the last n mod 4 entries are padded to a
    full register), on the array's strides, or on how it was cut into calls; wrong buffers are
    refused."""
    from diversity_core.magnitude import _kernels

    x = -np.random.default_rng(22).uniform(0, 60, 1_003)
    whole = x.copy()
    _kernels.exp_inplace(whole)
    for offset in range(1, 5):
        part = x[offset:].copy()
        _kernels.exp_inplace(part)
        np.testing.assert_array_equal(part, whole[offset:])
    strided = np.repeat(x, 2)[::2]  # a view with stride 16 bytes
    _elementwise._exp_inplace(strided)
    np.testing.assert_array_equal(strided, whole)
    with pytest.raises(TypeError, match="float64"):
        _kernels.exp_inplace(np.zeros(4, dtype=np.float32))
    with pytest.raises((BufferError, ValueError, TypeError)):
        _kernels.exp_inplace(np.zeros((4, 4))[:, 0])  # not contiguous


@pytest.mark.skipif(not _LINUX_X86, reason="the compiled kernels are built on x86-64 Linux")
@pytest.mark.parametrize("clamp", [False, True])
def test_compiled_scaled_exponential_has_the_bits_of_numpys_passes(clamp):
    """exp(max(-tD, floor)) in one pass gives the bits of NumPy's product and floor followed by
    the compiled exponential, for row blocks of a larger matrix written into another one's
    (strided rows, every width mod 4, exponents beyond the floor); wrong arrays are refused."""
    from diversity_core.magnitude import _kernels
    from diversity_core.magnitude._common import EXPONENT_FLOOR

    rng = np.random.default_rng(25)
    D = rng.uniform(0, 3, (40, 40))
    t = 150.0  # t·D up to 450: beyond the floor of 345
    floor = -EXPONENT_FLOOR if clamp else -np.inf
    for start in range(0, 9):
        block = (slice(start, start + 5), slice(start, None))
        expected = np.multiply(D[block], -t)
        if clamp:
            np.maximum(expected, -EXPONENT_FLOOR, out=expected)
        _kernels.exp_inplace(expected)
        out = np.full_like(D, np.nan)
        _kernels.exp_scaled(D[block], -t, floor, out[block])
        np.testing.assert_array_equal(out[block], expected)
        assert np.isnan(out[:start]).all() and np.isnan(out[start:start + 5, :start]).all()
    assert clamp == (out[block].min() > 1e-160)  # exp(-345) = 1.4e-150; exp(-450) = 5.8e-196
    with pytest.raises(ValueError, match="one shape"):
        _kernels.exp_scaled(D[:4], -t, floor, np.empty((4, 39)))
    with pytest.raises(ValueError, match="contiguous"):
        _kernels.exp_scaled(D[:, ::2], -t, floor, np.empty((40, 20)))
    with pytest.raises(TypeError, match="float64"):
        _kernels.exp_scaled(D.astype(np.float32), -t, floor, np.empty((40, 40)))


@pytest.mark.skipif(not _LINUX_X86, reason="the compiled kernels are built on x86-64 Linux")
def test_compiled_weighted_row_sums():
    """Row sums of Z ∘ D ∘ w over the strict upper (lower) triangle: those of NumPy to round-off,
    the same bits whatever rows a call is given; wrong buffers are refused."""
    from diversity_core.magnitude import _kernels

    rng = np.random.default_rng(26)
    n = 23
    Z, D, w = rng.uniform(size=(n, n)), rng.uniform(size=(n, n)), rng.normal(size=n)
    products = Z * D * w
    for upper, triangle in ((True, np.triu(products, 1)), (False, np.tril(products, -1))):
        whole = np.full(n, np.nan)
        _kernels.weighted_row_sums(Z, D, w, whole, upper, 0, n)
        np.testing.assert_allclose(whole, triangle.sum(axis=1), rtol=1e-14, atol=1e-15)
        parts = np.full(n, np.nan)
        for first, last in ((0, 7), (7, 8), (8, n)):
            _kernels.weighted_row_sums(Z, D, w, parts, upper, first, last)
        np.testing.assert_array_equal(parts, whole)
    with pytest.raises(ValueError, match="n x n"):
        _kernels.weighted_row_sums(Z[:, :5].copy(), D, w, whole, True, 0, n)
    with pytest.raises(ValueError, match="n entries"):
        _kernels.weighted_row_sums(Z, D, w, whole[:5].copy(), True, 0, n)
    with pytest.raises(ValueError, match="within"):
        _kernels.weighted_row_sums(Z, D, w, whole, True, 3, n + 1)


@pytest.mark.skipif(not _LINUX_X86, reason="the compiled kernels are built on x86-64 Linux")
def test_the_kernels_scalar_routines_pass_the_kernels_tests():
    """The routines a CPU without AVX2 runs, which DIVERSITY_CORE_SCALAR_KERNELS=1 selects on
    any CPU: the compiled kernels' own tests pass in a process that loads them so."""
    env = {**os.environ, "DIVERSITY_CORE_SCALAR_KERNELS": "1"}
    which = subprocess.run([sys.executable, "-c", "import diversity_core.magnitude as m; "
                            "print(m.EXPONENTIAL)"], env=env, capture_output=True, text=True,
                           check=True)
    assert which.stdout.strip() == "glibc-scalar"
    tests = [f"tests/magnitude/test_magnitude.py::{name}" for name in (
        "test_compiled_exponential_is_built_and_close_to_numpy",
        "test_compiled_exponential_depends_on_the_value_only",
        "test_compiled_scaled_exponential_has_the_bits_of_numpys_passes",
        "test_compiled_weighted_row_sums")] + [
        f"tests/magnitude/test_magnitude_large.py::{name}" for name in (
            "test_products_on_the_fly_are_those_of_the_stored_distances",
            "test_compiled_panel_products_refuse_what_they_cannot_read")]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p",
                          "no:cacheprovider", *tests], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "skipped" not in run.stdout and " passed" in run.stdout, run.stdout[-2000:]


@pytest.mark.parametrize(("n", "t", "keep_similarity"), [(80, 0.8, True), (700, 4.0, False)])
def test_weighted_distance_form_routes_agree(n, t, keep_similarity, monkeypatch):
    """dMag/dt's form wᵀ (D ∘ Z_t) w from the buffer's upper triangle (conjugate gradients
    answered, 700 points) or its strict lower one (a factorisation kept Z_t, 80 points), by
    the compiled kernel and by NumPy's row blocks: the same value to round-off, and that of
    the full product."""
    D = dc.pairwise_distances(np.random.default_rng(27).normal(size=(n, 3)))
    solver = _solver._DenseSolver(D, precision="double", solver="auto")
    w = solver.weights(t, keep_similarity=keep_similarity)
    assert t == (solver.buffer.lower_scale if keep_similarity else solver.buffer.scale)
    compiled = solver.weighted_distance_form(t, w)
    monkeypatch.setattr(_solver, "_weighted_row_sums", None)
    numpy_route = solver.weighted_distance_form(t, w)
    full = float(w @ ((D * np.exp(-t * D)) @ w))
    assert compiled == pytest.approx(numpy_route, rel=1e-13)
    assert compiled == pytest.approx(full, rel=1e-13)


def test_magnitude_with_numpy_exponential_agrees(monkeypatch):
    """Where the compiled exponential is absent, NumPy's exp answers: the same convergence
    scale and MagArea to far below their tolerances (MagArea to 1e-7, the solves' share of its
    1e-6; 600 points: conjugate gradients and
    MagArea's paired scales; 40 × 12 points: the batch's stacks)."""
    X = np.random.default_rng(23).normal(size=(600, 5))
    D = dc.pairwise_distances(X)
    sets = [dc.pairwise_distances(x) for x in np.random.default_rng(24).normal(size=(40, 12, 3))]

    def scores():
        dc.magnitude.clear_cache()
        t = dc.convergence_scale(D)
        return t, dc.mag_area(D, t), dc.magnitude.mag_areas(sets, 3.0)

    t_fast, area_fast, areas_fast = scores()
    for name in ("_vexp_inplace", "_exp_scaled"):
        monkeypatch.setattr(_elementwise, name, None)
    monkeypatch.setattr(_solver, "_weighted_row_sums", None)
    t_numpy, area_numpy, areas_numpy = scores()
    assert t_numpy == pytest.approx(t_fast, rel=1e-12)
    assert area_numpy == pytest.approx(area_fast, rel=1e-7)
    np.testing.assert_allclose(areas_numpy, areas_fast, rtol=1e-12)


def _paired_scales_spy(monkeypatch):
    """Records, for every similarity matrix asked for, whether an announced pair formed it and
    how many smaller partners were waiting."""
    calls = []
    original = _similarity.SimilarityBuffer._paired

    def spy(self, t):
        paired = original(self, t)
        calls.append((paired, len(self._stash)))
        return paired

    monkeypatch.setattr(_similarity.SimilarityBuffer, "_paired", spy)
    return calls


def _unpaired_area(D, t_cut, monkeypatch, **options):
    with monkeypatch.context() as m:
        m.setattr(_similarity, "_PAIR_MIN_POINTS", 10**9)
        return dc.mag_area(dc.MagnitudeSpace(D), t_cut, **options)


@pytest.mark.parametrize("n", [80, 157, 600])  # Cholesky (odd and even n), conjugate gradients
def test_mag_area_forms_the_larger_of_paired_scales_by_division(n, monkeypatch):
    """MagArea's Chebyshev nodes t, T - t: the larger formed as exp(-TD) / exp(-(T - t)D), the
    smaller kept for its turn, T/2 as sqrt(exp(-TD)): all 23 new matrices of a 25-scale
    integral from its pairs. The integral is the one of exponentials alone, to round-off
    (Cholesky) or to the tolerance of conjugate gradients."""
    rng = np.random.default_rng(n)
    D = dc.pairwise_distances(rng.normal(size=(n, 5)))
    t_cut = dc.convergence_scale(D)
    expected = _unpaired_area(D, t_cut, monkeypatch, method="chebyshev")
    calls = _paired_scales_spy(monkeypatch)
    space = dc.MagnitudeSpace(D)
    area = dc.mag_area(space, t_cut, method="chebyshev")
    assert sum(paired for paired, _ in calls) >= 23
    assert area == pytest.approx(expected, rel=1e-13 if n < _solver._CG_MIN_POINTS else 1e-10)
    solver = space._solver
    assert solver.buffer._E_total is None and not solver.buffer._stash \
        and not solver.buffer._spare  # freed


def test_paired_order_forms_each_pair_together():
    """Each level's pairs j, N - j one after the other, from the middle outwards: the smaller
    scales still descend (CG's floor), and no smaller partner waits for its turn."""
    assert _chebyshev._paired_order(list(range(12, -1, -1)), 12) == \
        [12, 6, 7, 5, 8, 4, 9, 3, 10, 2, 11, 1, 0]
    assert _chebyshev._paired_order(list(range(23, 0, -2)), 24) == \
        [13, 11, 15, 9, 17, 7, 19, 5, 21, 3, 23, 1]


def test_paired_scales_asked_out_of_order_take_exponentials(monkeypatch):
    """One smaller partner waits at a time: where another pair's larger scale comes first, it
    and its partner are formed by exponentials. Every matrix is exp(-tD) to round-off."""
    D = dc.pairwise_distances(np.random.default_rng(5).normal(size=(90, 3)))
    solver = dc.MagnitudeSpace(D)._solver
    T = 2.0
    solver.buffer.similarity(T)  # exp(-TD) is then copied, not formed again
    solver.buffer.announce_pairs([(1.5, T - 1.5), (1.2, T - 1.2)], T, T / 2)
    calls = _paired_scales_spy(monkeypatch)
    upper = np.triu_indices(len(D))
    for t in (1.5, 1.2, T / 2, T - 1.2, T - 1.5):
        np.testing.assert_allclose(solver.buffer.similarity(t)[upper], np.exp(-t * D)[upper],
                                   rtol=2e-15)
    assert [paired for paired, _ in calls] == [True, False, True, False, True]
    solver.buffer.announce_pairs([], None, None)
    assert solver.buffer._E_total is None and not solver.buffer._stash \
        and not solver.buffer._spare


def test_quarter_of_the_paired_total_takes_square_roots(monkeypatch):
    """The first level's smaller partner T/4 is sqrt(sqrt(exp(-TD))) and its partner 3T/4 the
    quotient: no exponentials for either, both exp(-tD) to round-off."""
    D = dc.pairwise_distances(np.random.default_rng(6).normal(size=(90, 3)))
    solver = dc.MagnitudeSpace(D)._solver
    T = 2.0
    solver.buffer.similarity(T)
    solver.buffer.announce_pairs([(0.75 * T, 0.25 * T)], T, None)
    scales = []
    original = _elementwise._exponentials
    monkeypatch.setattr(_elementwise, "_exponentials",
                        lambda D, t, out, **k: (scales.append(t), original(D, t, out, **k)))
    upper = np.triu_indices(len(D))
    for t in (0.75 * T, 0.25 * T):
        np.testing.assert_allclose(solver.buffer.similarity(t)[upper], np.exp(-t * D)[upper],
                                   rtol=4e-15)
    assert scales == []
    solver.buffer.announce_pairs([], None, None)


@pytest.mark.parametrize("shift", [1e-7, -3e-6, 5e-4])
def test_similarity_at_a_nearby_scale_is_shifted_not_formed_again(shift, monkeypatch):
    """exp(-tD) from the buffer's exp(-sD) where |t - s|·max(D) <= 2^-12 (the convergence
    scale's last Newton step): no exponentials, and exp(-tD) to a few units of its argument's
    last place; beyond that step (5e-4 · 10 > 2^-12), exponentials."""
    D = dc.pairwise_distances(np.random.default_rng(9).normal(size=(120, 3)))
    D *= 10.0 / D.max()
    solver = dc.MagnitudeSpace(D)._solver
    s = 3.0
    solver.buffer.similarity(s)
    scales = []
    original = _elementwise._exponentials
    monkeypatch.setattr(_elementwise, "_exponentials",
                        lambda D, t, out, **k: (scales.append(t), original(D, t, out, **k)))
    t = s + shift
    upper = np.triu_indices(len(D))
    np.testing.assert_allclose(solver.buffer.similarity(t)[upper], np.exp(-t * D)[upper],
                               rtol=2e-14)
    assert (scales == []) == (abs(shift) * D.max() <= _elementwise._SHIFT_LIMIT)


def test_warm_start_is_the_polynomial_through_the_nearest_solutions():
    """CG starts from the cubic through the solutions at the four scales nearest t (exact for
    solutions cubic in t), with its true residual; through fewer scales where the cubic's
    coefficients would amplify the solutions' errors (nearly coincident scales)."""
    rng = np.random.default_rng(8)
    D = dc.pairwise_distances(rng.normal(size=(40, 3)))
    solver = dc.MagnitudeSpace(D)._solver
    a, b, c, d = rng.normal(size=(4, len(D)))

    def cubic(s):
        return a + s * (b + s * (c + s * d))

    solver._cg_solutions = {s: cubic(s) for s in (0.5, 1.0, 1.5, 2.0, 8.0)}
    Z = solver.buffer.similarity(1.2)
    w, residual = solver._warm_start(Z, 1.2)
    np.testing.assert_allclose(w, cubic(1.2), rtol=1e-12)
    np.testing.assert_allclose(residual, 1.0 - np.exp(-1.2 * D) @ w, rtol=1e-12, atol=1e-12)
    solver._cg_solutions = {s: cubic(s) for s in (1.0, 1.0 + 1e-9, 2.0)}
    w, _ = solver._warm_start(solver.buffer.similarity(4.0), 4.0)
    np.testing.assert_allclose(w, 3.0 * cubic(2.0) - 2.0 * cubic(1.0 + 1e-9), rtol=1e-6)


@pytest.mark.parametrize("share", [0.98, 1.02])
def test_paired_scales_not_where_exp_meets_its_floor(share, monkeypatch):
    """Pairs up to the t_cut whose exp(-t_cut·D) reaches exp(-345) (entries of 1e-148 divide
    without subnormals), exponentials alone beyond it, where the clamped entries would break
    the identity; the integral is the same either way."""
    D = dc.pairwise_distances(np.random.default_rng(14).normal(size=(100, 4)))
    T = share * _common.EXPONENT_FLOOR / D.max()
    calls = _paired_scales_spy(monkeypatch)
    area = dc.mag_area(D, T, method="chebyshev")
    paired = sum(used for used, _ in calls)
    assert paired >= 23 if share < 1 else paired == 0
    assert area == pytest.approx(_unpaired_area(D, T, monkeypatch, method="chebyshev"),
                                 rel=1e-13)


def test_derivative_is_the_same_from_every_source(cloud):
    """wᵀ(D∘Z)w from the intact upper triangle (CG), the preserved lower one (Cholesky) and
    fresh exponentials agree with the dense formula."""
    t = 1.3
    space = dc.MagnitudeSpace(cloud, solver="direct")
    w = space.unique_weights(t)
    dense = float(w @ ((cloud * np.exp(-t * cloud)) @ w))
    fresh = space._solver.weighted_distance_form(t, w)  # the factorisation overwrote the buffer
    space._solver._factor(t, keep_similarity=True)
    assert (space._solver.buffer.lower_scale, space._solver.buffer.scale) == (t, None)
    from_lower = space._solver.weighted_distance_form(t, w)
    space._solver.buffer.similarity(t)
    # The fill touched the lower triangle.
    assert (space._solver.buffer.lower_scale, space._solver.buffer.scale) == (None, t)
    from_upper = space._solver.weighted_distance_form(t, w)
    for value in (fresh, from_lower, from_upper):
        assert value == pytest.approx(dense, rel=1e-12)


def test_rerun_is_bit_identical(monkeypatch):
    """Which solver answers each scale depends on counts only, never on timings: two runs give
    the same bits."""
    monkeypatch.setattr(_solver, "_CG_MIN_POINTS", 100)
    rng = np.random.default_rng(14)
    D = dc.pairwise_distances(rng.normal(size=(250, 6)))
    runs = []
    for _ in range(2):
        space = dc.MagnitudeSpace(D)
        t_conv = space.convergence_scale()
        runs.append((t_conv, space.mag_area(t_conv), sorted(space._cache.items())))
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("threshold", "expected_threads"), [(10**9, 2), (50, 1)])
def test_large_factorisations_run_single_threaded(monkeypatch, threshold, expected_threads):
    """SciPy's bundled OpenBLAS crashes in its threaded dpotrf from about 16,000 points: from
    POTRF_SINGLE_THREAD_FROM points on, the factorisation runs under a one-thread limit."""
    from threadpoolctl import threadpool_limits

    monkeypatch.setattr(_solver, "_POTRF_SINGLE_THREAD_FROM", threshold)
    monkeypatch.setattr(_solver, "_SINGLE_THREAD_BELOW", 0)
    seen = []
    real = _solver.lapack

    class Probe:
        def __getattr__(self, name):
            attr = getattr(real, name)
            if name != "dpotrf":
                return attr

            def dpotrf(*args, **kwargs):
                controllers = _threads.threadpools().select(user_api="blas").lib_controllers
                seen.append(max(c.num_threads for c in controllers))
                return attr(*args, **kwargs)

            return dpotrf

    monkeypatch.setattr(_solver, "lapack", Probe())
    rng = np.random.default_rng(15)
    space = dc.MagnitudeSpace(dc.pairwise_distances(rng.normal(size=(60, 3))), solver="direct")
    with threadpool_limits(2, user_api="blas"):
        space.magnitude(1.0)
    assert seen == [expected_threads]


def _fill_in_child(queue):
    rng = np.random.default_rng(16)
    D = dc.pairwise_distances(rng.normal(size=(100, 3)))
    Z = np.zeros_like(D)
    _elementwise._fill_similarity(D, 1.0, Z, None, fill64=True, full=True, clamp=False, threads=2)
    queue.put(bool(np.allclose(Z, np.exp(-D))))


def test_threaded_fill_works_in_a_forked_child():
    """The thread pool is per process: a child forked after the parent used it gets its own
    (an inherited pool has no threads behind it, and its work would never run)."""
    import multiprocessing

    rng = np.random.default_rng(17)
    D = dc.pairwise_distances(rng.normal(size=(100, 3)))
    _elementwise._fill_similarity(D, 1.0, np.zeros_like(D), None, fill64=True, full=True,
                               clamp=False, threads=2)  # the parent's pool now exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_fill_in_child, args=(queue,))
    child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in the threaded exp(-tD) fill")
    assert child.exitcode == 0 and queue.get(timeout=5)


# -- fallback records and the shared prepared spaces ---------------------------------------------

def test_fallback_solves_are_recorded_with_an_error_bound():
    """Besides the warning, the space keeps what the CLI reports: scale, solver, residual and a
    bound on the error of Mag(t)."""
    space = dc.MagnitudeSpace(k32())
    with pytest.warns(MagnitudeWarning, match="LDLᵀ"):
        mag = space.magnitude(0.2)
    with pytest.warns(MagnitudeWarning, match="pseudo-inverse"):
        space.magnitude(np.log(np.sqrt(2.0)))
    ldl, pinv = space.fallbacks
    assert (ldl["solver"], ldl["t"], pinv["solver"]) == ("ldl", 0.2, "pinv")
    exact = np.linalg.solve(np.exp(-0.2 * k32()), np.ones(5)).sum()
    assert ldl["relative_residual"] < 1e-13
    assert abs(mag - exact) <= ldl["mag_error_bound"] + 4 * np.finfo(float).eps * abs(exact)
    assert pinv["dropped_eigenvalues"] >= 1
    assert 0.0 <= pinv["mag_error_bound"] < np.inf
    summary = space.fallback_summary()
    assert [(s["solver"], s["count"]) for s in summary] == [("ldl", 1), ("pinv", 1)]
    assert summary[0]["t_min"] == summary[0]["t_max"] == 0.2
    # A space of negative type never needs them.
    assert dc.MagnitudeSpace(equidistant(4, 1.0)).fallbacks == []


def test_plain_functions_share_a_prepared_space_keyed_by_content(cloud):
    from diversity_core.magnitude import _space

    magnitude_pkg = dc.magnitude
    magnitude_pkg.clear_cache()
    D = cloud.copy()
    t_conv = dc.convergence_scale(D)
    space = _space.as_space(D)  # found again by content, with the search's solves
    assert len(_space._prepared) == 1 and len(space._cache) > 1
    assert dc.mag_area(D, t_conv) == dc.mag_area(dc.MagnitudeSpace(cloud), t_conv)
    assert _space.as_space(D.copy()) is space  # equal content, another array: the same space
    # Changed in place: the digest differs, a new space answers.
    D[0, 1] = D[1, 0] = 2 * D[0, 1]
    assert _space.as_space(D) is not space
    assert dc.convergence_scale(D) != t_conv
    # The first space shares the caller's memory, which has changed: asked for with the
    # original content, it is found by digest but re-hashed, and not returned stale.
    original = cloud.copy()
    found = _space.as_space(original)
    assert found is not space and found.D[0, 1] == cloud[0, 1]
    magnitude_pkg.clear_cache()
    assert len(_space._prepared) == 0


def test_large_matrices_are_checked_and_searched_for_duplicates_over_threads(monkeypatch):
    # From _THREADED_CHECK_FROM / _THREADED_SEARCH_FROM points on (lowered here, with three
    # threads allowed and tiles of 4 rows), a distance matrix is checked and searched for
    # duplicates in row blocks over the threads: every matrix the one-thread checks accept is
    # accepted, every other one fails with the one-thread message, and the duplicates found are
    # the same.
    from diversity_core import _validation
    from diversity_core.magnitude import _space

    def outcome(D):
        try:
            return _validation.check_distance_matrix(D).shape
        except ValueError as exc:
            return str(exc)

    good = dc.pairwise_distances(np.random.default_rng(21).normal(size=(23, 3)))
    matrices = [good, np.zeros((23, 23))]
    for i, j, value in [(1, 2, np.nan), (3, 20, np.inf), (0, 22, -1.0), (5, 5, 1e-3),
                        (2, 17, None), (22, 21, None)]:
        bad = good.copy()
        bad[i, j] = bad[i, j] + 0.5 if value is None else value
        matrices.append(bad)
    huge = good / good.max() * 1e308  # finite entries whose sum overflows: still finite
    matrices.append(huge)
    serial = [outcome(D) for D in matrices]
    monkeypatch.setattr(_validation, "_THREADED_CHECK_FROM", 10)
    monkeypatch.setattr(_validation, "_TILE", 4)
    monkeypatch.setattr(_validation, "allowed_threads", lambda: 3)
    assert [outcome(D) for D in matrices] == serial
    assert sum(isinstance(o, tuple) for o in serial) == 3  # good, zeros, huge
    X = np.random.default_rng(22).normal(size=(40, 3))
    copies = dc.pairwise_distances(np.vstack([X, X[5:7], X[30:31] + 1e-14]))
    expected = [dc.MagnitudeSpace(D).group_of_point for D in (good, copies)]
    monkeypatch.setattr(_space, "_THREADED_SEARCH_FROM", 10)
    monkeypatch.setattr(_space, "_SEARCH_ROWS", 4)
    monkeypatch.setattr(_space, "allowed_threads", lambda: 3)
    assert _space._close_pairs_tolerance(good) is None
    assert _space._close_pairs_tolerance(copies) is not None
    got = [dc.MagnitudeSpace(D).group_of_point for D in (good, copies)]
    assert got[0] is None and expected[0] is None
    np.testing.assert_array_equal(got[1], expected[1])
    assert dc.MagnitudeSpace(copies).n_unique == 40
