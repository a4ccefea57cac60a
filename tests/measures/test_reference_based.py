"""PRDC against the ``prdc`` package; MMD against hand-computed and brute-force values."""

import math

import numpy as np
import pytest

import diversity_core
from diversity_core import mmd_linear, mmd_rbf, prdc
from diversity_core.measures.reference_based import GGM_SIGMA_MULTIPLIERS

KEYS = ("precision", "recall", "density", "coverage")


def _data(n, d, seed=0, shift=0.0):
    return np.random.default_rng(seed).normal(size=(n, d)) + shift


def test_public_names():
    for name in ("prdc", "mmd_rbf", "mmd_linear"):
        assert name in diversity_core.__all__


@pytest.mark.parametrize(
    "n_real, n_fake, d, k, shift",
    [(100, 100, 8, 5, 0.0), (150, 90, 16, 10, 0.5), (60, 200, 3, 3, 1.0), (40, 40, 64, 1, 0.2)],
)
def test_prdc_matches_package(n_real, n_fake, d, k, shift, capsys):
    ref = pytest.importorskip("prdc")
    real = _data(n_real, d, seed=1)
    fake = _data(n_fake, d, seed=2, shift=shift) * 1.3
    expected = ref.compute_prdc(real, fake, k)
    capsys.readouterr()  # the package prints the set sizes
    ours = prdc(real, fake, k)
    for key in KEYS:
        assert ours[key] == pytest.approx(float(expected[key]), rel=1e-6, abs=1e-12), key
    # Small blocks give exactly the same counts.
    assert prdc(real, fake, k, block_size=7) == ours


def test_prdc_hand_computed_1d():
    real = np.array([[0.0], [1.0], [2.0], [3.0]])  # k=1 radii: 1, 1, 1, 1
    fake = np.array([[0.5], [10.0], [2.0]])        # k=1 radii: 1.5, 8, 1.5
    out = prdc(real, fake, 1)
    # precision: 0.5 and 2.0 lie in some real ball; 10 does not.
    assert out["precision"] == pytest.approx(2 / 3)
    # density: 0.5 is inside the balls of 0 and 1; 2.0 inside those of 2 only (1 and 3: d = 1,
    # strict); 10 in none -> (2 + 1) / (1 * 3).
    assert out["density"] == pytest.approx(1.0)
    # coverage: balls of 0, 1, 2 hold a fake point (0.5, 0.5, 2.0); ball of 3: nearest fake at 1.
    assert out["coverage"] == pytest.approx(3 / 4)
    # recall: every real point is inside some fake ball (radius 8 around 10 reaches 3 and 2).
    assert out["recall"] == pytest.approx(1.0)


def test_prdc_identical_points_give_zero_strict_inequality():
    X = np.ones((10, 3))
    assert prdc(X, X, 3) == {key: 0.0 for key in KEYS}


def test_prdc_same_set_is_perfect_coverage():
    X = _data(80, 5, seed=3)
    out = prdc(X, X, 5)
    assert out["coverage"] == 1.0 and out["precision"] == 1.0 and out["recall"] == 1.0


def test_prdc_bad_input():
    X = _data(10, 3)
    with pytest.raises(ValueError, match="k=10 must be smaller than the number of points in real"):
        prdc(X, _data(20, 3), 10)
    with pytest.raises(ValueError, match="fake"):
        prdc(_data(20, 3), X, 12)
    with pytest.raises(ValueError, match="mismatched dimensions"):
        prdc(X, _data(10, 4), 3)
    with pytest.raises(ValueError, match="NaN"):
        prdc(np.vstack([X, [[np.nan, 0, 0]]]), X, 3)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        prdc(X, X, 0)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        prdc(X, X, 2.5)


def _mmd_brute(X, Y, mults=GGM_SIGMA_MULTIPLIERS):
    def sq(A, B):
        return ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)

    dxx, dyy, dxy = sq(X, X), sq(Y, Y), sq(X, Y)
    base = math.sqrt(dxy.mean())
    vals = []
    for m in mults:
        g = 1 / (2 * (m * base) ** 2)
        vals.append(np.exp(-g * dxx).mean() + np.exp(-g * dyy).mean() - 2 * np.exp(-g * dxy).mean())
    return max(vals), np.array(vals)


def test_mmd_rbf_hand_computed():
    # One point each at distance 1: base sigma 1; MMD²_σ = 2 - 2 exp(-1 / (2σ²)), largest (2) for
    # the smallest σ = 0.01.
    value, per_sigma = mmd_rbf(np.array([[0.0]]), np.array([[1.0]]), return_all=True)
    assert value == pytest.approx(2.0, rel=1e-12)
    expected = [2 - 2 * math.exp(-1 / (2 * m**2)) for m in GGM_SIGMA_MULTIPLIERS]
    np.testing.assert_allclose(per_sigma, expected, rtol=1e-12, atol=1e-15)
    # The same multiset: MMD² = 0.
    X = np.array([[0.0, 1.0], [2.0, 0.0]])
    assert mmd_rbf(X, X[::-1]) == pytest.approx(0.0, abs=1e-14)
    # All points coincide: zero, no division by zero.
    assert mmd_rbf(np.zeros((3, 2)), np.zeros((2, 2))) == 0.0


def test_mmd_rbf_matches_brute_force():
    X, Y = _data(30, 4, seed=4), _data(25, 4, seed=5, shift=0.3)
    value, per_sigma = mmd_rbf(X, Y, return_all=True)
    b_value, b_per_sigma = _mmd_brute(X, Y)
    assert value == pytest.approx(b_value, rel=1e-10)
    np.testing.assert_allclose(per_sigma, b_per_sigma, rtol=1e-9, atol=1e-14)
    assert mmd_rbf(X, Y, block_size=4) == pytest.approx(value, rel=1e-12)
    assert mmd_rbf(X, Y) == pytest.approx(mmd_rbf(Y, X), rel=1e-12)


def test_mmd_linear_hand_computed():
    X = np.array([[0.0, 0.0], [2.0, 0.0]])  # mean (1, 0)
    Y = np.array([[0.0, 1.0]])              # mean (0, 1)
    assert mmd_linear(X, Y) == pytest.approx(2.0)
    assert mmd_linear(X, X + 0.0) == 0.0


def test_mmd_bad_input():
    with pytest.raises(ValueError, match="mismatched dimensions"):
        mmd_rbf(_data(3, 2), _data(3, 3))
    with pytest.raises(ValueError, match="mismatched dimensions"):
        mmd_linear(_data(3, 2), _data(3, 3))
    with pytest.raises(ValueError, match="sigma_multipliers"):
        mmd_rbf(_data(3, 2), _data(3, 2), sigma_multipliers=[0.0])
    with pytest.raises(ValueError, match="inf"):
        mmd_linear(np.array([[np.inf, 0.0]]), _data(3, 2))


def _prdc_naive(real, fake, k):
    from scipy.spatial.distance import cdist

    def radii(A):
        return np.sort(cdist(A, A, "sqeuclidean"), axis=1)[:, k]

    r, s = radii(real), radii(fake)
    D = cdist(real, fake, "sqeuclidean")
    inside = D < r[:, None]
    return {
        "precision": inside.any(axis=0).mean(),
        "recall": (D < s[None, :]).any(axis=1).mean(),
        "density": inside.sum() / (k * len(fake)),
        "coverage": inside.any(axis=1).mean(),
    }


@pytest.mark.parametrize("max_undecided", [0.0, 0.01, 1.0])  # always / sometimes / never float64
def test_prdc_exact_on_ties_duplicates_and_offsets(max_undecided, monkeypatch):
    from diversity_core.measures import reference_based

    monkeypatch.setattr(reference_based, "_MAX_UNDECIDED", max_undecided)
    rng = np.random.default_rng(6)
    # Integer grid points with duplicates: many exact ties between distances and radii.
    grid_real = rng.integers(0, 4, size=(120, 3)).astype(float)
    grid_fake = rng.integers(0, 4, size=(90, 3)).astype(float)
    # Far from the origin: the plain expansion |a|² + |b|² - 2ab loses digits there.
    far_real = _data(100, 20, seed=7) + 1e4
    far_fake = _data(80, 20, seed=8, shift=0.2) + 1e4
    for real, fake, k in ((grid_real, grid_fake, 4), (far_real, far_fake, 5)):
        ours = prdc(real, fake, k, block_size=17)
        naive = _prdc_naive(real, fake, k)
        for key in KEYS:
            assert ours[key] == pytest.approx(naive[key], rel=1e-12), key


def test_prdc_extreme_scales_and_smallest_sets():
    real, fake = _data(40, 3, seed=9), _data(40, 3, seed=10, shift=0.3)
    expected = _prdc_naive(real, fake, 3)
    for s in (1e-300, 1e-30, 1e30, 1e200):  # squared distances would under/overflow float64
        ours = prdc(real * s, fake * s, 3)
        for key in KEYS:
            assert ours[key] == pytest.approx(expected[key], rel=1e-12), (s, key)
    # k = n - 1 is valid (the prdc package fails there: argpartition out of bounds).
    real, fake = _data(6, 2, seed=11), _data(7, 2, seed=12)
    ours = prdc(real, fake, 5)
    naive = _prdc_naive(real, fake, 5)
    for key in KEYS:
        assert ours[key] == pytest.approx(naive[key], rel=1e-12), key
