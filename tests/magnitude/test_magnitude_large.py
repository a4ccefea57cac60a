"""The large-n path (diversity_core.magnitude._large) against the exact dense path, and the memory
estimate that refuses what does not fit."""

import warnings

import numpy as np
import pytest
from point_clouds import clustered

import diversity_core as dc
from diversity_core import _threads
from diversity_core import magnitude as mg
from diversity_core.magnitude import LargeMagnitudeSpace, _large
from diversity_core.magnitude._common import EXPONENT_FLOOR, FLOAT32_EXPONENT_FLOOR


@pytest.fixture
def small_blocks(monkeypatch):
    """Panels of 64 rows and blocks of 100 columns: several of each at test sizes."""
    monkeypatch.setattr(_large, "_PANEL_ROWS", 64)
    monkeypatch.setattr(_large, "_CHUNK_COLUMNS", 100)


@pytest.fixture(params=["compiled", "numpy"])
def panel_route(request, monkeypatch):
    """Both routes of the panel products: the compiled kernels (where built) and NumPy's."""
    if request.param == "numpy":
        monkeypatch.setattr(_large, "_compiled_panel_product32", None)
        monkeypatch.setattr(_large, "_compiled_panel_product64", None)
    elif _large._compiled_panel_product32 is None:
        pytest.skip("the compiled panel products are not built here")
    return request.param


@pytest.mark.parametrize("scale", [0.7, 30.0, 400.0])  # no floor, float32's, float64's too
def test_products_on_the_fly_are_those_of_the_stored_distances(small_blocks, panel_route, scale):
    X = clustered(333, 5, 1)  # 333: the last panel is short, no row a multiple of the lanes
    space = LargeMagnitudeSpace(X, threads=2)
    D = dc.pairwise_distances(X)
    D32 = np.zeros_like(D)
    for k, panel in enumerate(space._panels):
        p = k * _large._PANEL_ROWS
        D32[p:p + len(panel), p:] = panel
    D32 = np.triu(D32) + np.triu(D32, 1).T
    np.testing.assert_allclose(D32, D, rtol=2**-23, atol=1e-12)
    x = np.random.default_rng(2).normal(size=len(X))
    t = scale / space.D_max
    Z = np.exp(np.maximum(-t * D32, -EXPONENT_FLOOR))
    Zx, dZx, dZax = space._product64(t, x, derivative=True, absolute=True)
    np.testing.assert_allclose(Zx, Z @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dZx, (D32 * Z) @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dZax, (D32 * Z) @ np.abs(x), rtol=1e-12, atol=1e-12)
    Zx_only, dZax_only = space._product64(t, x, absolute=True)  # one column: the bound's
    np.testing.assert_allclose(Zx_only, Zx, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(dZax_only, dZax, rtol=1e-14, atol=1e-14)
    Z32 = np.exp(np.maximum(-t * D32, -FLOAT32_EXPONENT_FLOOR))
    y32 = space._product32(t, x.astype(np.float32))
    np.testing.assert_allclose(y32, Z32 @ x, rtol=1e-4, atol=1e-5 * np.abs(Z32 @ x).max())
    np.testing.assert_allclose(space._nn, np.sort(D + np.diag(np.full(len(X), np.inf)),
                                                  axis=1)[:, 0], rtol=1e-7)


def test_compiled_panel_products_refuse_what_they_cannot_read():
    kernels = pytest.importorskip("diversity_core.magnitude._kernels")
    panel = np.ones((4, 10), dtype=np.float32)
    x32, y32 = np.ones(10, dtype=np.float32), np.zeros(10, dtype=np.float32)
    kernels.panel_product32(panel, 0, -1.0, -46.0, x32, y32)  # a panel that fits: no error
    with pytest.raises(TypeError, match="float32"):
        kernels.panel_product32(panel.astype(np.float64), 0, -1.0, -46.0, x32, y32)
    with pytest.raises(ValueError, match="within x.s n entries"):
        kernels.panel_product32(panel, 1, -1.0, -46.0, x32, y32)  # columns 1:11 of 10
    with pytest.raises(ValueError, match="contiguous"):
        kernels.panel_product32(panel, 0, -1.0, -46.0, np.ones(20, dtype=np.float32)[::2], y32)
    x64, V = np.ones(10), np.ones((1, 10))
    kernels.panel_product64(panel, 0, -1.0, -345.0, x64, V, np.zeros((2, 10)))
    with pytest.raises(ValueError, match="k \\+ 1 rows"):
        kernels.panel_product64(panel, 0, -1.0, -345.0, x64, V, np.zeros((3, 10)))
    with pytest.raises(ValueError, match="within x.s n entries"):
        kernels.panel_product64(panel, 3, -1.0, -345.0, x64, V, np.zeros((2, 10)))


def test_products_run_on_the_threads_blas_allows():
    # With threads left to the space (as compare and score make it), the products'
    # shares ran one after the other, since the count was read after BLAS was limited to one
    # thread. Two shares meeting at a barrier prove they run at the same time.
    import threading

    from threadpoolctl import threadpool_limits

    if _threads.usable_cores() < 2:
        pytest.skip("needs two usable cores")
    space = LargeMagnitudeSpace(clustered(200, 3, 1))
    meet = threading.Barrier(2, timeout=10)
    with threadpool_limits(limits=2, user_api="blas"):
        assert space._thread_count() == 2
        idents = space._map(lambda _: (meet.wait(), threading.get_ident())[1], [0, 1])
    assert len(set(idents)) == 2


@pytest.mark.parametrize(("metric", "X"), [
    ("euclidean", clustered(500, 6, 3)),
    ("cosine", np.random.default_rng(4).normal(size=(400, 48)) + 0.3),
])
def test_large_path_matches_the_exact_path_within_its_budget(metric, X):
    """At n <= 10,000 the exact float64 path is the yardstick: the convergence scale agrees to
    the large path's accuracy, and MagArea's true error is within the budget it reports."""
    large = LargeMagnitudeSpace(X, metric)
    exact = dc.MagnitudeSpace(dc.pairwise_distances(X, metric))
    t_large, t_exact = large.convergence_scale(), exact.convergence_scale()
    assert t_large == pytest.approx(t_exact, rel=1e-6)
    for rtol in (1e-4, 1e-5):
        with warnings.catch_warnings():
            warnings.simplefilter("error", mg.MagnitudeWarning)
            area = large.mag_area(t_large, rtol=rtol)
        budget = large.area_error
        assert budget["relative"] <= rtol
        truth = exact.mag_area(t_large, rtol=1e-11)
        assert abs(area / truth - 1) <= budget["relative"]
    # Every evaluated scale: the value is within its recorded error of the exact one.
    for record in large.records[-5:]:
        error = abs(record["mag"] - exact.magnitude(record["t"]))
        assert error <= record["solver_error"] + record["distance_error"] + 1e-9 * record["mag"]


def test_a_new_scale_starts_from_the_polynomial_through_the_nearest_weightings(monkeypatch):
    """As on the dense path: the first product at a new scale is taken at the cubic through
    the weightings of the four nearest solved scales, and at a scale solved before at its own
    weighting; the kept weightings are counted in the path's memory."""
    space = LargeMagnitudeSpace(clustered(300, 4, 6))
    a, b, c, d = np.random.default_rng(9).normal(size=(4, space.n_unique))

    def cubic(s):
        return a + s * (b + s * (c + s * d))

    space._weightings = {s: cubic(s) for s in (0.5, 1.0, 1.5, 2.0, 8.0)}
    starts = []
    product = space._product64

    def first_product(t, x, **kwargs):
        starts.append(x.copy())
        return product(t, x, **kwargs)

    monkeypatch.setattr(space, "_product64", first_product)
    space.magnitude(1.2)
    np.testing.assert_allclose(starts[0], cubic(1.2), rtol=1e-12)
    solved = space._weightings[1.2]
    starts.clear()
    space.magnitude_and_derivative(1.2)
    np.testing.assert_array_equal(starts[0], solved)
    counted, kept = _large.large_memory(30_000, 32), _large._KEPT_WEIGHTINGS
    monkeypatch.setattr(_large, "_KEPT_WEIGHTINGS", 0)
    assert kept > 0 and counted - _large.large_memory(30_000, 32) == kept * 8 * 30_000


def test_a_derivative_asked_after_the_value_keeps_the_value_s_accuracy():
    """The Hermite rules ask dMag/dt at a scale the search has just solved (t_cut): the warm
    start is then that scale's own weighting, whose recorded error stands; refining it again
    makes no progress, which must not read as an unresolved scale (an infinite error, a
    warning, a MagArea reported as a lower bound)."""
    X = clustered(600, 8, 3)
    large = LargeMagnitudeSpace(X)
    exact = dc.MagnitudeSpace(dc.pairwise_distances(X))
    t = large.convergence_scale()
    with warnings.catch_warnings():
        warnings.simplefilter("error", mg.MagnitudeWarning)
        mag, dmag = large.magnitude_and_derivative(t)
        area = large.mag_area(t, method="hermite_log")
    assert np.isfinite(large.records[-1]["solver_error"]) or large.records[-1]["t"] != t
    assert mag == pytest.approx(exact.magnitude(t), rel=1e-7)
    assert dmag == pytest.approx(exact.magnitude_and_derivative(t)[1], rel=1e-5)
    assert area == pytest.approx(exact.mag_area(t, rtol=1e-11), rel=1e-6)


def test_duplicates_are_merged_in_input_order(small_blocks):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(150, 3))
    near = X[7] + 1e-14  # within 1e-12 of the largest distance: the same point
    Xd = np.vstack([X, X[[3, 3]], near[None]])
    large = LargeMagnitudeSpace(Xd)
    assert (large.n_points, large.n_unique) == (153, 150)
    dense = dc.MagnitudeSpace(dc.pairwise_distances(Xd))
    assert dense.n_unique == 150
    t = 2.0
    assert large.magnitude(t) == pytest.approx(dense.magnitude(t), rel=1e-7)
    w = large.weights(t)
    assert w.shape == (153,)
    np.testing.assert_allclose(w[[3, 150, 151]], w[3])  # three copies share the weight
    assert w[7] == pytest.approx(w[152])
    # The large path's contract is on Mag (to solver_rtol · n); its weights come along.
    np.testing.assert_allclose(w, dense.weights(t), rtol=1e-3, atol=1e-5)


def test_memory_estimate_and_refusal():
    dense = mg.magnitude_memory(10_000, 16)
    large = mg.magnitude_memory(50_000, 512)
    assert mg.magnitude_memory(10_000, 16, path="dense") == dense
    assert 2.0e9 < dense < 2.5e9  # 21 bytes per pair
    assert 5.0e9 < large < 7.5e9  # 2 bytes per pair, plus points and per-thread blocks
    assert mg.magnitude_memory(100_000, 512) > 3.3 * large  # quadratic
    X = np.zeros((20_001, 2))  # never looked at: refused before any work
    with pytest.raises(MemoryError) as caught:
        mg.magnitude_space(X, memory_limit=2**30)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("magnitude of 20,001 points in 2 dimensions needs about 1.")
    assert "large path" in message and "1.0 GiB allowed" in message
    with pytest.raises(ValueError, match="path must be"):
        mg.magnitude_memory(10, 2, path="gpu")
    # The rule both use, public so that callers (compare) plan with the engine's own choice.
    assert mg.space_path(10_000) == "dense" and mg.space_path(10_001) == "large"
    assert mg.space_path(50, "large") == "large" and mg.space_path(50_000, "dense") == "dense"


def test_magnitude_space_picks_the_path():
    X = clustered(300, 4, 6)
    space = mg.magnitude_space(X)
    assert isinstance(space, dc.MagnitudeSpace)
    large = mg.magnitude_space(X, path="large")
    assert isinstance(large, LargeMagnitudeSpace)
    assert mg.convergence_scale(large) == pytest.approx(mg.convergence_scale(space), rel=1e-6)
    with pytest.raises(ValueError, match="euclidean and cosine"):
        LargeMagnitudeSpace(X, "cityblock")
