"""The reference-free protocol written once (diversity_core.magnitude.sets.measure_sets): the same
numbers as the code paths it replaced, failures and warnings on the right member, chunks."""

from __future__ import annotations

import gc
import warnings
import weakref
from collections.abc import Sequence

import numpy as np
import pytest

from diversity_core import pairwise_distances
from diversity_core.magnitude import (
    GivenTCut,
    MagnitudeSpace,
    MagnitudeWarning,
    MemberWarning,
    ReferenceTCut,
    TCutRule,
    mag_areas,
)
from diversity_core.magnitude.sets import (
    MedianTCut,
    _member_warning,
    measure_sets,
    trapezoid_weights,
)
from diversity_core.magnitude.settings import MagnitudeSettings


def _text_like(n_sets=25, seed=0):
    """Sets of 10 'responses' in 48 dimensions (cosine), some with repeated responses, and one
    of identical responses (a single distinct point)."""
    rng = np.random.default_rng(seed)
    sets = []
    for i in range(n_sets):
        X = rng.normal(size=(10, 48)) * (0.2 + i / 10)
        if i % 4 == 0:
            X[3] = X[1]
        sets.append(X)
    sets.append(np.tile(rng.normal(size=(1, 48)), (10, 1)))
    return [pairwise_distances(X, "cosine") for X in sets]


@pytest.mark.parametrize("settings", [MagnitudeSettings(), MagnitudeSettings(integration="quad"),
                                      MagnitudeSettings(integration="trapezoid", n_ts=12)])
def test_the_text_experiments_arithmetic_bit_for_bit(settings):
    """The text experiment's old path: convergence scales of the sets with several distinct
    responses in one batch, settings.reference_free_t_cut of them, settings.mag_areas of all."""
    distances = _text_like()
    several = np.array([D.max() > 0 for D in distances])
    t_conv = np.full(len(distances), np.nan)
    t_conv[several] = settings.convergence_scales([D for D, k in zip(distances, several,
                                                                     strict=True) if k])
    t_cut = settings.reference_free_t_cut(convergence_scales=t_conv[several])
    areas = settings.mag_areas(distances, t_cut)

    result = measure_sets(distances, **settings.as_dict())
    assert result.t_cut == t_cut
    np.testing.assert_array_equal(result.t_conv, t_conv)
    np.testing.assert_array_equal(result.areas, areas)
    assert result.t_cut_rule == f"the median convergence scale of {several.sum()} sets; left " \
                                f"out, without one: set {len(distances)}"
    # The single distinct point: no convergence scale (data, on its own row), MagArea t_cut.
    last = len(distances) - 1
    assert result.n_distinct[last] == 1 and "single distinct point" in result.t_conv_failures[last]
    assert result.areas[last] == pytest.approx(t_cut)
    assert all(f is None for f in result.t_conv_failures[:last])


def _model_like(n_sets=70, n=80, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, 12)) * (1 + (i % 4) / 3) for i in range(n_sets)]


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_the_model_experiments_arithmetic_bit_for_bit(metric):
    """The model experiment's old path: chunks of 64 sets, convergence scales, the median, the
    functions on linspace(0, t_cut, n_ts), MagArea = functions @ trapezoid weights."""
    settings = MagnitudeSettings(n_ts=15)
    points = _model_like()
    chunks = [range(s, min(s + 64, len(points))) for s in range(0, len(points), 64)]
    t_conv = np.concatenate([settings.convergence_scales(
        [pairwise_distances(points[i], metric) for i in chunk]) for chunk in chunks])
    t_cut = settings.reference_free_t_cut(convergence_scales=t_conv)
    functions = np.empty((len(points), settings.n_ts))
    for chunk in chunks:
        functions[chunk.start:chunk.stop], ts = settings.magnitude_functions(
            [pairwise_distances(points[i], metric) for i in chunk], t_cut)
    areas = functions @ trapezoid_weights(ts)

    lazy = _Lazy(points, metric)
    result = measure_sets(lazy, **settings.as_dict(), functions=True,
                          area_rule="grid_trapezoid", chunk_size=64)
    assert result.t_cut == t_cut
    np.testing.assert_array_equal(result.t_conv, t_conv)
    np.testing.assert_array_equal(result.ts, ts)
    np.testing.assert_array_equal(result.functions, functions)
    np.testing.assert_array_equal(result.areas, areas)
    # Chunks: every member read once per pass, in order; never more than a chunk at once.
    assert lazy.reads == list(range(70)) * 2
    assert lazy.peak <= 64


def test_a_lazy_sequence_is_held_one_chunk_at_a_time():
    peaks = {}
    for chunk_size in (None, 8):
        lazy = _Lazy(_model_like(n_sets=30, n=20), "cosine")
        gc.collect()
        measure_sets(lazy, functions=True, chunk_size=chunk_size)
        gc.collect()
        peaks[chunk_size] = lazy.peak
        assert lazy.alive == 0
    # Unchunked, every matrix is held to the end; chunked, one chunk at a time.
    assert peaks == {None: 30, 8: 8}


class _Lazy(Sequence):
    """Distance matrices formed on access; counts reads and how many are alive at once (the
    matrix owns its memory: every view the engine keeps holds it alive)."""

    def __init__(self, points, metric):
        self.points, self.metric, self.reads = points, metric, []
        self.alive, self.peak = 0, 0

    def __len__(self):
        return len(self.points)

    def __getitem__(self, i):
        self.reads.append(i)
        D = pairwise_distances(self.points[i], self.metric)
        self.alive += 1
        self.peak = max(self.peak, self.alive)
        weakref.finalize(D, self._freed)
        return D

    def _freed(self):
        self.alive -= 1


def test_chunks_give_the_numbers_of_one_batch():
    distances = _text_like(n_sets=30, seed=3)
    whole = measure_sets(distances, functions=True, grid_beyond=0.5)
    chunked = measure_sets(distances, functions=True, grid_beyond=0.5, chunk_size=7)
    assert chunked.t_cut == whole.t_cut
    np.testing.assert_array_equal(chunked.t_conv, whole.t_conv)
    np.testing.assert_array_equal(chunked.ts, whole.ts)
    np.testing.assert_array_equal(chunked.functions, whole.functions)
    # Areas: the same to round-off (a member prepared afresh forgets its search's Mag(t_cut)).
    np.testing.assert_allclose(chunked.areas, whole.areas, rtol=1e-12)
    assert len(whole.ts) == 30 + 15 and whole.ts[29] == whole.t_cut


def _collinear(seed):
    """Points in two dimensions under the cosine distance: a fallback solver answers."""
    return np.random.default_rng(seed).normal(size=(60, 2))


def test_warnings_and_failures_land_on_their_member():
    rng = np.random.default_rng(0)
    members = [pairwise_distances(rng.normal(size=(12, 5)), "cosine") for _ in range(4)]
    members.insert(2, pairwise_distances(_collinear(0), "cosine"))  # warns (fallback solver)
    members.append(np.zeros((3, 3)))  # one distinct point: no convergence scale
    members.append(np.array([[0.0, -1.0], [-1.0, 0.0]]))  # invalid: negative distances
    members.append(None)  # no distances
    result = measure_sets(members, functions=True)
    warned = [i for i, w in enumerate(result.warnings) if w]
    assert warned == [2], result.warnings
    assert any("not positive definite" in w or "singular" in w for w in result.warnings[2])
    assert [i for i, f in enumerate(result.fallbacks) if f] == [2]
    assert result.fallbacks[2][0]["solver"] in ("ldl", "pinv")
    assert [i for i in range(len(members)) if result.t_conv_failures[i]] == [5, 6]
    assert "single distinct point" in result.t_conv_failures[5]
    assert "negative distances" in result.t_conv_failures[6] == result.area_failures[6]
    assert result.area_failures[5] is None and result.areas[5] == pytest.approx(result.t_cut)
    assert np.isnan(result.areas[[6, 7]]).all() and np.isnan(result.functions[[6, 7]]).all()
    assert result.failure(7) is None and result.n_distinct[7] == 0
    assert "left out, without one: set 6, set 7, set 8" in result.t_cut_rule
    assert np.isfinite(result.areas[:6]).all()


def test_the_engine_names_each_warnings_member_as_data():
    """The batch re-raises a member's warning as a MemberWarning (``member`` and ``text`` set
    when it is made), a subclass of its own category; the protocol reads them, never the
    message's wording."""
    rng = np.random.default_rng(0)
    members = [pairwise_distances(rng.normal(size=(12, 5)), "cosine") for _ in range(3)]
    members.insert(1, pairwise_distances(_collinear(0), "cosine"))  # warns (fallback solver)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mag_areas(members, 5.0, method="chebyshev", rtol=1e-6, n_ts=30)
    named = [w.message for w in caught if isinstance(w.message, MemberWarning)]
    assert named and {m.member for m in named} == {1}
    assert all(isinstance(m, MagnitudeWarning) and str(m) == f"member 1: {m.text}"
               for m in named)
    assert all(issubclass(w.category, MagnitudeWarning) for w in caught
               if isinstance(w.message, MemberWarning))  # filters on the category still match
    assert _member_warning(named[0], 4) == (1, named[0].text)
    assert _member_warning(UserWarning("an integral kept its error"), 1) == (
        0, "an integral kept its error")  # a one-member call: that member's
    assert _member_warning(UserWarning("unnamed"), 3) == (None, "unnamed")


def test_rules_given_median_and_pluggable():
    distances = _text_like(n_sets=6, seed=2)
    given = measure_sets(distances, 1.5)
    assert given.t_cut == 1.5 and given.t_cut_rule == "given"
    median = measure_sets(distances, MedianTCut(among=(0, 1, 2), names=tuple("abcdefg")))
    assert median.t_cut == float(np.median(median.t_conv[:3]))
    assert median.t_cut_rule == "the median convergence scale of 3 sets"

    class Smallest(TCutRule):  # a rule of one's own: one type, its needs declared
        def needs(self, m):
            return tuple(range(m))

        def __call__(self, t_conv, reasons):
            return float(np.nanmin(t_conv)), "the smallest convergence scale"

    result = measure_sets(distances, Smallest())
    assert result.t_cut == np.nanmin(result.t_conv)
    assert result.t_cut_rule == "the smallest convergence scale"
    reference = measure_sets(distances, ReferenceTCut(2, tuple("abcdef")))
    assert reference.t_cut == reference.t_conv[2]
    assert reference.t_cut_rule == "the convergence scale of the reference, c"
    assert measure_sets(distances, GivenTCut(1.5)).t_cut == given.t_cut
    with pytest.raises(ValueError, match="t_cut must be None, a number or a TCutRule"):
        measure_sets(distances, lambda t_conv, reasons: (1.0, "a bare function"))
    none = measure_sets([np.zeros((2, 2))])
    assert none.t_cut is None and "no set has a convergence scale" in none.t_cut_rule
    assert np.isnan(none.areas).all()


def test_agrees_with_single_spaces():
    distances = _text_like(n_sets=5, seed=4)[:5]
    settings = MagnitudeSettings()
    result = measure_sets(distances, functions=True)
    for i, D in enumerate(distances):
        space = MagnitudeSpace(D)
        assert result.t_conv[i] == pytest.approx(settings.convergence_scale(space), rel=1e-8)
        assert result.areas[i] == pytest.approx(settings.mag_area(space, result.t_cut), rel=1e-7)
        np.testing.assert_allclose(result.functions[i], space.magnitude_function(result.ts),
                                   rtol=1e-10)


@pytest.mark.parametrize("kwargs, match", [
    ({"t_cut": -1.0}, "t_cut must be a finite number > 0"),
    ({"t_cut": "median"}, "t_cut must be None, a number or a TCutRule"),
    ({"integration": "simpson"}, "integration options refused: method must be one of"),
    ({"integration_rtol": 0.0}, "integration options refused: rtol must be positive"),
    ({"area_rule": "grid"}, "area_rule must be one of"),
    ({"n_ts": 1}, "n_ts must be an integer >= 2"),
    ({"chunk_size": 0}, "chunk_size must be a positive integer"),
    ({"grid_beyond": -0.5}, "grid_beyond must be a finite number >= 0"),
])
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        measure_sets([np.array([[0.0, 1.0], [1.0, 0.0]])], **kwargs)
    with pytest.raises(ValueError, match="no sets"):
        measure_sets([])


def test_a_rule_that_returns_nonsense_is_refused():
    class Broken(TCutRule):
        def needs(self, m):
            return ()

        def __call__(self, t_conv, reasons):
            return float("nan"), "broken"

    with pytest.raises(ValueError, match="the t_cut rule gave"):
        measure_sets(_text_like(n_sets=2), Broken())
