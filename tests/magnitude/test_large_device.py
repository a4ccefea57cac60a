"""The large-n path on a torch device (CPU torch here, small panels), the memory rule
that chooses a device path (dense whenever the device holds it, whatever the size; else the
large-n path; else a one-line refusal), and the evaluations of Mag(t) counted per phase."""

import numpy as np
import pytest
from point_clouds import clustered
from rules import default_rule_solves

import diversity_core as dc
from diversity_core import MemoryNeedError
from diversity_core import magnitude as mg
from diversity_core.device import parse_device
from diversity_core.magnitude import LargeMagnitudeSpace, _large, _torch_large

torch = pytest.importorskip("torch")
TORCH_CPU = parse_device("torch:cpu")


@pytest.fixture
def small_panels(monkeypatch):
    """Panels of 64 rows on the device and on the host, blocks of 100 columns on the host:
    several of each at test sizes."""
    monkeypatch.setattr(_torch_large, "_DEVICE_PANEL_ROWS", 64)
    monkeypatch.setattr(_large, "_PANEL_ROWS", 64)
    monkeypatch.setattr(_large, "_CHUNK_COLUMNS", 100)


def test_device_products_are_those_of_the_host(small_panels):
    X = clustered(333, 5, 1)  # the last panel is short
    host = LargeMagnitudeSpace(X, threads=1)
    device = mg.TorchLargeMagnitudeSpace(X, device=TORCH_CPU)
    # Gram products of another library: the same distances to round-off
    assert device.D_max == pytest.approx(host.D_max, rel=1e-13)
    assert device.distance_rtol == pytest.approx(host.distance_rtol, rel=1e-9)
    np.testing.assert_allclose(device._nn, host._nn, rtol=1e-13)
    x = np.random.default_rng(2).normal(size=len(X))
    for a, b in zip(device._product64(0.7, x, derivative=True, absolute=True),
                    host._product64(0.7, x, derivative=True, absolute=True), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    x32 = x.astype(np.float32)
    y = device._product32(0.7, torch.as_tensor(x32)).numpy()
    np.testing.assert_allclose(y, host._product32(0.7, x32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("metric", "X"), [
    ("euclidean", clustered(400, 6, 3)),
    ("cosine", np.random.default_rng(4).normal(size=(300, 48)) + 0.3),
])
def test_device_large_path_agrees_with_the_host_and_the_exact_path(small_panels, metric, X):
    host = LargeMagnitudeSpace(X, metric, threads=1)
    device = mg.TorchLargeMagnitudeSpace(X, metric, device=TORCH_CPU)
    exact = dc.MagnitudeSpace(dc.pairwise_distances(X, metric))
    t_host, t_device = host.convergence_scale(), device.convergence_scale()
    assert t_device == pytest.approx(t_host, rel=1e-9)
    assert t_device == pytest.approx(exact.convergence_scale(), rel=1e-6)
    area_host, area_device = host.mag_area(t_host), device.mag_area(t_device)
    assert area_device == pytest.approx(area_host, rel=1e-8)
    truth = exact.mag_area(t_host)
    assert abs(area_device - truth) / truth <= device.area_error["relative"]
    # The same stopping rule: the same scales, solved to the same accuracy.
    assert [r["t"] for r in device.records] == pytest.approx([r["t"] for r in host.records])
    assert device.evaluations == host.evaluations


def test_the_device_memory_decides_not_a_size():
    n, d = 20_000, 32
    dense, large = mg.torch_magnitude_memory(n, d), mg.torch_large_memory(n, d)
    assert large < dense / 5
    assert mg.device_path(n, d, TORCH_CPU, memory_limit=dense) == "dense"  # beyond 10,000
    small = mg.torch_large_memory(300, d)
    assert small < mg.torch_magnitude_memory(300, d)
    assert mg.device_path(300, d, TORCH_CPU, memory_limit=small) == "large"  # below it
    assert mg.device_path(n, d, TORCH_CPU, memory_limit=dense - 1) == "large"
    with pytest.raises(MemoryNeedError) as err:
        mg.device_path(n, d, TORCH_CPU, memory_limit=large - 1)
    message = str(err.value)
    assert "\n" not in message and "20,000 points in 32 dimensions" in message
    assert f"{large / 2**30:.2f} GiB" in message and "allowed (memory_limit)" in message
    assert (err.value.need, err.value.limit) == (large, large - 1)
    # The large-n path knows the Euclidean and cosine distances only: cityblock is dense or
    # refused.
    with pytest.raises(MemoryNeedError, match="dense"):
        mg.device_path(n, d, TORCH_CPU, memory_limit=dense - 1, metric="cityblock")


def test_magnitude_space_on_a_device_follows_the_rule(small_panels):
    X = clustered(300, 4, 5)
    roomy = mg.magnitude_space(X, device=TORCH_CPU)
    assert isinstance(roomy, mg.TorchMagnitudeSpace)
    tight = mg.magnitude_space(X, device="torch:cpu",
                               memory_limit=mg.torch_large_memory(300, 4, panel_rows=64) + 1)
    assert isinstance(tight, mg.TorchLargeMagnitudeSpace)
    assert tight.convergence_scale() == pytest.approx(roomy.convergence_scale(), rel=1e-6)
    with pytest.raises(MemoryNeedError, match="on cpu"):
        mg.magnitude_space(X, device=TORCH_CPU, memory_limit=10**5)
    # On the NumPy engine nothing changed: the size decides, on the host.
    assert isinstance(mg.magnitude_space(X), dc.MagnitudeSpace)
    assert isinstance(mg.magnitude_space(X, path="large"), LargeMagnitudeSpace)


def test_evaluations_are_counted_per_phase():
    X = clustered(300, 4, 6)
    space = LargeMagnitudeSpace(X, threads=1)
    t_conv = dc.convergence_scale(space)  # the public function counts as the method does
    search = space.evaluations["convergence_scale"]
    assert 2 <= search <= 12 and space.evaluations["mag_area"] == 0
    dc.mag_area(space, t_conv)
    counts = space.evaluations
    assert counts["convergence_scale"] == search
    # Mag(0) and Mag(t_cut) are known: the default rule is hermite_log here (no factor), whose
    # stages cost 13, 20, 27 or 55 evaluations (one more where the search ended between two
    # evaluated scales).
    assert counts["mag_area"] in default_rule_solves(factored=False)
    assert sum(counts.values()) == len(space.records)
    space.magnitude_function([0.37 * t_conv, 0.11 * t_conv])
    assert space.evaluations["other"] == 2
