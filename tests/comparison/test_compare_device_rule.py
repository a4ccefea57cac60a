"""On a torch device, compare and score put a set where the device's memory says (dense
whenever it holds it, whatever its size; else the large-n path on the device; else a one-line
refusal before anything is computed). CPU torch, thresholds lowered; no GPU needed."""

import numpy as np
import pytest

import diversity_core as dc
from diversity_core import MemoryNeedError
from diversity_core.comparison import protocol
from diversity_core.comparison.memory import required_memory
from diversity_core.comparison.score import score
from diversity_core.magnitude import _torch_large, api
from diversity_core.magnitude.settings import MagnitudeSettings

pytest.importorskip("torch")


def points(n, d, seed):
    rng = np.random.default_rng(seed)
    centres = 3 * rng.normal(size=(4, d))
    return centres[rng.integers(4, size=n)] + rng.normal(size=(n, d))


@pytest.fixture
def small(monkeypatch):
    """Batch sets up to 150 points; device panels of 64 rows."""
    monkeypatch.setattr(api, "_DENSE_MAX_POINTS", 150)
    monkeypatch.setattr(_torch_large, "_DEVICE_PANEL_ROWS", 64)


def device_memory(monkeypatch, limit):
    for module in (protocol, _torch_large):
        monkeypatch.setattr(module, "free_memory", lambda device: limit)


def test_a_set_beyond_the_batch_goes_on_the_device_dense_when_it_fits(small, monkeypatch):
    X, Y = points(220, 5, 1), points(120, 5, 2)
    spaces = []
    made = api.magnitude_space

    def spy(*args, **kwargs):
        spaces.append(made(*args, **kwargs))
        return spaces[-1]

    monkeypatch.setattr(protocol, "magnitude_space", spy)
    on = dc.compare({"x": X, "y": Y}, metric="euclidean", measures=["magarea"],
                    settings=MagnitudeSettings(device="torch:cpu"), progress=False)
    assert [type(s).__name__ for s in spaces] == ["TorchMagnitudeSpace"]  # y: the batch
    D = dc.pairwise_distances(X, "euclidean")  # the NumPy engine, dense and exact
    assert on.table.loc["x", "t_conv"] == pytest.approx(dc.convergence_scale(D), rel=1e-9)
    assert on.table.loc["x", "magarea"] == pytest.approx(dc.mag_area(D, on.t_cut), rel=1e-9)


def test_beyond_the_device_memory_the_large_path_on_the_device(small, monkeypatch):
    X = points(300, 6, 3)
    host = dc.compare({"x": X}, metric="euclidean", measures=["magarea"], progress=False)
    # The device holds the large-n path's triangle, not the dense matrices.
    device_memory(monkeypatch, _torch_large.torch_large_memory(300, 6, panel_rows=64) + 1)
    on = dc.compare({"x": X}, metric="euclidean", measures=["magarea"], progress=False,
                    settings=MagnitudeSettings(device="torch:cpu"))
    # against the host's large-n path (300 > 150 points on the NumPy engine here)
    assert on.table.loc["x", "t_conv"] == pytest.approx(host.table.loc["x", "t_conv"],
                                                        rel=1e-9)
    assert on.table.loc["x", "magarea"] == pytest.approx(host.table.loc["x", "magarea"],
                                                         rel=1e-8)
    result = score(X, metrics=["magarea"], metric_space="euclidean", device="torch:cpu")
    assert result["scores"]["embeddings"]["magarea"] == pytest.approx(
        on.table.loc["x", "magarea"], rel=1e-12)


def test_refused_in_one_line_before_anything_is_computed(small, monkeypatch):
    device_memory(monkeypatch, 10**5)
    computed = []
    monkeypatch.setattr(protocol, "_magnitude_of_sets",
                        lambda *a, **k: computed.append(1))
    with pytest.raises(MemoryNeedError) as err:
        dc.compare({"x": points(300, 6, 4)}, metric="euclidean", measures=["magarea"],
                   progress=False, settings=MagnitudeSettings(device="torch:cpu"))
    assert "\n" not in str(err.value) and "300 points in 6 dimensions" in str(err.value)
    assert not computed


def test_the_host_holds_only_the_points_of_a_set_on_the_device():
    sizes = {"big": 50_000}
    host, _ = required_memory(sizes, 64, metric="euclidean")
    device, _ = required_memory(sizes, 64, metric="euclidean", device="torch:cpu")
    assert host > 50_000**2 and device < 200 * 2**20
    # The NumPy engine's rule is unchanged, whatever the names.
    assert required_memory(sizes, 64, metric="euclidean", device="cpu")[0] == host
