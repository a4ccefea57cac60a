"""Reference-free baselines against their reference implementations and hand-computed cases."""

import math
import warnings

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import gmean

import diversity_core
from diversity_core import avg_sim, dc_score, gm_stds, iso_score, vendi_score
from diversity_core.measures import baselines as bl

RTOL = 1e-6
SHAPES = [(50, 10), (20, 100), (200, 5), (3, 3)]


def _data(n, d, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def test_public_names():
    for name in ("vendi_score", "iso_score", "dc_score", "avg_sim", "gm_stds"):
        assert name in diversity_core.__all__
        assert callable(getattr(diversity_core, name))


# --- Vendi Score ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
def test_vendi_matches_package(shape):
    vendi = pytest.importorskip("vendi_score.vendi")
    X = _data(*shape)
    ours = vendi_score(X)
    assert ours == pytest.approx(vendi.score_dual(X), rel=RTOL)
    assert ours == pytest.approx(vendi.score_X(X), rel=RTOL)


@pytest.mark.parametrize("q", [0.5, 2.0, 3.0])
def test_vendi_order_q_matches_package_on_full_rank_kernels(q):
    # The package's score_K honours q; on a rank-deficient kernel it also sums the round-off
    # eigenvalues (1e-17 ** 0.5 is not negligible), so compare where K has full rank (n <= d).
    vendi = pytest.importorskip("vendi_score.vendi")
    X = _data(20, 60, seed=3)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert vendi_score(X, q=q) == pytest.approx(vendi.score_K(Xn @ Xn.T, q=q), rel=RTOL)


def test_vendi_primal_and_dual_paths_agree():
    for n, d in [(30, 8), (8, 30)]:
        X = _data(n, d, seed=5)
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        for q in (0.5, 1, 2, np.inf):
            assert vendi_score(X, q=q) == pytest.approx(
                vendi_score(Xn @ Xn.T, metric="precomputed", q=q), rel=1e-10)


def test_vendi_closed_forms():
    # Identical points: one effective point, for every q (the package gives NaN for q=inf).
    X = np.tile([[1.0, 2.0, 3.0]], (7, 1))
    for q in (0, 0.5, 1, 2, np.inf):
        assert vendi_score(X, q=q) == pytest.approx(1.0, abs=1e-12)
    # Mutually orthogonal points: n effective points.
    for q in (0, 1, 2, np.inf):
        assert vendi_score(np.eye(5) * 3.0, q=q) == pytest.approx(5.0, rel=1e-12)
    # Two orthogonal points plus a copy of one: eigenvalues 2/3, 1/3.
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    p = np.array([2 / 3, 1 / 3])
    assert vendi_score(X) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-12)
    assert vendi_score(X, q=2) == pytest.approx(1 / (p**2).sum(), rel=1e-12)
    assert vendi_score(X, q=np.inf) == pytest.approx(1.5, rel=1e-12)
    assert vendi_score(X, q=0) == 2.0
    assert vendi_score(np.array([[1.0, 2.0]])) == 1.0


def test_vendi_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        vendi_score(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="zero vector"):
        vendi_score(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="unknown metric"):
        vendi_score(_data(4, 2), metric="euclidean")
    with pytest.raises(ValueError, match="q must be"):
        vendi_score(_data(4, 2), q=-1)
    with pytest.raises(ValueError, match="k\\(x, x\\) = 1"):
        vendi_score(2 * np.eye(3), metric="precomputed")
    with pytest.raises(ValueError, match="square"):
        vendi_score(np.ones((3, 2)), metric="precomputed")


# --- IsoScore ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(50, 10), (200, 5), (100, 2)])
def test_iso_score_matches_package(shape):
    iso = pytest.importorskip("IsoScore.IsoScore")
    X = _data(*shape, seed=1) * np.linspace(0.2, 3.0, shape[1])
    assert iso_score(X) == pytest.approx(float(iso.IsoScore(X)), rel=RTOL)


def test_iso_score_fewer_points_than_dimensions_warns_and_matches_package():
    iso = pytest.importorskip("IsoScore.IsoScore")
    X = _data(20, 100, seed=2)
    with pytest.warns(UserWarning, match="rank"):
        ours = iso_score(X)
    assert ours == pytest.approx(float(iso.IsoScore(X)), rel=RTOL)


def test_iso_score_closed_forms():
    d = 4
    # ±e_i: covariance proportional to the identity: perfectly isotropic.
    X = np.vstack([np.eye(d), -np.eye(d)])
    assert iso_score(X) == pytest.approx(1.0, abs=1e-12)
    # All variance along one direction: IsoScore 0.
    t = np.linspace(-1, 1, 11)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert iso_score(t * np.array([[1.0, 2.0, -1.0]])) == pytest.approx(0.0, abs=1e-12)
    # Invariant to scaling, translation and rotation.
    X = _data(40, 3, seed=4) * [1.0, 2.0, 0.5]
    Q, _ = np.linalg.qr(_data(3, 3, seed=9))
    assert iso_score(7 * X @ Q + 3) == pytest.approx(iso_score(X), rel=1e-10)


def test_iso_score_bad_input():
    with pytest.raises(ValueError, match="constant"):
        iso_score(np.ones((5, 3)))
    with pytest.raises(ValueError, match="at least 2 features"):
        iso_score(_data(5, 1))
    with pytest.raises(ValueError, match="at least 2"):
        iso_score(_data(1, 3))
    with pytest.raises(ValueError, match="inf"):
        iso_score(np.array([[1.0, np.inf], [0.0, 1.0], [2.0, 2.0]]))


# --- DCScore ----------------------------------------------------------------------------------

def _dc_brute(K, tau):
    return float(np.trace(softmax(K / tau, axis=1)))


def test_dc_score_hand_computed():
    # Two orthogonal unit vectors, tau = 1: P_ii = e / (e + 1).
    X = np.array([[3.0, 0.0], [0.0, 0.5]])
    assert dc_score(X) == pytest.approx(2 * math.e / (math.e + 1), rel=1e-12)
    # Identical points: every row of P is uniform, trace 1.
    assert dc_score(np.ones((4, 3))) == pytest.approx(1.0, rel=1e-12)
    # tau -> 0: each point is classified as itself (distinct directions): DCScore -> n.
    assert dc_score(_data(6, 4), tau=1e-4) == pytest.approx(6.0, rel=1e-9)


@pytest.mark.parametrize("kernel", ["cosine", "linear", "rbf"])
def test_dc_score_matches_full_softmax(kernel, monkeypatch):
    X = _data(37, 6, seed=7)
    if kernel == "cosine":
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        K = Xn @ Xn.T
    elif kernel == "linear":
        K = X @ X.T
    else:
        sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
        K = np.exp(-sq / 6)
    for tau in (0.1, 1.0, 5.0):
        expected = _dc_brute(K, tau)
        assert dc_score(X, tau=tau, kernel=kernel) == pytest.approx(expected, rel=1e-10)
        monkeypatch.setattr(bl, "_BLOCK_VALUES", 5 * 37)  # blocks of 5 rows
        assert dc_score(X, tau=tau, kernel=kernel) == pytest.approx(expected, rel=1e-10)
        monkeypatch.undo()


def test_dc_score_cosine_normalises():
    # The reference code's "cosine" kernel forgot to normalise; ours is scale invariant per row.
    X = _data(10, 5, seed=8)
    scaled = X * np.arange(1, 11)[:, None]
    assert dc_score(scaled) == pytest.approx(dc_score(X), rel=1e-12)
    assert dc_score(scaled, kernel="linear") != pytest.approx(dc_score(X, kernel="linear"))


def test_dc_score_bad_input():
    with pytest.raises(ValueError, match="tau"):
        dc_score(_data(3, 2), tau=0)
    with pytest.raises(ValueError, match="zero vector"):
        dc_score(np.array([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="unknown kernel"):
        dc_score(_data(3, 2), kernel="poly")
    with pytest.raises(ValueError, match="NaN"):
        dc_score(np.array([[np.nan, 0.0], [1.0, 0.0]]))


# --- AvgSim and GMStds ------------------------------------------------------------------------

def test_avg_sim_hand_computed():
    X = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    # cosines: (1,2) 0, (1,3) 1/sqrt2, (2,3) 1/sqrt2
    assert avg_sim(X) == pytest.approx(math.sqrt(2) / 3, rel=1e-12)
    assert avg_sim(np.ones((5, 2))) == pytest.approx(1.0, rel=1e-12)
    # n points evenly on a circle: the vectors sum to 0, so AvgSim = -1/(n-1).
    a = 2 * np.pi * np.arange(8) / 8
    assert avg_sim(np.c_[np.cos(a), np.sin(a)]) == pytest.approx(-1 / 7, rel=1e-12)


def test_avg_sim_matches_brute_force():
    X = _data(41, 9, seed=10)
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = Xn @ Xn.T
    brute = (S.sum() - np.trace(S)) / (41 * 40)
    assert avg_sim(X) == pytest.approx(brute, rel=1e-10)


def test_avg_sim_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        avg_sim(np.ones((1, 3)))
    with pytest.raises(ValueError, match="zero vector"):
        avg_sim(np.array([[0.0, 0.0], [1.0, 0.0]]))


def test_gm_stds_hand_computed():
    X = np.array([[0.0, 0.0], [2.0, 4.0]])
    # ddof=1 standard deviations sqrt2 and 2 sqrt2: geometric mean 2.
    assert gm_stds(X) == pytest.approx(2.0, rel=1e-12)
    Y = _data(30, 7, seed=11)
    assert gm_stds(Y) == pytest.approx(gmean(Y.std(axis=0, ddof=1)), rel=1e-12)
    # A constant feature makes GMStds exactly 0, however spread the other features are.
    Z = np.c_[_data(10, 3, seed=12) * 100, np.full(10, 0.1)]
    assert gm_stds(Z) == 0.0


def test_gm_stds_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        gm_stds(np.ones((1, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        gm_stds(np.array([[np.inf, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="2-D"):
        gm_stds(np.ones(4))
