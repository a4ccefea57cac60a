"""The convergence-scale search's first scale from the first-order bound on magnitude:
the bound, the sums every kind of space forms for it, and its use at every size (a batch's
members taking the steps of their own spaces)."""

import numpy as np
import pytest
from point_clouds import clustered
from test_search import search_evaluations

import diversity_core as dc
from diversity_core.magnitude import (
    LargeMagnitudeSpace,
    MagnitudeSpace,
    _search,
    convergence_scales,
)


@pytest.fixture(scope="module")
def X():
    return clustered(600, 32, seed=1)


@pytest.fixture(scope="module")
def D(X):
    return dc.pairwise_distances(X)


def direct_sums(D, t):
    E = np.exp(-t * D)
    np.fill_diagonal(E, 0.0)
    return E.sum(), (D * E).sum()


def test_every_kind_of_space_sums_over_its_distinct_pairs(X, D):
    t = 0.7 * dc.convergence_scale(D)
    expected = direct_sums(D, t)
    fresh = MagnitudeSpace(D)
    np.testing.assert_allclose(fresh.pair_sums(t), expected, rtol=1e-12)
    # exp(-tD) read back from the similarity buffer: its upper triangle (conjugate gradients
    # leave it), and its lower one (a factorisation overwrites the upper).
    cg = MagnitudeSpace(D)
    cg.magnitude(t)
    direct = MagnitudeSpace(D, solver="direct")
    direct.magnitude(t)
    for space in (cg, direct):
        np.testing.assert_allclose(space.pair_sums(t), expected, rtol=1e-12)
    # The large-n path's float32 distances: within their own accuracy.
    np.testing.assert_allclose(LargeMagnitudeSpace(X).pair_sums(t), expected, rtol=1e-5)
    # Duplicates are merged first: the sums are those of the distinct points.
    doubled = dc.pairwise_distances(np.vstack([X, X[:50]]))
    np.testing.assert_allclose(MagnitudeSpace(doubled).pair_sums(t), expected, rtol=1e-12)


def test_the_torch_spaces_sum_as_the_numpy_engine(D):
    torch = pytest.importorskip("torch")  # noqa: F841
    from diversity_core.magnitude import TorchMagnitudeBatch, TorchMagnitudeSpace

    t = 0.7 * dc.convergence_scale(D)
    expected = direct_sums(D, t)
    np.testing.assert_allclose(TorchMagnitudeSpace(D, device="cpu").pair_sums(t), expected,
                               rtol=1e-12)
    small = dc.pairwise_distances(clustered(40, 32, seed=2))
    batch = TorchMagnitudeBatch([small, D, small], device="cpu")
    np.testing.assert_allclose(batch.pair_sums(1, t), expected, rtol=1e-12)
    np.testing.assert_allclose(batch.pair_sums(2, t), direct_sums(small, t), rtol=1e-12)
    # A group's members at once, each at its own scale.
    s0, s1 = batch.pair_sums_many([2, 1, 0], [2 * t, t, t])
    np.testing.assert_allclose(np.column_stack([s0, s1]),
                               [direct_sums(small, 2 * t), expected, direct_sums(small, t)],
                               rtol=1e-12)


@pytest.mark.parametrize("target", [0.95, 0.99])
def test_the_bound_reaches_the_goal_at_or_just_after_the_convergence_scale(D, target):
    space = MagnitudeSpace(D)
    n = space.n_unique
    t_conv = space.convergence_scale(target)
    t_bound = _search.first_order_scale(space.pair_sums, (1 - target) * n,
                                        space.initial_scale())
    # The root is found to _FIRST_ORDER_RTOL; it lies after t_conv, within 5 % here.
    assert t_conv <= t_bound * (1 + 2 * _search._FIRST_ORDER_RTOL)
    assert t_bound <= 1.05 * t_conv
    # The bound itself: Mag(t) >= n - Σ_{i≠j} exp(-t d_ij) wherever Z_t is positive definite.
    for t in (0.2 * t_conv, t_conv, 3 * t_conv):
        assert space.magnitude(t) >= n - space.pair_sums(t)[0] - 1e-9 * n


def test_the_bound_is_found_from_far_below_and_far_above(D):
    space = MagnitudeSpace(D)
    deficit = 0.05 * space.n_unique
    t0 = space.initial_scale()
    reference = _search.first_order_scale(space.pair_sums, deficit, t0)
    # Far above, exp(-tD) underflows off the diagonal (no slope): steps back by 4 until not.
    for start in (1e-3 * t0, 1e3 * t0):
        assert _search.first_order_scale(space.pair_sums, deficit, start) == pytest.approx(
            reference, rel=3 * _search._FIRST_ORDER_RTOL)


def test_below_the_threshold_the_former_first_scale_is_kept(monkeypatch):
    asked = []

    def pair_sums(t):
        asked.append(t)
        return 1.0, 1.0

    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 100)
    assert _search.first_scale(99, 0.95 * 99, 0.123, pair_sums) == 0.123 and not asked
    assert _search.first_scale(100, 0.95 * 100, 0.123, pair_sums) != 0.123 and asked


def test_every_space_with_a_search_starts_from_the_bound():
    assert _search.FIRST_ORDER_FROM == 2
    D = dc.pairwise_distances(clustered(10, 4, seed=5))
    space = MagnitudeSpace(D)
    bound = _search.first_order_scale(space.pair_sums, 0.05 * 10, space.initial_scale())
    assert _search.first_scale(10, 0.95 * 10, space.initial_scale(), space.pair_sums) == bound


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_a_batch_sums_and_starts_as_its_members_own_spaces(metric):
    """Members solved stacked (10 and 40 points), looped (65 and 200) and on the single-space
    path (600): the sums of each member's own space, bit for bit, and the first scales their
    own searches start from."""
    from diversity_core.magnitude._batch import _Batch

    Ds = [dc.pairwise_distances(clustered(n, 8, seed=n), metric=metric)
          for n in (10, 10, 40, 65, 200, 600)]
    batch = _Batch(Ds)
    for t in (0.05, 1.0, 30.0):
        s0, s1 = batch.pair_sums_many(np.arange(len(Ds)), np.full(len(Ds), t))
        for i, D in enumerate(Ds):
            assert (s0[i], s1[i]) == MagnitudeSpace(D).pair_sums(t)
    spaces = [MagnitudeSpace(D) for D in Ds]
    n = np.array([space.n_unique for space in spaces])
    t0 = [space.initial_scale() for space in spaces]
    starts = _search.first_scales(n, 0.95 * n, t0, lambda k, ts: batch.pair_sums_many(k, ts))
    for i, space in enumerate(spaces):
        assert starts[i] == _search.first_scale(space.n_unique, 0.95 * space.n_unique, t0[i],
                                                space.pair_sums)


def test_from_the_threshold_on_the_search_takes_fewer_evaluations(D, monkeypatch):
    """With the threshold lowered to this 600-point cloud: fewer solves, the same convergence
    scale to the search's tolerance, and the batch's search taking the very same steps."""
    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 10**9)
    former, former_solved = search_evaluations(MagnitudeSpace(D), 0.95)
    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 500)
    bound, bound_solved = search_evaluations(MagnitudeSpace(D), 0.95)
    assert len(bound_solved) < len(former_solved)
    assert bound == pytest.approx(former, rel=1e-8)
    small = dc.pairwise_distances(clustered(100, 32, seed=3))
    scales = convergence_scales([small, D], 0.95)
    assert scales[1] == bound  # the same steps, bit for bit
    # (the small member is solved stacked: to round-off of its own space's path)
    assert scales[0] == pytest.approx(dc.convergence_scale(small, 0.95), rel=1e-12)


@pytest.mark.parametrize("n", [50, 300])
def test_small_spaces_take_fewer_evaluations_from_the_bound(n, monkeypatch):
    """At the default start (every size) against the former one: 2 solves instead of 3 for
    these clustered clouds (each search ending on a predicted step it does not solve), the
    same convergence scale to the search's tolerance."""
    D = dc.pairwise_distances(clustered(n, 32, seed=1))
    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 10**9)
    former, former_solved = search_evaluations(MagnitudeSpace(D), 0.95)
    monkeypatch.undo()
    bound, bound_solved = search_evaluations(MagnitudeSpace(D), 0.95)
    assert (len(former_solved), len(bound_solved)) == (3, 2)
    assert bound == pytest.approx(former, rel=1e-9)


def test_the_torch_path_starts_from_the_same_bound(D, monkeypatch):
    pytest.importorskip("torch")
    from diversity_core.magnitude import TorchMagnitudeSpace, torch_convergence_scales

    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 500)
    numpy_scale = dc.convergence_scale(MagnitudeSpace(D), 0.95)
    space = TorchMagnitudeSpace(D, device="cpu")
    assert dc.convergence_scale(space, 0.95) == pytest.approx(numpy_scale, rel=1e-10)
    assert space.evaluations["convergence_scale"] <= 4
    assert torch_convergence_scales([D], 0.95)[0] == pytest.approx(numpy_scale, rel=1e-10)


def test_the_large_path_starts_from_the_same_bound(X, D, monkeypatch):
    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 10**9)
    former = LargeMagnitudeSpace(X)
    former.convergence_scale(0.95)
    monkeypatch.setattr(_search, "FIRST_ORDER_FROM", 500)
    large = LargeMagnitudeSpace(X)
    t_conv = large.convergence_scale(0.95)
    assert large.evaluations["convergence_scale"] < former.evaluations["convergence_scale"]
    # To the large path's own accuracy (solver_rtol 1e-7 of n in Mag).
    assert t_conv == pytest.approx(dc.convergence_scale(D, 0.95), rel=1e-5)


def test_the_benchmark_compares_both_first_scales():
    """benchmarks/bench_first_scale.py at a small size: both runs reported, the bound's with
    fewer solves and passes over the distances, the former's with none."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_first_scale.py"
    run = subprocess.run([sys.executable, str(script), "--points", "2500", "--path", "numpy"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    counts = {name: (int(solves), int(passes)) for name, solves, passes in re.findall(
        r"(former|bound): (\d+) solves, (\d+) passes", run.stdout)}
    assert counts["former"][1] == 0 and counts["bound"][1] >= 1
    assert counts["bound"][0] < counts["former"][0]
