"""The engine's internal contracts: accuracy passed as an
argument, values recorded through the space's own methods, the paired-scale hint safe in any
order, and the work split over the cores the process may use, in both exponential variants,
without a bit depending on the thread count."""

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import diversity_core as dc
from diversity_core import _threads
from diversity_core.magnitude import _elementwise, _search, _similarity, _solver, _triangles


class _CountingPool:
    """A pool of four threads that records how many tasks each ``map`` hands it."""

    def __init__(self):
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.tasks: list[int] = []

    def map(self, fn, *iterables):
        items = list(zip(*iterables, strict=True))
        self.tasks.append(len(items))
        return self.pool.map(lambda args: fn(*args), items)


@pytest.fixture
def four_cores(monkeypatch):
    """Four usable cores and a pool of four threads, whatever this machine has."""
    pool = _CountingPool()
    monkeypatch.setattr(_threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(_threads, "executor", lambda pid: pool)
    yield pool
    pool.pool.shutdown()


@pytest.fixture(params=["compiled", "numpy"])
def exponential(request, monkeypatch):
    """Both routes: the compiled kernels (where built) and NumPy's (``_kernels`` absent)."""
    if request.param == "numpy":
        for name in ("_vexp_inplace", "_exp_scaled"):
            monkeypatch.setattr(_elementwise, name, None)
        monkeypatch.setattr(_solver, "_weighted_row_sums", None)
    elif _elementwise._vexp_inplace is None:
        pytest.skip("the compiled exponential is not built here")
    return request.param


def _thread_spy(monkeypatch, module, name):
    """Record the threads that call ``module.name``."""
    seen = set()
    original = getattr(module, name)

    def spy(*args, **kwargs):
        seen.add(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_allowed_threads_follow_blas_and_the_cpu_affinity(monkeypatch):
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert _threads.usable_cores() == 3
    with threadpool_limits(2, user_api="blas"):
        assert _threads.allowed_threads() == 2
    with threadpool_limits(64, user_api="blas"):
        assert _threads.allowed_threads() <= 3  # never more than the usable cores
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {5}, raising=False)
    with threadpool_limits(2, user_api="blas"):
        assert _threads.allowed_threads() == 1


@pytest.mark.parametrize(("n", "threads"), [(300, 1), (2600, 2)])
def test_similarity_fill_and_derivative_split_over_threads(n, threads, exponential,
                                                           four_cores, monkeypatch):
    """From _FILL_SINGLE_THREAD_BELOW points on, exp(-tD), the derivative's quadratic form (with
    fresh exponentials) and the first guess of the search are split into as many shares as
    threads are allowed, and the exponentials run on the pool's threads, with either
    exponential; below it, all on the calling thread (small problems keep one thread)."""
    rng = np.random.default_rng(1)
    D = dc.pairwise_distances(rng.normal(size=(n, 3)))
    four_cores.tasks.clear()  # the distances' own shares (pairwise_distances) are not counted
    solver = _solver._DenseSolver(D, precision="double", solver="direct")
    fill = _thread_spy(monkeypatch, _elementwise, "_exponentials")
    fresh = _thread_spy(monkeypatch, _triangles, "_exponentials")
    shares = []
    with threadpool_limits(2, user_api="blas"):
        solver.buffer.similarity(0.7)
        shares.append(sum(four_cores.tasks))
        solver.weighted_distance_form(1.3, np.full(n, 1.0 / n))  # exponentials afresh
        shares.append(sum(four_cores.tasks) - shares[0])
        _search._initial_scale(D)
        shares.append(sum(four_cores.tasks) - sum(shares))
    caller = threading.get_ident()
    if threads == 1:
        assert shares == [0, 0, 0] and fill == fresh == {caller}
    else:
        assert shares == [threads] * 3 and caller not in fill | fresh


def test_threads_change_no_bit(exponential, four_cores, monkeypatch):
    """The same numbers from the engine's passes on one thread and on four (BLAS's own thread
    count, which changes the bits of its sums, held at one): the fill, the derivative (blocks
    summed in order), the first guess, and a convergence scale and MagArea of a dense space."""
    rng = np.random.default_rng(2)
    D = dc.pairwise_distances(rng.normal(size=(700, 4)))
    results = []
    for threads in (1, 4):
        monkeypatch.setattr(_similarity, "elementwise_threads", lambda n, k=threads: k)
        monkeypatch.setattr(_search, "elementwise_threads", lambda n, k=threads: k)
        with threadpool_limits(1, user_api="blas"):
            space = dc.MagnitudeSpace(D)
            t = space.convergence_scale()
            derivative = space.magnitude_and_derivative(0.3 * t)[1]
            Z = space._solver.buffer.similarity(0.9 * t).copy()
            results.append((t, space.mag_area(t), derivative, _search._initial_scale(D), Z))
    assert results[0][:4] == results[1][:4]
    np.testing.assert_array_equal(results[0][4], results[1][4])


def test_numpy_exponential_when_the_extension_cannot_be_imported():
    """A failing import of ``_kernels`` (an unbuilt extension) selects NumPy's exp and
    NumPy's weighted distance form everywhere."""
    code = ("import sys; sys.modules['diversity_core.magnitude._kernels'] = None\n"
            "import numpy as np, diversity_core as dc\n"
            "from diversity_core.magnitude import EXPONENTIAL, _elementwise, _solver\n"
            "assert EXPONENTIAL == 'numpy' and _elementwise._vexp_inplace is None\n"
            "assert _elementwise._exp_scaled is None and _solver._weighted_row_sums is None\n"
            "from diversity_core.magnitude import _large\n"
            "assert _large._compiled_panel_product32 is None\n"
            "assert _large._compiled_panel_product64 is None\n"
            "D = dc.pairwise_distances(np.random.default_rng(3).normal(size=(60, 3)))\n"
            "print(repr(dc.mag_area(D, 2.0)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    D = dc.pairwise_distances(np.random.default_rng(3).normal(size=(60, 3)))
    assert float(out) == pytest.approx(dc.mag_area(D, 2.0), rel=1e-12)


def test_accuracy_is_an_argument_not_a_state(monkeypatch):
    """A looser ``atol`` is used for that call only: a later call without it solves the scale
    again to full accuracy; the solver holds no accuracy of its own."""
    monkeypatch.setattr(_solver, "_CG_MIN_POINTS", 100)
    rng = np.random.default_rng(4)
    D = dc.pairwise_distances(rng.normal(size=(300, 4)))
    exact = dc.MagnitudeSpace(D, solver="direct")
    space = dc.MagnitudeSpace(D)
    t = 0.2 * exact.convergence_scale()
    loose = space.magnitude(t, atol=1.0)
    assert not hasattr(space._solver, "atol")
    full = space.magnitude(t)
    assert full == pytest.approx(exact.magnitude(t), rel=1e-10)
    if space._cache_error:  # CG stopped on its energy estimate at the looser accuracy
        assert loose == pytest.approx(full, abs=1.0)
    assert t not in space._cache_error


def test_known_values_are_recorded_and_looked_up_through_the_space():
    D = dc.pairwise_distances(np.random.default_rng(5).normal(size=(30, 2)))
    space = dc.MagnitudeSpace(D)
    assert space.known_magnitude(0.0) == 1.0 and space.known_magnitude(1.0) is None
    space.record_magnitude(1.0, 7.5)
    space.record_magnitude(1.0, 8.0)  # known already: kept
    assert space.known_magnitude(1.0) == 7.5
    batch_space = dc.MagnitudeSpace(D)
    dc.magnitude.magnitude_functions([batch_space], [0.5])
    assert batch_space.known_magnitude(0.5) == pytest.approx(dc.magnitude_function(D, 0.5)[0],
                                                             rel=1e-12)


@pytest.mark.parametrize("order", [(0.5, 1.5, 1.0), (1.0, 0.5, 1.5), (1.5, 0.5, 1.0)])
def test_paired_scales_in_any_order_give_the_same_matrices(order):
    """The pairs are a hint: a smaller partner asked before its larger one, or the half first,
    still gets exp(-tD) (to the identity's round-off), never another scale's matrix."""
    D = dc.pairwise_distances(np.random.default_rng(6).normal(size=(90, 3)))
    buffer = dc.MagnitudeSpace(D)._solver.buffer
    buffer.announce_pairs([(1.5, 0.5)], 2.0, 1.0)
    upper = np.triu_indices(len(D))
    for t in order:
        np.testing.assert_allclose(buffer.similarity(t)[upper], np.exp(-t * D)[upper],
                                   rtol=4e-15)
    buffer.announce_pairs([], None, None)
    assert buffer._E_total is None and not buffer._stash
