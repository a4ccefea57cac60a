"""Extreme scales, constant data and complex numbers: every measure gives the right number or a
ValueError that says why, never a silent wrong value."""

import numpy as np
import pytest

import diversity_core as dc
from diversity_core._validation import unit_rows
from diversity_core.measures.distances import pairwise_distances

RNG = np.random.default_rng(0)
NORMAL = RNG.normal(size=(50, 5))


@pytest.mark.parametrize("scale", [1e200, 1e300, 1e-300, 1e-200, 2.0**-1000, 1e78, 1e-78])
def test_cosine_measures_and_isoscore_ignore_the_scale(scale):
    """50 x 5 normal data x 1e200 gave Vendi 1, AvgSim 0, DCScore 1, GMStds inf; x 1e-300 was
    diagnosed as zero vectors; x 1e78 gave IsoScore 0.0625 instead of 0.888 (the norm of the
    variances overflowed)."""
    X = NORMAL * scale
    assert dc.vendi_score(X) == pytest.approx(dc.vendi_score(NORMAL), rel=1e-12)
    assert dc.avg_sim(X) == pytest.approx(dc.avg_sim(NORMAL), abs=1e-15)
    assert dc.dc_score(X) == pytest.approx(dc.dc_score(NORMAL), rel=1e-12)
    assert dc.iso_score(X) == pytest.approx(dc.iso_score(NORMAL), rel=1e-12)
    assert dc.gm_stds(X) == pytest.approx(dc.gm_stds(NORMAL) * scale, rel=1e-12)
    D, D0 = pairwise_distances(X, "cosine"), pairwise_distances(NORMAL, "cosine")
    np.testing.assert_allclose(D, D0, rtol=0, atol=1e-15)
    assert dc.mag_area(D, dc.convergence_scale(D)) == pytest.approx(
        dc.mag_area(D0, dc.convergence_scale(D0)), rel=1e-8)
    Y = RNG.normal(size=(40, 5))
    assert dc.prdc(Y * scale, X, 5) == dc.prdc(Y, NORMAL, 5) or scale != 2.0**-1000
    assert dc.mmd_rbf(X, Y * scale) == pytest.approx(dc.mmd_rbf(NORMAL, Y), rel=1e-9)


@pytest.mark.parametrize("scale", [1e150, 1e-150, 2.0**900, 2.0**-900])
def test_euclidean_distances_and_magnitude_follow_the_scale(scale):
    D0 = pairwise_distances(NORMAL)
    D = pairwise_distances(NORMAL * scale)
    np.testing.assert_allclose(D, D0 * scale, rtol=1e-14)
    # Mag_{sX}(t) = Mag_X(s t): convergence scale / s, MagArea up to it / s.
    assert dc.convergence_scale(D) == pytest.approx(dc.convergence_scale(D0) / scale, rel=1e-8)
    assert dc.mag_area(D, dc.convergence_scale(D)) == pytest.approx(
        dc.mag_area(D0, dc.convergence_scale(D0)) / scale, rel=1e-7)


def test_prdc_near_the_float64_limit():
    """Data of 1e307: the centring sums overflowed into an IndexError traceback."""
    assert dc.prdc(NORMAL * 1e307, NORMAL[::-1] * 1e307, 5) == dc.prdc(NORMAL, NORMAL[::-1], 5)


def test_values_beyond_float64_are_errors_not_inf():
    with pytest.raises(ValueError, match="exceed the float64 range"):
        pairwise_distances(np.array([[-1e308, 0.0], [1e308, 0.0]]))  # 2e308 apart
    with pytest.raises(ValueError, match="MMD² \\(linear\\) is inf"):
        dc.mmd_linear(NORMAL * 1e200, NORMAL * 1e200 + 1e200)
    assert dc.mmd_linear(NORMAL * 1e100, (NORMAL + 1) * 1e100) == pytest.approx(
        dc.mmd_linear(NORMAL, NORMAL + 1) * 1e200, rel=1e-12)
    with pytest.raises(ValueError, match="linear kernel divided by tau"):
        dc.dc_score(NORMAL * 1e200, kernel="linear")
    # RBF: extreme data, kernel of the data as given (gamma = 1/d): K = I for points this far
    # apart, so every P_ii = e / (e + n - 1).
    assert dc.dc_score(NORMAL * 1e200, kernel="rbf") == pytest.approx(50 * np.e / (np.e + 49))
    k = 310
    assert dc.dc_score(NORMAL * 2.0**k, kernel="rbf", gamma=0.3 * 4.0**-k) == pytest.approx(
        dc.dc_score(NORMAL, kernel="rbf", gamma=0.3), rel=1e-12)
    with pytest.raises(ValueError, match="GMStds"):
        dc.gm_stds(np.array([[-1.5e308, -1.5e308], [1.5e308, 1.5e308]]))  # sd 2.1e308


def test_normal_data_give_bitwise_the_same_values():
    """The safe normalisation changes no bit where the plain one does not overflow."""
    for X in (NORMAL, np.abs(RNG.normal(size=(30, 2048))), RNG.uniform(1e-3, 1, size=(20, 7))):
        assert np.array_equal(unit_rows(X), X / np.linalg.norm(X, axis=1, keepdims=True))


def test_rows_beyond_the_safe_range_are_rescaled_to_the_same_bits():
    """Rows of every scale go through the rescaling as soon as one row lies outside the range
    where plain division is safe; where plain division is exact as well (2^±250: squares and
    sums still normal), both paths give the same bits, row by row."""
    X = np.abs(RNG.normal(size=(6, 50))) + 0.1
    for k in (250, -250):
        mixed = np.vstack([X, X[:2] * 2.0**k])  # one scale needs the rescaling
        assert np.abs(mixed).max(axis=1).max() > 2.0**200 or \
            np.abs(mixed).max(axis=1).min() < 2.0**-200
        plain = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
        assert np.array_equal(unit_rows(mixed), plain)
        assert np.array_equal(unit_rows(mixed)[:6], unit_rows(X))


def test_duplicate_directions_are_exactly_zero_apart():
    X = np.array([[1.0, 1.0], [1.0, 1.0], [3.0, 3.0], [0.1, 0.3]])
    D = pairwise_distances(X, "cosine")
    assert D[0, 1] == D[0, 2] == D[1, 2] == 0.0 and D[0, 3] > 0
    assert pairwise_distances(X[:2], "cosine", Y=X[2:3]).tolist() == [[0.0], [0.0]]
    with pytest.raises(ValueError, match="single distinct point"):
        dc.convergence_scale(pairwise_distances(X[:3], "cosine"))


@pytest.mark.parametrize("X", [np.ones((2, 3)), np.full((20, 4), 0.1), np.full((20, 4), 1e-300),
                               np.full((3, 2), 7e250)],
                         ids=["two identical", "twenty 0.1", "tiny", "huge"])
def test_isoscore_of_constant_data_is_always_an_error(X):
    """Two identical points raised, twenty printed 4.4e-17, np.full((20, 4), 0.1) gave 0.0."""
    with pytest.raises(ValueError, match="constant .*IsoScore is 0/0"):
        dc.iso_score(X)


def test_isoscore_constant_feature_has_exactly_zero_variance():
    X = RNG.normal(size=(30, 3))
    X_const = X.copy()
    X_const[:, 2] = 0.1  # its mean is not exactly 0.1: the variance must still be 0
    X_zero = X.copy()
    X_zero[:, 2] = 0.0
    assert dc.iso_score(X_const) == dc.iso_score(X_zero)


def test_gm_stds_of_a_tiny_feature():
    """A feature of 1e-200 beside features of order 1: its variance underflowed to 0."""
    X = NORMAL.copy()
    X[:, 0] *= 1e-200
    expected = np.exp(np.mean(np.log(NORMAL.std(axis=0, ddof=1)) + np.r_[np.log(1e-200), 0, 0,
                                                                          0, 0]))
    assert dc.gm_stds(X) == pytest.approx(expected, rel=1e-12)


def test_magnitude_tolerances_are_relative():
    D = pairwise_distances(NORMAL[:10])
    for scale in (1e-300, 1e-20):
        space = dc.MagnitudeSpace(D * scale)
        assert space.n_unique == 10  # an absolute tolerance merged them all into one point
    asymmetric = D.copy()
    asymmetric[0, 1] *= 1 + 1e-6
    with pytest.raises(ValueError, match="not symmetric"):
        dc.MagnitudeSpace(asymmetric * 1e-300)


@pytest.mark.parametrize("call", [
    lambda Z: dc.vendi_score(Z), lambda Z: dc.iso_score(Z), lambda Z: dc.gm_stds(Z),
    lambda Z: dc.avg_sim(Z), lambda Z: dc.dc_score(Z), lambda Z: pairwise_distances(Z),
    lambda Z: dc.prdc(Z, Z, 2), lambda Z: dc.mmd_rbf(Z, Z), lambda Z: dc.mmd_linear(Z, Z),
    lambda Z: dc.mag_area(Z @ Z.conj().T, 1.0), lambda Z: dc.magnitude_function(
        pairwise_distances(Z.real), [1j]),
], ids=["vendi", "iso", "gmstds", "avgsim", "dcscore", "distances", "prdc", "mmd_rbf",
        "mmd_linear", "mag_area", "scales"])
def test_complex_input_is_rejected(call):
    """Complex input was cast to real with only a NumPy warning."""
    Z = RNG.normal(size=(10, 3)) + 1j * RNG.normal(size=(10, 3))
    with pytest.raises(ValueError, match="complex"):
        call(Z)
