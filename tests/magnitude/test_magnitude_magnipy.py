"""Agreement of diversity_core.magnitude with the authors' reference library magnipy 1.0.0.

magnipy runs in its own virtualenv (tests/support/magnipy_bridge.py); all of this module's magnipy
work is sent in ONE batch (the ``reference`` fixture): starting magnipy's interpreter imports torch.

What is compared, on seeded random point clouds (n = 20, 100, 300; d = 5) under the euclidean,
cosine and cityblock distances — data on which both libraries are well defined (distinct points,
distances far below exp's underflow, no Z + 0.01 I retries on magnipy's side):

* magnitude at magnipy's default scales linspace(0, t_conv, 30): relative 1e-7;
* the convergence scale Mag(t) = 0.95 n: relative 1e-4 (magnipy's toms748 stops at rtol 1e-5);
* MagArea with magnipy's convention (trapezoid on those 30 scales): relative 1e-7;
* the reference-free protocol of ``Diversipy`` (t_cut = median t_conv, area / t_cut).

The last tests document where magnipy goes wrong and what we do instead (duplicates, the
Z + 0.01 I retry, parallel vectors under the cosine distance, underflow of exp(-D)).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from diversity_core import (
    convergence_scale,
    mag_area,
    magnitude_function,
    magnitude_weights,
    pairwise_distances,
    reference_free_t_cut,
)
from diversity_core.magnitude import MagnitudeWarning

pytestmark = pytest.mark.slow

SIZES = (20, 100, 300)
METRICS = ("euclidean", "cosine", "cityblock")
CASES = [(metric, n) for metric in METRICS for n in SIZES]
DIM = 5
SEED = 20241210


def _cloud(metric: str, n: int) -> np.ndarray:
    rng = np.random.default_rng([SEED, n, METRICS.index(metric)])
    return rng.normal(size=(n, DIM))


def _protocol_spaces() -> list[np.ndarray]:
    rng = np.random.default_rng([SEED, 1])
    return [s * rng.normal(size=(50, DIM)) for s in (0.5, 0.75, 1.0, 1.5, 2.0)]


def _duplicates():
    """60 distinct points plus copies of three of them, shuffled."""
    rng = np.random.default_rng([SEED, 2])
    X = rng.normal(size=(60, 4))
    X = np.vstack([X, X[[3, 7, 11]]])
    return X[rng.permutation(len(X))]


def _parallel_vectors():
    """60 points plus positive multiples of two of them: cosine distance 0, but distinct rows."""
    rng = np.random.default_rng([SEED, 3])
    X = rng.normal(size=(60, 4))
    return X, np.vstack([X, 2.5 * X[[3, 7]]])


def _wide_line():
    """25 points on [0, 2000]: distances up to ~2000, far beyond exp's underflow at ~745."""
    rng = np.random.default_rng([SEED, 4])
    return np.sort(rng.uniform(0.0, 2000.0, 25)).reshape(-1, 1)


PITFALL_TS = np.array([0.5, 1.0, 2.0])
COSINE_TS = np.array([1.0, 5.0, 20.0])
LINE_TS = np.array([1e-3, 1e-2, 0.1, 1.0])


@pytest.fixture(scope="module")
def reference(magnipy):
    """Everything this module needs from magnipy, computed in one worker call."""
    jobs, names = [], []

    def add(name, **job):
        names.append(name)
        jobs.append(job)

    for metric, n in CASES:
        add((metric, n), X=_cloud(metric, n), metric=metric, default=True)
    add("protocol", kind="diversipy", Xs=_protocol_spaces(), metric="euclidean")
    X_dup = _duplicates()
    add("dup_X", X=X_dup, metric="euclidean", default=True, ts=PITFALL_TS, weights=True)
    add("dup_D", D=pairwise_distances(X_dup), ts=PITFALL_TS)
    add("parallel", X=_parallel_vectors()[1], metric="cosine", ts=COSINE_TS)
    for i, t in enumerate(LINE_TS):  # one job per scale: magnipy raises at some of them
        add(("line", i), X=_wide_line(), metric="euclidean", ts=np.array([t]))
    result = magnipy.run_magnipy({"jobs": jobs}, threads=1)  # small matrices: 1 thread is fastest
    return dict(zip(names, result["jobs"], strict=True))


def _no_magnitude_warning(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", MagnitudeWarning)
        return fn(*args, **kwargs)


# ------------------------------------------------------------------------------------------
# Agreement where both are well defined
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("metric", "n"), CASES)
def test_magnitude_function_matches_magnipy(reference, metric, n):
    ref = reference[(metric, n)]
    assert "error" not in ref, ref.get("error")
    assert ref["n_perturbed"] == 0, "magnipy retried with Z + 0.01 I: not a fair comparison"
    assert ref["n"] == n
    D = pairwise_distances(_cloud(metric, n), metric)
    ours = _no_magnitude_warning(magnitude_function, D, ref["default_ts"])
    assert ref["default_ts"].shape == (30,) and ref["default_ts"][0] == 0.0
    np.testing.assert_allclose(ours, ref["default_mag"], rtol=1e-7, atol=0)


@pytest.mark.parametrize(("metric", "n"), CASES)
def test_convergence_scale_matches_magnipy(reference, metric, n):
    ref = reference[(metric, n)]
    D = pairwise_distances(_cloud(metric, n), metric)
    ours = _no_magnitude_warning(convergence_scale, D)
    assert ours == pytest.approx(ref["t_conv"], rel=1e-4)
    # ... and ours is the more accurate root of Mag(t) = 0.95 n.
    goal = 0.95 * n
    err_ours, err_theirs = np.abs(magnitude_function(D, [ours, ref["t_conv"]]) - goal)
    assert err_ours <= max(err_theirs, 1e-9 * goal)


@pytest.mark.parametrize(("metric", "n"), CASES)
def test_trapezoid_mag_area_matches_magnipy(reference, metric, n):
    """magnipy's MagArea = trapezoid rule on linspace(0, t_conv, 30), not divided by t_cut."""
    ref = reference[(metric, n)]
    D = pairwise_distances(_cloud(metric, n), metric)
    ours = mag_area(D, ref["t_conv"], method="trapezoid", n_ts=30)
    assert ours == pytest.approx(ref["mag_area"], rel=1e-7)
    # The exact integral (our default) differs from the 30-point rule by a fraction of a percent.
    exact = mag_area(D, ref["t_conv"])
    assert abs(exact - ref["mag_area"]) < 1e-3 * exact


def test_reference_free_protocol_matches_diversipy(reference):
    """Diversipy.MagAreas(): t_cut = median of the t_conv, trapezoid on 30 scales, / t_cut."""
    ref = reference["protocol"]
    Ds = [pairwise_distances(X) for X in _protocol_spaces()]
    ours_t_convs = [convergence_scale(D) for D in Ds]
    np.testing.assert_allclose(ours_t_convs, ref["t_convs"], rtol=1e-4)
    assert reference_free_t_cut(Ds) == pytest.approx(ref["t_cut"], rel=1e-4)
    ours = [mag_area(D, ref["t_cut"], method="trapezoid", n_ts=30) / ref["t_cut"] for D in Ds]
    np.testing.assert_allclose(ours, ref["mag_areas"], rtol=1e-7)


# ------------------------------------------------------------------------------------------
# Documented pitfalls of magnipy: what differs and why
# ------------------------------------------------------------------------------------------


def test_pitfall_duplicates_order_and_target(reference):
    """Duplicate points: values and convergence scales agree, the weights' order does not.

    magnipy drops duplicates with np.unique(X, axis=0), which SORTS the rows: its weights belong
    to the sorted unique points, not to the input. We keep input order and share a duplicated
    point's weight among its copies. Both convergence targets are 0.95 * n_unique.
    """
    ref = reference["dup_X"]
    X = _duplicates()
    D = pairwise_distances(X)
    n, n_unique = len(X), ref["n"]
    assert (n, n_unique) == (63, 60)
    # Twin property: same values as magnipy, at its scales and at the extra ones.
    np.testing.assert_allclose(magnitude_function(D, ref["default_ts"]), ref["default_mag"],
                               rtol=1e-9)
    np.testing.assert_allclose(magnitude_function(D, PITFALL_TS), ref["mag"], rtol=1e-9)
    # Weights: ours in input order; summed over copies they are magnipy's sorted-unique weights.
    uniq, inverse = np.unique(X, axis=0, return_inverse=True)
    for j, t in enumerate(PITFALL_TS):
        w = magnitude_weights(D, t)
        assert w.shape == (n,)
        merged = np.bincount(inverse.ravel(), weights=w, minlength=len(uniq))
        np.testing.assert_allclose(merged, ref["weights"][:, j], rtol=1e-7, atol=1e-10)
        assert not np.allclose(w[:n_unique], ref["weights"][:, j])  # orders differ
    # Convergence target: distinct points, in both.
    assert convergence_scale(D) == pytest.approx(ref["t_conv"], rel=1e-4)


def test_pitfall_precomputed_duplicates_perturbed(reference):
    """Given a distance matrix with duplicates, magnipy does not de-duplicate: Cholesky fails and
    it silently retries with Z + 0.01 I, which changes the value (here by ~0.4 % at t = 0.5)."""
    ref = reference["dup_D"]
    assert ref["n_perturbed"] >= 1
    ours = magnitude_function(pairwise_distances(_duplicates()), PITFALL_TS)
    np.testing.assert_allclose(ours, reference["dup_X"]["mag"], rtol=1e-9)  # twin property
    rel = np.abs(ref["mag"] / ours - 1)
    assert rel.max() > 1e-3


def test_pitfall_cosine_parallel_vectors(reference):
    """x and 2.5 x are distinct rows (np.unique keeps both) at cosine distance 0: magnipy's Z is
    singular at every scale and all its values come from Z + 0.01 I. We merge the copies."""
    ref = reference["parallel"]
    assert ref["n_perturbed"] == len(COSINE_TS)
    X, X_parallel = _parallel_vectors()
    ours = magnitude_function(pairwise_distances(X_parallel, "cosine"), COSINE_TS)
    np.testing.assert_allclose(
        ours, magnitude_function(pairwise_distances(X, "cosine"), COSINE_TS), rtol=1e-10
    )
    assert np.abs(ref["mag"] / ours - 1).max() > 1e-3


def test_pitfall_exp_underflow_of_large_distances(reference):
    """magnipy forms Z = exp(-D) once and evaluates Z**t: for distances beyond ~745, exp(-D) is 0
    (and below ~708 subnormal), so small scales are wrong or fail. The closed form of magnitude on
    the real line, 1 + sum tanh(t * gap / 2), shows ours is exact there."""
    x = _wide_line()
    gaps = np.diff(x[:, 0])
    exact = np.array([1 + np.tanh(t * gaps / 2).sum() for t in LINE_TS])
    ours = magnitude_function(pairwise_distances(x), LINE_TS)
    np.testing.assert_allclose(ours, exact, rtol=1e-12)
    theirs = [reference[("line", i)] for i in range(len(LINE_TS))]
    assert "error" in theirs[0]  # Cholesky of exp(-D)**0.001 fails, even after + 0.01 I
    assert abs(theirs[1]["mag"][0] / exact[1] - 1) > 1e-5  # t = 0.01: wrong in the 5th digit
    np.testing.assert_allclose([r["mag"][0] for r in theirs[2:]], exact[2:], rtol=1e-9)
