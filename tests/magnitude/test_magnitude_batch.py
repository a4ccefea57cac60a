"""Batches of spaces (diversity_core.magnitude._batch) against the single-space functions."""

import math
import warnings

import numpy as np
import pytest
from test_magnitude import k32  # Leinster's K_{3,2}: Z_t indefinite below log √2

import diversity_core as dc
from diversity_core import magnitude as mg
from diversity_core.magnitude import (
    MagnitudeBatchError,
    MagnitudeWarning,
    _batch,
    _batch_solve,
    _chebyshev,
    _lapack,
    _search,
)

AGREE = 1e-10  # batch = single space, relative


@pytest.fixture(scope="module")
def mixed():
    """Spaces of every path: tiny (stacked), medium (looped), one over _BATCH_MAX_POINTS once
    the test lowers it, sets with duplicates, cosine and Euclidean."""
    rng = np.random.default_rng(21)
    spaces = []
    for i in range(40):
        n = int(rng.integers(3, 12))
        X = rng.normal(size=(n, 30)) + 2 * rng.normal(size=30)
        if i % 6 == 0:
            X[-1] = X[0]  # a duplicate: the twin property
        spaces.append(dc.pairwise_distances(X, "cosine"))
    for n in (70, 71, 90, 130):  # odd and even: the packed layouts differ
        spaces.append(dc.pairwise_distances(rng.normal(size=(n, 4))))
    return spaces


@pytest.fixture
def small_single_path(monkeypatch):
    """Members of 100 distinct points or more take the single-space path (500 by default)."""
    monkeypatch.setattr(_batch, "_BATCH_MAX_POINTS", 100)


def singles(fn, spaces, *args, **kwargs):
    return np.array([fn(dc.MagnitudeSpace(D), *args, **kwargs) for D in spaces])


def test_convergence_scales_equal_the_single_path(mixed, small_single_path):
    batch = mg.convergence_scales(mixed)
    np.testing.assert_allclose(batch, singles(dc.convergence_scale, mixed), rtol=AGREE, atol=0)
    target = mg.convergence_scales(mixed, 0.7, rtol=1e-6)
    np.testing.assert_allclose(target, singles(dc.convergence_scale, mixed, 0.7, rtol=1e-6),
                               rtol=AGREE, atol=0)


@pytest.mark.parametrize("method", ["chebyshev", "hermite_log", "hermite_d2", "trapezoid",
                                    "quad"])
def test_mag_areas_equal_the_single_path(mixed, small_single_path, method):
    t_conv = mg.convergence_scales(mixed)
    t_cut = float(np.median(t_conv))
    shared = mg.mag_areas(mixed, t_cut, method=method, n_ts=17)
    np.testing.assert_allclose(shared, singles(dc.mag_area, mixed, t_cut, method=method, n_ts=17),
                               rtol=AGREE, atol=0)
    # One limit per space: each its own convergence scale (spaces then share no nodes).
    own = mg.mag_areas(mixed, t_conv, method=method, n_ts=17)
    expected = [dc.mag_area(dc.MagnitudeSpace(D), t, method=method, n_ts=17)
                for D, t in zip(mixed, t_conv, strict=True)]
    np.testing.assert_allclose(own, expected, rtol=AGREE, atol=0)


def test_mag_areas_far_beyond_a_members_rise_need_bisection():
    """A shared t_cut 200 times a member's own convergence scale: its first panel does not
    meet the tolerance, and the member is bisected as a single space would be."""
    x = np.random.default_rng(3).uniform(0, 1, size=12)
    line = np.abs(x[:, None] - x[None, :])
    spaces = [line, 0.005 * line]
    t_cut = dc.convergence_scale(line)
    np.testing.assert_allclose(mg.mag_areas(spaces, t_cut), singles(dc.mag_area, spaces, t_cut),
                               rtol=AGREE)


def test_magnitude_functions_equal_the_single_path(mixed, small_single_path):
    ts = np.array([0.0, 3.0, 0.5, 40.0, 3.0])  # unsorted, repeated, with 0
    batch = mg.magnitude_functions(mixed, ts)
    assert batch.shape == (len(mixed), len(ts))
    np.testing.assert_allclose(batch, singles(dc.magnitude_function, mixed, ts), rtol=AGREE,
                               atol=0)
    assert np.all(batch[:, 0] == 1.0)


def test_a_stack_of_matrices_is_a_batch(mixed):
    stack = np.stack([D for D in mixed if D.shape == mixed[1].shape])
    np.testing.assert_allclose(mg.convergence_scales(stack),
                               singles(dc.convergence_scale, list(stack)), rtol=AGREE)
    with pytest.raises(ValueError, match="a single space"):
        mg.convergence_scales(mixed[1])
    with pytest.raises(ValueError, match="empty batch"):
        mg.convergence_scales([])


def test_degenerate_members_fail_alone(mixed):
    same = dc.pairwise_distances(np.ones((3, 4)))  # one distinct point, three copies
    bad = mixed[2].copy()
    bad[0, 1] = np.nan
    asymmetric = mixed[3].copy()
    asymmetric[0, 1] += 1.0
    spaces = [mixed[0], same, mixed[1], bad, asymmetric, np.zeros((1, 1))]
    with pytest.raises(MagnitudeBatchError) as caught:
        mg.convergence_scales(spaces)
    err = caught.value
    assert isinstance(err, ValueError)
    assert set(err.failures) == {1, 3, 4, 5}
    assert "single distinct point (3 copies)" in err.failures[1]
    assert "NaN" in err.failures[3]
    assert "not symmetric" in err.failures[4]
    assert "a space with a single point" in err.failures[5]
    assert str(err).startswith("member 1: ") and "3 more failed members" in str(err)
    ok = [0, 2]
    np.testing.assert_allclose(err.values[ok], singles(dc.convergence_scale,
                                                       [spaces[i] for i in ok]), rtol=AGREE)
    assert np.all(np.isnan(err.values[[1, 3, 4, 5]]))
    # errors="nan": the same values, and one warning naming the failures.
    with pytest.warns(MagnitudeWarning, match="4 member"):
        values = mg.convergence_scales(spaces, errors="nan")
    np.testing.assert_array_equal(values, err.values)
    # A space of one distinct point has a MagArea (Mag = 1 everywhere); invalid ones do not.
    with pytest.raises(MagnitudeBatchError) as caught:
        mg.mag_areas(spaces, 2.0)
    assert set(caught.value.failures) == {3, 4}
    assert caught.value.values[1] == pytest.approx(2.0, rel=1e-12)
    assert caught.value.values[5] == pytest.approx(2.0, rel=1e-12)
    with pytest.raises(ValueError, match="errors must be"):
        mg.convergence_scales(spaces, errors="ignore")


def test_a_member_that_is_not_positive_definite_takes_the_fallback_alone(mixed):
    """K_{3,2}'s Z_t is indefinite at t = 0.2: that member's scale goes to the single-space
    fallback (LDLᵀ), with a warning naming the member and a record in its space; the others
    stay in the batch."""
    graph = dc.MagnitudeSpace(k32())
    spaces = [mixed[0], graph, mixed[1]]
    ts = np.array([0.2, 1.0])
    with pytest.warns(MagnitudeWarning, match=r"member 1: similarity matrix .* not positive "):
        batch = mg.magnitude_functions(spaces, ts)
    exact = np.linalg.solve(np.exp(-0.2 * k32()), np.ones(5)).sum()
    assert batch[1, 0] == pytest.approx(exact, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MagnitudeWarning)
        expected = singles(dc.magnitude_function, [mixed[0], k32(), mixed[1]], ts)
    np.testing.assert_allclose(batch, expected, rtol=AGREE)
    assert [r["solver"] for r in graph.fallbacks] == ["ldl"]
    assert graph.fallbacks[0]["t"] == 0.2


def test_given_spaces_remember_what_the_batch_evaluated(mixed):
    spaces = [dc.MagnitudeSpace(D) for D in mixed[:5]]
    t_conv = mg.convergence_scales(spaces)
    for space, t in zip(spaces, t_conv, strict=True):
        assert space.magnitude(t) == pytest.approx(0.95 * space.n_unique, rel=1e-9)
        assert len(space._cache) > 2  # the search's scales


def test_settings_batch_methods_follow_their_conventions(mixed):
    settings = dc.MagnitudeSettings(target=0.8, integration="trapezoid", n_ts=9)
    t = settings.convergence_scales(mixed[:6])
    np.testing.assert_allclose(t, [settings.convergence_scale(D) for D in mixed[:6]], rtol=AGREE)
    np.testing.assert_allclose(settings.mag_areas(mixed[:6], 3.0),
                               [settings.mag_area(D, 3.0) for D in mixed[:6]], rtol=AGREE)
    functions, ts = settings.magnitude_functions(mixed[:6], 3.0)
    np.testing.assert_array_equal(ts, np.linspace(0.0, 3.0, 9))
    np.testing.assert_allclose(functions, [dc.magnitude_function(D, ts) for D in mixed[:6]],
                               rtol=AGREE)


def test_gil_free_lapack_is_bitwise_scipys():
    """The ctypes route to SciPy's packed LAPACK routines (used on threads) gives SciPy's
    wrappers' bits, for odd and even sizes (packing included); the packed factor solves as the
    full one does."""
    gil_free = _lapack._gil_free_lapack()
    if gil_free is None:
        pytest.skip("SciPy's Cython LAPACK table is not readable here")
    rng = np.random.default_rng(5)
    for n in (80, 81):
        D = dc.pairwise_distances(rng.normal(size=(n, 3)))
        Z = np.exp(-2.0 * D)
        results = []
        for calls in (gil_free, _lapack._scipy_lapack()):
            P = calls.trttf(Z)
            assert calls.pftrf(P, n)
            u = calls.tfsm(P, np.ones(n), False)
            results.append((calls.trttf(Z), P, u, calls.tfsm(P, u.copy(), True)))
        for a, b in zip(*results, strict=True):
            np.testing.assert_array_equal(a, b)
        L = np.linalg.cholesky(Z)
        np.testing.assert_allclose(results[0][2], np.linalg.solve(L, np.ones(n)), rtol=1e-12)
        np.testing.assert_allclose(results[0][3], np.linalg.solve(Z, np.ones(n)), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 7, 80, 81])
def test_packed_symmetric_product_is_the_full_one(n):
    """``sfmv`` multiplies a packed symmetric matrix by a vector as the full matrix does, on
    both routes, for even and odd sizes (the packed blocks lie differently) and the smallest
    ones (an empty second block). The routes agree to round-off, not bit for bit: the wrappers
    copy each block, and BLAS's summation can depend on where an array lies."""
    rng = np.random.default_rng(n)
    A = rng.normal(size=(n, n))
    A += A.T
    x = rng.normal(size=n)
    routes = [_lapack._scipy_lapack()] + [r for r in [_lapack._gil_free_lapack()] if r]
    for calls in routes:
        out = np.full(n, np.nan)
        assert calls.sfmv(calls.trttf(A), x, out) is out
        np.testing.assert_allclose(out, A @ x, rtol=1e-13, atol=1e-13 * np.abs(A).sum())


def test_complements_pair_the_chebyshev_nodes():
    """MagArea's nodes on [0, T] pair up as t, T - t (the larger formed by division), T/2 and
    T stand alone, and a scale without its complement is plain."""
    T = 35.21
    first = _chebyshev._cc_nodes(0.0, T, 12)[1:]  # the first level: 12 scales, T/2 and T
    rows = np.zeros(len(first), dtype=np.intp)
    codes = _batch_solve._complements(rows, first, T)
    assert codes[-1] == _batch_solve._WHOLE and codes[5] == _batch_solve._HALF
    for p in range(5):
        assert codes[p] == 10 - p and codes[10 - p] == p
    second = _chebyshev._cc_nodes(0.0, T, 24)[1::2]  # the next level's new scales: 6 pairs
    codes = _batch_solve._complements(np.zeros(12, dtype=np.intp), second, T)
    np.testing.assert_array_equal(codes, np.arange(12)[::-1])
    # Two members, interleaved; a scale whose complement is missing is plain.
    ts = np.array([first[0], first[0], first[10], 1.234])
    codes = _batch_solve._complements(np.array([0, 1, 0, 1]), ts, T)
    np.testing.assert_array_equal(codes, [2, _batch_solve._PLAIN, 0, _batch_solve._PLAIN])


def test_mag_areas_where_the_complements_would_meet_the_floor():
    """exp(-T D) below the exponent floor breaks exp(-(T - t)D) = exp(-TD) / exp(-tD): such a
    member forms every scale by exponentials, and still equals the single path."""
    x = np.sort(np.random.default_rng(8).uniform(0.0, 1000.0, size=75))
    line = np.abs(x[:, None] - x[None, :])  # T · max(D) = 1.5 · ~1000 > 345
    near = dc.pairwise_distances(np.random.default_rng(9).normal(size=(66, 3)))
    spaces = [line, near]
    np.testing.assert_allclose(mg.mag_areas(spaces, 1.5), singles(dc.mag_area, spaces, 1.5),
                               rtol=AGREE)


def test_a_looped_member_that_is_not_positive_definite_takes_the_fallback_alone(mixed):
    """K_{40,30}'s Z_t is indefinite at small t: in a convergence-scale search and in a
    MagArea its scales go to the single-space fallback, the other members stay packed."""
    D = np.full((70, 70), 2.0)
    D[:40, 40:] = D[40:, :40] = 1.0
    np.fill_diagonal(D, 0.0)
    spaces = [mixed[-3], D, mixed[-2]]
    with pytest.warns(MagnitudeWarning, match=r"member 1: similarity matrix"):
        areas = mg.mag_areas(spaces, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MagnitudeWarning)
        np.testing.assert_allclose(areas, singles(dc.mag_area, spaces, 0.3), rtol=AGREE)


def test_a_batch_is_prepared_once_for_the_same_matrices(mixed):
    """convergence_scales then mag_areas on the same arrays share one preparation; other
    arrays, a matrix changed in place, or clear_cache() give a new one."""
    mg.clear_cache()
    first = _batch._prepared_batch(mixed)
    assert _batch._prepared_batch(mixed) is first
    assert _batch._prepared_batch(list(mixed)) is first
    copies = [D.copy() for D in mixed]
    assert _batch._prepared_batch(copies) is not first  # the same contents, other memory
    before = mg.mag_areas(copies, 1.0)
    copies[-3] *= 2.0  # in place
    assert _batch._prepared_batch(copies).D[len(mixed) - 3][0, 1] == 2.0 * mixed[-3][0, 1]
    after = mg.mag_areas(copies, 1.0)
    np.testing.assert_allclose(after[-3], dc.mag_area(dc.MagnitudeSpace(copies[-3]), 1.0),
                               rtol=AGREE)
    assert after[-3] != before[-3]
    mg.clear_cache()
    assert _batch._prepared_batch(mixed) is not first


@pytest.mark.parametrize("method", ["hermite_log", "hermite_d2"])
def test_the_hermite_rules_take_t_cut_from_the_search_with_the_same_bits(method, monkeypatch):
    """After convergence_scales, mag_areas at each member's own t_conv does not solve t_conv
    again where the search's last solve was there (it gave Mag and dMag/dt), and its areas are
    bit for bit those of a fresh batch that does. (Searches that end on a predicted step do not
    solve it: the prediction is switched off here so that every search ends on a solve.)"""
    monkeypatch.setattr(_search, "_PREDICTED_SAFETY", math.inf)
    rng = np.random.default_rng(5)
    spaces = [dc.pairwise_distances(rng.normal(size=(n, 4))) for n in (10, 10, 80, 80)]
    mg.clear_cache()
    t_conv = mg.convergence_scales(spaces)
    last = _batch._prepared_batch(spaces)._last_slope
    solved_there = {t for i, t in enumerate(t_conv.tolist()) if last[i][0] == t}
    assert len(solved_there) >= 2  # a stacked member and a looped one
    asked = []
    evaluate_group = _batch._Batch._evaluate_group

    def spy(self, group, rows, ts, order, complement):
        asked.extend(ts.tolist())
        return evaluate_group(self, group, rows, ts, order, complement)

    monkeypatch.setattr(_batch._Batch, "_evaluate_group", spy)
    after_search = mg.mag_areas(spaces, t_conv, method=method)
    assert not solved_there & set(asked)
    fresh = mg.mag_areas(_batch._Batch(spaces), t_conv, method=method)
    assert set(t_conv.tolist()) <= set(asked)
    np.testing.assert_array_equal(after_search, fresh)


@pytest.mark.parametrize("method", ["hermite_log", "hermite_d2"])
def test_members_with_their_own_limits_advance_together(method, monkeypatch):
    """One t_cut per member: the stretched rules ask every member's scales of a stage in one
    call (shared among the threads), not member by member, and each area is its space's."""
    rng = np.random.default_rng(8)
    spaces = [dc.pairwise_distances(rng.normal(size=(80, 3))) for _ in range(6)]
    t_cuts = np.array([dc.convergence_scale(D) for D in spaces]) * np.linspace(0.8, 1.2, 6)
    calls = []
    evaluate = _batch._Batch._evaluate

    def spy(self, idx, ts, order, complement):
        calls.append(len(set(np.asarray(idx).tolist())))
        return evaluate(self, idx, ts, order, complement)

    monkeypatch.setattr(_batch._Batch, "_evaluate", spy)
    areas = mg.mag_areas(_batch._Batch(spaces), t_cuts, method=method)
    assert calls[0] == len(spaces)
    expected = [dc.mag_area(dc.MagnitudeSpace(D), t, method=method)
                for D, t in zip(spaces, t_cuts, strict=True)]
    np.testing.assert_allclose(areas, expected, rtol=AGREE, atol=0)
