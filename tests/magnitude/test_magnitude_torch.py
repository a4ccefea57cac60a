"""The magnitude engine's torch path against the NumPy engine, on CPU torch float64
(and on CUDA where torch sees a GPU): t_conv, MagArea (three rules), MagDiff, magnitude
functions and the batch functions agree to 1e-9 relative; duplicates, the fallback's warning,
the memory and device refusals."""

import warnings

import numpy as np
import pytest
from rules import default_rule_solves

import diversity_core as dc
from diversity_core import magnitude as mg
from diversity_core.magnitude import MagnitudeSpace, MagnitudeWarning

torch = pytest.importorskip("torch")

from diversity_core.device import Device, parse_device  # noqa: E402
from diversity_core.magnitude import (  # noqa: E402
    MagnitudeBatchError,
    TorchMagnitudeBatch,
    TorchMagnitudeSpace,
    torch_convergence_scales,
    torch_mag_areas,
    torch_magnitude_functions,
    torch_magnitude_memory,
)

RTOL = 1e-9
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def cloud(n, d=3, seed=0, clusters=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(clusters, d))
    return centres[rng.integers(clusters, size=n)] + rng.normal(size=(n, d))


@pytest.fixture(scope="module")
def spaces():
    return [dc.pairwise_distances(cloud(90, seed=1)),
            dc.pairwise_distances(cloud(60, d=5, seed=2), "cosine"),
            dc.pairwise_distances(cloud(40, seed=3), "cityblock")]


@pytest.mark.parametrize("device", DEVICES)
def test_single_space_agrees_with_the_numpy_engine(spaces, device):
    D_ref = spaces[0]
    ref = MagnitudeSpace(D_ref, solver="direct")
    t_ref = ref.convergence_scale()
    for D in spaces:
        numpy_space = MagnitudeSpace(D, solver="direct")
        space = TorchMagnitudeSpace(D, device=device)
        t_conv = space.convergence_scale()
        assert t_conv == pytest.approx(numpy_space.convergence_scale(), rel=RTOL)
        for method in ("chebyshev", "hermite", "hermite_d2", "quad", "trapezoid"):
            assert space.mag_area(t_conv, method=method) == pytest.approx(
                numpy_space.mag_area(t_conv, method=method), rel=RTOL)
        ts = np.array([0.0, 0.3 * t_conv, t_conv, 3.0 * t_conv])
        np.testing.assert_allclose(space.magnitude_function(ts),
                                   numpy_space.magnitude_function(ts), rtol=RTOL)
        mag, dmag = space.magnitude_and_derivative(t_conv)
        assert dmag == pytest.approx(dc.magnitude_derivative(D, t_conv)[0], rel=RTOL)
        np.testing.assert_allclose(space.weights(t_conv), numpy_space.weights(t_conv),
                                   rtol=1e-8, atol=1e-12)
        for normalise in (None, "t_cut", "reference_area"):
            expected = dc.mag_diff(D, D_ref, t_ref, normalise=normalise)
            # the package's own function: a torch space is one more prepared space
            got = dc.mag_diff(space, TorchMagnitudeSpace(D_ref, device=device), t_ref,
                              normalise=normalise)
            assert got == pytest.approx(expected, rel=RTOL, abs=1e-12)


def test_points_on_the_device_give_the_same_space():
    X = cloud(70, d=4, seed=5)
    for metric in ("euclidean", "cosine", "cityblock"):
        expected = MagnitudeSpace(dc.pairwise_distances(X, metric)).convergence_scale()
        space = TorchMagnitudeSpace.from_points(X, metric)
        assert space.convergence_scale() == pytest.approx(expected, rel=RTOL)
    with pytest.raises(ValueError, match="metric"):
        TorchMagnitudeSpace.from_points(X, "chebyshev")


def test_distances_on_the_device_are_formed_in_row_blocks(monkeypatch):
    # CUDA's cdist of 50,000 points with themselves failed to launch on an H200: the distances
    # are formed in row blocks of _BLOCK_ENTRIES pairs. Blocks of 2 and 3 rows here: the same
    # matrix, bit for bit, as one block, symmetric, and the NumPy side's distances.
    import torch

    from diversity_core.magnitude import _torch

    X = torch.as_tensor(cloud(11, d=3, seed=8))
    for metric in ("euclidean", "cityblock"):
        whole = _torch._pairwise_distances(X, metric)
        for rows in (2, 3):
            monkeypatch.setattr(_torch, "_BLOCK_ENTRIES", rows * 11)
            blocked = _torch._pairwise_distances(X, metric)
            assert torch.equal(blocked, whole) and torch.equal(blocked, blocked.T)
        monkeypatch.undo()
        np.testing.assert_allclose(whole.numpy(), dc.pairwise_distances(X.numpy(), metric),
                                   rtol=1e-14, atol=1e-15)


def test_euclidean_distances_from_a_product_recompute_the_pairs_that_could_cancel(monkeypatch):
    # From _PRODUCT_DISTANCES_FROM points on (lowered here), Euclidean distances come from one
    # product of the centred points; pairs whose product could have cancelled (here: near
    # duplicates 1e-9 apart, far from the origin) are formed from their differences. Every
    # distance within the documented 5e-12 of the NumPy side's exact ones, symmetric bit for bit,
    # zero on the diagonal; past the recompute share, all pairs by differences (cdist).
    from diversity_core.magnitude import _torch

    monkeypatch.setattr(_torch, "_PRODUCT_DISTANCES_FROM", 10)
    monkeypatch.setattr(_torch, "_BLOCK_ENTRIES", 7 * 60)  # 7-row blocks: mirrored across them
    base = cloud(50, d=6, seed=3) + 1e3
    X = np.vstack([base, base[:10] + 1e-9])
    D = _torch._pairwise_distances(torch.as_tensor(X), "euclidean")
    expected = dc.pairwise_distances(X)
    off = ~np.eye(len(X), dtype=bool)
    relative = np.abs(D.numpy() - expected)[off] / expected[off]
    assert relative.max() <= 5e-12
    # Without the recomputation the near duplicates' distances would be noise: 1e-9 against
    # products of about 1e6 (checked: the product alone errs by orders of magnitude there).
    Xc = torch.as_tensor(X) - torch.as_tensor(X).mean(dim=0)
    norms = (Xc * Xc).sum(dim=1)
    raw = (norms[:, None] + norms[None, :] - 2 * Xc @ Xc.T).clamp(min=0).sqrt()
    assert float((raw[:10, 50:].diagonal() - 1e-9 * np.sqrt(6)).abs().max()) > 1e-9
    assert torch.equal(D, D.T) and bool((D.diagonal() == 0).all())
    monkeypatch.setattr(_torch, "_PRODUCT_RECOMPUTE_SHARE", 0.0)  # every suspect: all by cdist
    rows = _torch._pairwise_distances(torch.as_tensor(X), "euclidean")
    by_cdist = _torch._distances_by_rows(torch.as_tensor(X), torch.empty_like(rows), p=2.0)
    assert torch.equal(rows, by_cdist)


def test_duplicates_are_merged_in_input_order():
    X = cloud(30, seed=4)
    X = np.vstack([X[:5], X[2:3], X[5:], X[2:3], X[0:1]])  # point 2 three times, point 0 twice
    D = dc.pairwise_distances(X)
    space = TorchMagnitudeSpace(D)
    numpy_space = MagnitudeSpace(D, solver="direct")
    assert (space.n_points, space.n_unique) == (33, 30)
    np.testing.assert_array_equal(space.group_of_point, numpy_space.group_of_point)
    t = numpy_space.convergence_scale()
    assert space.convergence_scale() == pytest.approx(t, rel=RTOL)
    w = space.weights(t)
    np.testing.assert_allclose(w, numpy_space.weights(t), rtol=1e-8)
    assert w[2] == w[5] == w[-2] and w[0] == w[-1]
    np.testing.assert_allclose(np.exp(-t * D) @ w, 1.0, rtol=1e-8)  # Z w = 1 on all points
    with pytest.raises(ValueError, match="single distinct point"):
        TorchMagnitudeSpace(np.zeros((3, 3))).convergence_scale()


def test_an_indefinite_scale_falls_back_on_the_cpu_and_warns():
    D = np.full((5, 5), 2.0)  # Leinster's K_{3,2}: Z_t indefinite below log √2
    D[:3, 3:] = D[3:, :3] = 1.0
    np.fill_diagonal(D, 0.0)
    space = TorchMagnitudeSpace(D)
    with pytest.warns(MagnitudeWarning, match=r"not positive definite at t=0\.2"):
        mag = space.magnitude(0.2)
    assert mag == pytest.approx(np.linalg.solve(np.exp(-0.2 * D), np.ones(5)).sum(), rel=1e-12)
    assert space.fallbacks[0]["solver"] == "ldl" and space.fallbacks[0]["t"] == 0.2
    with pytest.warns(MagnitudeWarning, match="member 1: similarity matrix"):
        values = torch_magnitude_functions([dc.pairwise_distances(cloud(6)), D], [0.2])
    assert values[1, 0] == pytest.approx(mag, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MagnitudeWarning)
        TorchMagnitudeSpace(dc.pairwise_distances(cloud(20))).convergence_scale()


@pytest.mark.parametrize("device", DEVICES)
def test_batches_agree_with_the_numpy_batch_functions(device):
    rng = np.random.default_rng(9)
    matrices = [dc.pairwise_distances(rng.normal(size=(n, 3))) for n in [12] * 6 + [40] * 4]
    matrices[2] = dc.pairwise_distances(np.vstack([rng.normal(size=(10, 3)), np.zeros((2, 3))]))
    batch = TorchMagnitudeBatch(matrices, device=device)
    assert batch.n_unique[2] == 11 and batch.n_points[2] == 12
    t_conv = torch_convergence_scales(batch)
    np.testing.assert_allclose(t_conv, mg.convergence_scales(matrices), rtol=RTOL)
    t_cut = float(np.median(t_conv))
    for method in ("chebyshev", "hermite", "hermite_log", "hermite_d2", "quad", "trapezoid"):
        np.testing.assert_allclose(torch_mag_areas(batch, t_cut, method=method),
                                   mg.mag_areas(matrices, t_cut, method=method), rtol=RTOL)
    np.testing.assert_allclose(torch_mag_areas(batch, t_conv),  # one limit per member
                               mg.mag_areas(matrices, t_conv), rtol=RTOL)
    ts = [0.0, 0.5 * t_cut, t_cut, 4.0 * t_cut]
    np.testing.assert_allclose(torch_magnitude_functions(batch, ts),
                               mg.magnitude_functions(matrices, ts), rtol=RTOL)
    # and the single-space path
    assert TorchMagnitudeSpace(matrices[7], device=device).convergence_scale() == \
        pytest.approx(t_conv[7], rel=RTOL)


def test_failed_members_do_not_stop_the_batch():
    good = dc.pairwise_distances(cloud(8))
    bad = good.copy()
    bad[0, 1] = -1.0
    with pytest.raises(MagnitudeBatchError, match="member 1") as caught:
        torch_convergence_scales([good, bad, np.zeros((2, 2))])
    assert set(caught.value.failures) == {1, 2}
    assert np.isfinite(caught.value.values[0]) and np.isnan(caught.value.values[1])
    with pytest.warns(MagnitudeWarning, match="have no result"):
        values = torch_convergence_scales([good, bad], errors="nan")
    assert np.isnan(values[1]) and values[0] == pytest.approx(
        dc.convergence_scale(good), rel=RTOL)
    with pytest.raises(ValueError, match="single space"):
        TorchMagnitudeBatch(good)


def test_batch_members_checked_on_the_device_as_on_the_host():
    # TorchMagnitudeBatch checks members of one size together on the device, and sends those
    # it flags to the host: the same failures with the same messages as the NumPy batch, the
    # same de-duplication, and initial scales bit for bit the host's _initial_scale.
    from diversity_core.magnitude._batch import _Batch
    from diversity_core.magnitude._search import _initial_scale

    good = dc.pairwise_distances(cloud(9, seed=1))
    members = [good, dc.pairwise_distances(cloud(9, seed=2)).astype(np.float32),
               (good * 1000).astype(np.int64), dc.pairwise_distances(cloud(10, seed=3))]
    for change in ("nan", "inf", "negative", "diagonal", "asymmetric"):
        bad = good.copy()
        value = {"nan": np.nan, "inf": np.inf, "negative": -1.0, "diagonal": 0.0,
                 "asymmetric": 0.5}[change]
        if change == "diagonal":
            bad[3, 3] = 1e-3
        else:
            bad[1, 2] = value if change != "asymmetric" else bad[1, 2] + value
        members.append(bad)
    X = cloud(9, seed=4)
    members += [dc.pairwise_distances(np.vstack([X, X[:2]])),  # two duplicates: 9 distinct
                np.zeros((4, 4)), np.zeros((1, 1)), good[:, :5], good[0],
                good.astype(complex), good.astype(">f8")]  # the last: big-endian
    batch = TorchMagnitudeBatch(members)
    host = _Batch(members)
    assert set(batch.failures) == set(host.failures) == {4, 5, 6, 7, 8, 12, 13, 14}
    for i, why in host.failures.items():  # the torch batch names its members
        assert batch.failures[i] == why.replace("D ", f"member {i} ", 1), i
    np.testing.assert_array_equal(batch.n_unique, host.n_unique)
    np.testing.assert_array_equal(batch.n_points, host.n_points)
    scales = dict(batch.initial_scales())
    assert list(scales) == sorted(scales) == [0, 1, 2, 3, 9, 10, 11, 15]
    for i, t in scales.items():
        expected = _initial_scale(host.D[i]) if host.n_unique[i] > 1 else np.nan
        assert t == expected or (np.isnan(t) and np.isnan(expected)), i
    np.testing.assert_array_equal(batch.D[9], host.D[9])


def test_memory_is_refused_beforehand_in_one_line():
    D = dc.pairwise_distances(cloud(50))
    need = torch_magnitude_memory(50)
    assert need >= 3 * 8 * 50 * 50
    assert torch_magnitude_memory(50_000) > 60e9  # three float64 matrices of 50,000 points
    with pytest.raises(MemoryError, match=r"magnitude of 50 points needs about .* GiB on cpu; "
                                          r".* GiB allowed \(memory_limit\)") as caught:
        TorchMagnitudeSpace(D, memory_limit=need - 1)
    assert "\n" not in str(caught.value)
    TorchMagnitudeSpace(D, memory_limit=need)
    with pytest.raises(MemoryError, match="a batch of 2 spaces needs"):
        TorchMagnitudeBatch([D, D], memory_limit=1000)
    with pytest.raises(MemoryError, match="in 3 dimensions"):
        TorchMagnitudeSpace.from_points(cloud(50), memory_limit=1000)
    # The public check takes a name or a Device; free memory is the host's on the CPU.
    with pytest.raises(MemoryError, match=r"needs about .* GiB on cpu; .* GiB free\."):
        mg.check_torch_memory(2**60, "torch:cpu")
    mg.check_torch_memory(1, parse_device("torch:cpu"))


def test_engine_devices():
    # One table, one meaning per name: which engine, and which torch device.
    assert parse_device("auto").engine == "numpy"  # the NumPy engine: tables never depend on
    assert parse_device("cpu").engine == "numpy"   # the GPU
    assert parse_device("torch:cpu") == Device("torch:cpu", "torch")  # the torch path ...
    assert parse_device("torch:cpu").torch == "cpu"                   # ... on the CPU
    assert parse_device("cuda:3", check=False) == Device("cuda:3", "torch")
    assert parse_device("cuda:3", check=False).torch == "cuda:3"
    assert parse_device("auto").torch == ("cuda" if torch.cuda.is_available() else "cpu")
    device = parse_device("torch:cpu")
    assert parse_device(device) is device  # a parsed value is handed on, never parsed again
    with pytest.raises(ValueError, match="not a row of the table"):
        Device("cuda", "numpy")  # one name, one meaning: no other engine for it by hand
    for name in ("gpu", "cuda:x", "tpu", "", None, "torch:cuda", "mps", "cuda:N", "numpy"):
        with pytest.raises(ValueError, match=r"^--flag: unknown device .*; the devices are "
                                             r"cpu, auto, cuda, cuda:N, torch:cpu"):
            parse_device(name, key="--flag", check=False)
    if torch.cuda.is_available():
        assert parse_device("cuda").torch == "cuda"
        with pytest.raises(ValueError, match="sees"):
            parse_device(f"cuda:{torch.cuda.device_count()}")
    else:
        for name in ("cuda", "cuda:0"):
            with pytest.raises(ValueError, match="^device: .*torch sees no CUDA GPU"):
                parse_device(name)
        with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
            TorchMagnitudeSpace(np.zeros((1, 1)), device="cuda")


def test_the_engine_follows_the_value_it_is_given():
    """space_on_device and batch_on_device read the Device's engine: the NumPy engine leaves
    the matrices as they are, torch:cpu puts them on the torch path (on the CPU)."""
    D = dc.pairwise_distances(cloud(20))
    assert mg.space_on_device(D, parse_device("cpu")) is D
    assert mg.space_on_device(D, parse_device("auto")) is D
    on_torch = mg.space_on_device(D, parse_device("torch:cpu"))
    assert isinstance(on_torch, TorchMagnitudeSpace) and on_torch.device == torch.device("cpu")
    spaces = [D]
    assert mg.batch_on_device(spaces, parse_device("cpu")) is spaces
    batch = mg.batch_on_device([D, D], parse_device("torch:cpu"))
    assert isinstance(batch, TorchMagnitudeBatch) and batch.device.type == "cpu"


def test_the_package_imports_without_torch():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "import diversity_core.magnitude._torch_batch as m\n"
            "from diversity_core.device import parse_device as p\n"
            "assert p('auto').engine == 'numpy' and p('auto').torch == 'cpu'\n"
            "try:\n    p('torch:cpu')\nexcept ValueError as e:\n"
            "    assert 'needs torch' in str(e)\n"
            "try:\n    m.TorchMagnitudeBatch([[[0.0]]])\nexcept ImportError as e:\n"
            "    assert 'needs torch' in str(e); print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "ok"


def test_a_tensor_is_checked_where_it_lies():
    D = dc.pairwise_distances(cloud(20))
    space = TorchMagnitudeSpace(torch.as_tensor(D))
    assert space.convergence_scale() == pytest.approx(MagnitudeSpace(D).convergence_scale(),
                                                      rel=RTOL)
    for change, message in ((lambda A: A[0, 1].add_(1.0), "not symmetric"),
                            (lambda A: A.neg_(), "negative distances"),
                            (lambda A: A[1, 2].fill_(float("nan")), "NaN"),
                            (lambda A: A.fill_diagonal_(1.0), "non-zero diagonal")):
        bad = torch.as_tensor(D).clone()
        change(bad)
        with pytest.raises(ValueError, match=message):
            TorchMagnitudeSpace(bad)
    with pytest.raises(ValueError, match="square"):
        TorchMagnitudeSpace(torch.zeros(3, 4, dtype=torch.float64))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_every_entry_point_refuses_a_missing_gpu_in_one_line():
    D = dc.pairwise_distances(cloud(5))
    for make in (lambda: TorchMagnitudeSpace(D, device="cuda:0"),
                 lambda: TorchMagnitudeSpace.from_points(cloud(5), device="cuda"),
                 lambda: TorchMagnitudeBatch([D], device="cuda")):
        with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
            make()
    with pytest.raises(ValueError, match="unknown device"):
        TorchMagnitudeSpace(D, device="gpu")


@pytest.mark.parametrize("device", ["torch:cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_the_device_setting_routes_every_path_through_torch(spaces, device, monkeypatch):
    """``MagnitudeSettings.device`` and ``measure_sets(device=...)`` take the torch path (a
    spy counts its evaluations) and give the NumPy engine's numbers to 1e-9."""
    from diversity_core.magnitude import TorchMagnitudeSpace as Space
    from diversity_core.magnitude.sets import measure_sets
    from diversity_core.magnitude.settings import MagnitudeSettings

    calls = {"batch": 0, "space": 0}
    batch_evaluate, space_factor = TorchMagnitudeBatch.evaluate, Space._factor

    def counted_batch(self, *args, **kwargs):
        calls["batch"] += 1
        return batch_evaluate(self, *args, **kwargs)

    def counted_space(self, *args, **kwargs):
        calls["space"] += 1
        return space_factor(self, *args, **kwargs)

    monkeypatch.setattr(TorchMagnitudeBatch, "evaluate", counted_batch)
    monkeypatch.setattr(Space, "_factor", counted_space)
    numpy_settings, settings = MagnitudeSettings(), MagnitudeSettings(device=device)
    small = [dc.pairwise_distances(cloud(30, seed=s)) for s in range(6)]
    t_conv = settings.convergence_scales(small)
    np.testing.assert_allclose(t_conv, numpy_settings.convergence_scales(small), rtol=RTOL)
    t_cut = float(np.median(t_conv))
    np.testing.assert_allclose(settings.mag_areas(small, t_cut),
                               numpy_settings.mag_areas(small, t_cut), rtol=RTOL)
    functions, ts = settings.magnitude_functions(small, t_cut)
    np.testing.assert_allclose(functions, numpy_settings.magnitude_functions(small, t_cut)[0],
                               rtol=RTOL)
    assert calls["batch"] > 0 and calls["space"] == 0
    D, D_ref = spaces[1], spaces[0]
    assert settings.convergence_scale(D) == pytest.approx(numpy_settings.convergence_scale(D),
                                                          rel=RTOL)
    assert settings.mag_area(MagnitudeSpace(D), 2.0) == pytest.approx(
        numpy_settings.mag_area(D, 2.0), rel=RTOL)
    assert settings.mag_diff(D, D_ref, 2.0) == pytest.approx(
        numpy_settings.mag_diff(D, D_ref, 2.0), rel=RTOL)
    assert settings.reference_free_t_cut(small) == pytest.approx(t_cut, rel=RTOL)
    assert calls["space"] > 0
    on_device = measure_sets(small, **settings.as_dict(), functions=True)
    on_numpy = measure_sets(small, **numpy_settings.as_dict(), functions=True)
    for field in ("t_conv", "areas", "functions"):
        np.testing.assert_allclose(getattr(on_device, field), getattr(on_numpy, field),
                                   rtol=RTOL)
    assert on_device.t_cut == pytest.approx(on_numpy.t_cut, rel=RTOL)


def test_fallbacks_on_the_torch_path_land_on_their_set():
    from diversity_core.magnitude.sets import measure_sets

    collinear = dc.pairwise_distances(np.random.default_rng(0).normal(size=(60, 2)), "cosine")
    members = [dc.pairwise_distances(cloud(12, seed=s), "cosine") for s in range(3)]
    members.insert(1, collinear)
    on_numpy = measure_sets(members)
    for chunk_size in (None, 2):  # the model experiment's two passes over chunks too
        on_device = measure_sets(members, device="torch:cpu", chunk_size=chunk_size)
        assert [bool(f) for f in on_device.fallbacks] == [bool(f) for f in on_numpy.fallbacks] \
            == [False, True, False, False]
        assert {r["solver"] for r in on_device.fallbacks[1]} <= {"ldl", "pinv"}
        assert sum(r["count"] for r in on_device.fallbacks[1]) >= 1
        assert [bool(w) for w in on_device.warnings] == [False, True, False, False]
        np.testing.assert_allclose(on_device.areas, on_numpy.areas, rtol=1e-6)


def test_a_gpu_the_machine_lacks_is_refused_when_the_settings_are_made():
    from diversity_core.magnitude.settings import MagnitudeSettings

    with pytest.raises(ValueError, match="magnitude.device: unknown device 'gpu'"):
        MagnitudeSettings(device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="magnitude.device: .*no CUDA GPU"):
            MagnitudeSettings(device="cuda")
    assert MagnitudeSettings().device == Device("cpu", "numpy")  # the engine's default
    assert MagnitudeSettings(device="auto").device.engine == "numpy"  # config.yaml's
    settings = MagnitudeSettings(device="torch:cpu")
    assert settings.as_dict()["device"] is settings.device  # carried as the value itself


def test_factorisations_are_counted_per_phase():
    """``evaluations``: one factorisation per scale solved, counted under the phase that asked
    for it, through the methods and the package's functions alike."""
    space = TorchMagnitudeSpace.from_points(cloud(200, seed=4), device="cpu")
    t_conv = dc.convergence_scale(space)
    search = space.evaluations["convergence_scale"]
    assert 2 <= search <= 12 and space.evaluations == {"convergence_scale": search,
                                                      "mag_area": 0, "other": 0}
    dc.mag_area(space, t_conv)
    # Mag(0) and Mag(t_conv) are known: the default rule is hermite_d2 here (every scale is
    # factored), whose stages cost 9, 11, 19 or 39 factorisations.
    assert space.evaluations["mag_area"] in default_rule_solves(factored=True)
    assert space.evaluations["convergence_scale"] == search
    area = space.evaluations["mag_area"]
    space.mag_area(t_conv)  # every scale remembered: nothing solved again
    space.magnitude_function([0.37 * t_conv, 0.11 * t_conv, 0.37 * t_conv])
    assert space.evaluations == {"convergence_scale": search, "mag_area": area, "other": 2}
