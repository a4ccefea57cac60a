"""The engine decides each set's path and memory (``magnitude_plan``); ``compare`` and ``score``
ask it. Its answers are the former rule's, written out here, over a grid of sizes, dimensions,
metrics and devices; the large-n threshold is one constant that the path and the bytes follow."""

import itertools

import pytest

from diversity_core import MemoryNeedError
from diversity_core.comparison import protocol
from diversity_core.comparison.memory import required_memory
from diversity_core.device import parse_device
from diversity_core.magnitude import (
    _torch_large,
    api,
    device_path,
    magnitude_memory,
    magnitude_plan,
    space_path,
    torch_large_memory,
    torch_magnitude_memory,
)

SIZES = (1, 2, 500, 9_999, 10_000, 10_001, 30_000, 100_000)
DIMENSIONS = (1, 64, 2048)
METRICS = ("euclidean", "cosine", "cityblock")
DEVICES = ("cpu", "auto", "torch:cpu")
GiB = 2**30


def former_large_path(n, metric):
    return metric in ("euclidean", "cosine") and space_path(n) == "large"


def former_required_memory(sizes, n_features, *, metric, reference=None, magnitude=True,
                           device="cpu"):
    """``comparison.memory.required_memory`` as it was written before the engine answered."""
    on_device = parse_device(device).engine == "torch"
    held, peak, worst = 0, 0, None
    n_ref = sizes[reference] if reference is not None else 0
    for name, n in sizes.items():
        if n < 1:
            continue
        if not magnitude:
            need = 16 * n * n_features
        elif former_large_path(n, metric) and on_device:
            need = 32 * n * n_features + 64 * 8 * n
        elif former_large_path(n, metric):
            need = magnitude_memory(n, n_features) + 16 * n * n_features
        else:
            held += 16 * n * n
            need = magnitude_memory(n, n_features, path="dense")
        if reference is not None and name != reference:
            need = max(need, 8 * (n + n_ref) ** 2)
        if need > peak:
            peak, worst = need, name
    return held + peak, worst


def former_device_paths(names, shapes, metric, device, free):
    """``comparison.protocol._device_paths`` as it was written before the engine answered."""
    left, chosen = free, {}
    for name, (n, d) in sorted(zip(names, shapes, strict=True), key=lambda item: -item[1][0]):
        where = device_path(n, d, device, metric=metric,
                            memory_limit=None if left == free else left)
        if where == "large" or former_large_path(n, metric):
            chosen[name] = where
            left -= torch_magnitude_memory(n, d) if where == "dense" else torch_large_memory(n, d)
    return chosen


class Shape:
    """Stands for a set's points: only its shape is read before anything is computed."""

    def __init__(self, n, d):
        self.shape = (n, d)


@pytest.mark.parametrize("device", DEVICES)
def test_the_memory_rule_is_the_former_one(device):
    for n, d, metric in itertools.product(SIZES, DIMENSIONS, METRICS):
        assert required_memory({"x": n}, d, metric=metric, device=device) == \
            former_required_memory({"x": n}, d, metric=metric, device=device), (n, d, metric)
        sizes = {"a": n, "b": 300, "ref": 2_000}
        for reference, magnitude in ((None, True), ("ref", True), ("ref", False)):
            assert required_memory(sizes, d, metric=metric, reference=reference,
                                   magnitude=magnitude, device=device) == \
                former_required_memory(sizes, d, metric=metric, reference=reference,
                                       magnitude=magnitude, device=device)


def test_each_set_takes_the_former_path():
    for n, d, metric in itertools.product(SIZES, DIMENSIONS, METRICS):
        plan = magnitude_plan(n, d, metric=metric)
        assert (plan.path == "large") == former_large_path(n, metric)
        assert plan.device_path() is None  # the NumPy engine places nothing on a device


@pytest.mark.parametrize("free", [GiB // 4, 8 * GiB, 64 * GiB, 2**40])
def test_the_device_places_the_sets_as_before(free, monkeypatch):
    monkeypatch.setattr(protocol, "free_memory", lambda device: free)
    monkeypatch.setattr(_torch_large, "free_memory", lambda device: free)
    device = parse_device("torch:cpu")
    for metric, d, sizes in itertools.product(METRICS, (8, 384),
                                              ([300, 9_000], [12_000, 500], [30_000, 20_000],
                                               [100_000, 10_001, 50])):
        names = [f"s{i}" for i in range(len(sizes))]
        try:
            expected = former_device_paths(names, [(n, d) for n in sizes], metric, device, free)
        except MemoryNeedError as err:
            with pytest.raises(MemoryNeedError) as got:
                protocol._device_paths(names, [Shape(n, d) for n in sizes], metric, device)
            assert str(got.value) == str(err)
            continue
        assert protocol._device_paths(names, [Shape(n, d) for n in sizes], metric,
                                      device) == expected, (metric, d, sizes)


def test_the_threshold_is_one_edit(monkeypatch):
    """Lower the dense path's size limit: the path, the engine's memory figure and compare's
    memory rule all follow it."""
    before = magnitude_plan(100, 8, metric="euclidean")
    assert before.path == "dense" and before.held_bytes == 16 * 100 * 100
    monkeypatch.setattr(api, "_DENSE_MAX_POINTS", 99)
    plan = magnitude_plan(100, 8, metric="euclidean")
    assert plan.path == "large" and space_path(100) == "large"
    assert plan.held_bytes == 0
    assert plan.peak_bytes == magnitude_memory(100, 8) + 16 * 100 * 8
    assert magnitude_memory(100, 8) == magnitude_memory(100, 8, path="large") \
        != magnitude_memory(100, 8, path="dense")
    assert required_memory({"x": 100}, 8, metric="euclidean")[0] == plan.peak_bytes
    on_device = magnitude_plan(100, 8, metric="euclidean", device="torch:cpu")
    assert on_device.peak_bytes == 32 * 100 * 8 + 64 * 8 * 100
    assert magnitude_plan(99, 8, metric="euclidean").path == "dense"
    # The large-n path knows the Euclidean and cosine distances only.
    assert magnitude_plan(100, 8, metric="cityblock").path == "dense"
