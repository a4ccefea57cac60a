"""Image datasets: Fashion-MNIST idx files and CIFAR-10 python pickles.

Fashion-MNIST is the offline substitute of the default configuration (Debian's
``dataset-fashion-mnist``, :func:`fetch_fashion_mnist`); CIFAR-10 is the paper's data set
(downloaded from its official site, :func:`fetch_cifar10`). Both fetches verify every archive
and file against its pin before anything reads it (an archive placed by hand included) and
write the folder's ``.pins.json``; :func:`load_dataset` checks the folder against it before
reading, and CIFAR-10's pickled batches are read with a restricted unpickler that builds
nothing but NumPy arrays. Both readers return uint8 images and int64 labels in 0..9.
"""

from __future__ import annotations

import gzip
import logging
import os
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..assets.fetch import (
    apt_download,
    download,
    extract_deb,
    extract_tar,
    folder_lock,
    staged_folder,
)
from ..assets.manifest import verify_manifest, write_manifest
from ..assets.pinned import verify_pinned_files
from ..assets.verify import check_file, inside, relative_name, restricted_load
from .reading import decoding

log = logging.getLogger(__name__)

__all__ = [
    "CLASS_NAMES",
    "read_idx",
    "load_fashion_mnist",
    "fetch_fashion_mnist",
    "fetch_cifar10",
    "extract_cifar10",
    "load_cifar10",
    "load_dataset",
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


_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path) -> np.ndarray:
    """Read an idx file (the MNIST format), gzip-compressed if the name ends in ``.gz``.

    Returns
    -------
    array with the file's shape, e.g. (n, 28, 28) uint8 for images, (n,) uint8 for labels.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with decoding(path, "idx file", "delete its folder to fetch it again (images)."), \
            opener(path, "rb") as stream:
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


def fetch_fashion_mnist(folder, *, package: str, version: str, deb_sha256: str,
                        file_sha256: Mapping[str, str]) -> Path:
    """Fashion-MNIST's four idx ``.gz`` files out of the Debian package, into ``folder``.

    ``apt-get download`` (no root; the ``.deb`` verified against ``deb_sha256``), then only the
    pinned files are taken out of the package (``dpkg-deb --fsys-tarfile``, names checked) and
    each verified against ``file_sha256`` (file name -> SHA-256; each name a plain relative path)
    before ``folder`` appears, with its ``.pins.json``. An existing ``folder`` is verified.
    """
    what = "Fashion-MNIST (images.fashion_mnist)"
    if not file_sha256:
        raise ValueError(f"{what}: file_sha256 pins no file.")
    names = {relative_name(name, what="Fashion-MNIST (images.fashion_mnist.file_sha256)"): sha
             for name, sha in file_sha256.items()}
    folder = Path(folder)
    with folder_lock(folder):  # the lock first: a second process verifies the first's folder
        if folder.exists():
            # A missing file is refused as clearly as an altered one (delete it to refetch).
            verify_pinned_files(folder, names, what=what)
            _write_fashion_mnist_manifest(folder, package, version, names)
            return folder
        _fetch_fashion_mnist(folder, package, version, deb_sha256, names, what)
    return folder


def _fetch_fashion_mnist(folder: Path, package, version, deb_sha256, names, what) -> None:
    with staged_folder(folder, locked=True) as (scratch, staging):
        deb = apt_download(
            package, version, scratch, sha256=deb_sha256,
            asset=f"Fashion-MNIST (Debian package {package})",
            config_key="images.dataset: fashion_mnist (images.fashion_mnist.package, .version, "
                       ".deb_sha256)",
            offline_default=f"copy the four idx .gz files into {folder} by hand")
        log.info("downloaded %s (sha256 verified)", deb.name)
        members = {f"{_FASHION_MNIST_DIR}/{name}": name for name in names}
        unpacked = extract_deb(deb, scratch / "root", members)
        for member, name in members.items():
            check_file(unpacked / member, names[name], what=f"{what}: {member} of {deb.name}")
            target = inside(staging, name, what=what)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(unpacked / member, target)
            log.info("%s: sha256 verified", name)
        _write_fashion_mnist_manifest(staging, package, version, names)


_FASHION_MNIST_DIR = "usr/share/datasets/fashion-mnist"


def _write_fashion_mnist_manifest(folder, package, version, names) -> None:
    write_manifest(folder, asset="fashion_mnist", config_key="images.fashion_mnist",
                   source=f"deb:{package}={version}", pinned=names)


CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"


def fetch_cifar10(folder, *, url: str, md5: str | None, sha256: str | None = None) -> Path:
    """CIFAR-10 (python version) into ``folder`` (``cifar-10-batches-py``), verified first.

    The archive is ``folder.parent / cifar-10-python.tar.gz``: downloaded there, or placed there
    by hand. Either way it is checked against its pins (SHA-256 and MD5, whichever are given)
    before a byte of it is extracted: a hand-placed archive that does not match is refused, and
    nothing in it is ever unpickled. Its members are extracted with their names checked, then
    renamed into ``folder`` with the folder's ``.pins.json``. An existing ``folder`` is checked
    against that manifest.
    """
    folder = Path(folder)
    with folder_lock(folder):  # the lock first: a second process verifies the first's folder
        if folder.exists():
            verify_manifest(folder, what="CIFAR-10 (images.cifar10)")
            return folder
        _fetch_cifar10(folder, url, md5, sha256)
    return folder


# What the python version's archive must hold for the reader, each once (checked when it is
# fetched).
CIFAR10_MEMBERS = tuple(f"cifar-10-batches-py/{name}" for name in (
    *(f"data_batch_{i}" for i in range(1, 6)), "test_batch"))
# The archive takes 170,498,071 bytes: the most a download of it may take.
MAX_CIFAR10_BYTES = 512 << 20


def _fetch_cifar10(folder: Path, url: str, md5: str | None, sha256: str | None) -> None:
    archive = folder.parent / CIFAR10_ARCHIVE
    origin = {
        "asset": f"CIFAR-10 (python version, {CIFAR10_ARCHIVE})",
        "config_key": "images.dataset: cifar10 (images.cifar10.url, images.cifar10.sha256, "
                      "images.cifar10.md5)",
        "offline_default": "images.dataset: fashion_mnist (the Debian package "
                           "dataset-fashion-mnist)"}
    fetched = {"members": CIFAR10_MEMBERS, "max_bytes": MAX_CIFAR10_BYTES, **origin}
    if sha256:
        digest = download(url, archive, checksum=sha256, algorithm="sha256", **fetched)
        if md5:
            check_file(archive, md5, algorithm="md5", what=origin["asset"])
    else:
        download(url, archive, checksum=md5, algorithm="md5", **fetched)
        digest = None
    with staged_folder(folder, locked=True) as (scratch, staging):
        try:
            unpacked = extract_cifar10(archive, scratch / "unpacked")
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise ValueError(f"{origin['asset']}: {archive} is not a readable tar.gz archive "
                             f"({type(exc).__name__}: {exc}); delete it to fetch it again "
                             f"({origin['config_key']}).") from None
        if not unpacked.is_dir():
            raise ValueError(f"{origin['asset']}: {archive} holds no folder cifar-10-batches-py/"
                             f" (not CIFAR-10's python version?); delete it to fetch it again "
                             f"({origin['config_key']}).")
        for path in sorted(unpacked.iterdir()):
            os.replace(path, staging / path.name)
        write_manifest(staging, asset="cifar10", config_key="images.cifar10",
                       source=f"{url} ({CIFAR10_ARCHIVE}: sha256 {digest or 'not pinned'}, md5 "
                              f"{md5 or 'not pinned'})",
                       # Bytes fixed by the archive's pin: pinned (hashed here).
                       pinned={path.name: None for path in staging.iterdir()}
                       if sha256 or md5 else {})


def extract_cifar10(archive, dest_dir) -> Path:
    """Unpack ``cifar-10-python.tar.gz`` (every member name checked, regular files only); returns
    the ``cifar-10-batches-py`` folder. The archive must have been verified first."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    # The python version's six batches and meta file hold about 180 MB: 1 GiB bounds a tar bomb.
    extract_tar(archive, dest_dir, what=Path(archive).name, max_total=1 << 30)
    return dest_dir / "cifar-10-batches-py"


# What CIFAR-10's pickled batches may build: NumPy arrays (as NumPy 1 and 2 pickle them, and as
# Python 3's protocol 2 pickles bytes); dicts, lists, numbers and strings need no class.
_CIFAR_PICKLE_CLASSES = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
})


def load_cifar10(folder, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 from the python-version pickles in ``folder`` (``cifar-10-batches-py``).

    The pickles are read with a restricted unpickler: anything but NumPy arrays and plain data
    (a crafted batch that would run code) raises ``pickle.UnpicklingError``.

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
        path = Path(folder) / name
        with decoding(path, "CIFAR-10 batch (a pickle)", f"delete the folder {folder} to unpack "
                      "it again from the verified archive (images.cifar10)."):
            batch = restricted_load(path, _CIFAR_PICKLE_CLASSES, what=f"CIFAR-10 batch {path}",
                                    encoding="bytes")
        if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
            raise ValueError(f"{name}: not a CIFAR-10 batch (a dict with data and labels).")
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(f"{name}: expected rows of 3072 bytes, got shape {data.shape}.")
        # Rows hold the red, green and blue planes of a 32x32 image, each row-major.
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)


def load_dataset(name: str, folder, split: str = "train", *, verify: bool = True
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``fashion_mnist`` (idx files in ``folder``) or ``cifar10`` (pickles in ``folder``).

    With ``verify`` (the default) ``folder`` is first checked against the ``.pins.json`` its
    fetch wrote (:func:`fetch_fashion_mnist`, :func:`fetch_cifar10`): nothing is read from a
    folder that does not match what was verified against the pins.
    """
    if name not in ("fashion_mnist", "cifar10"):
        raise ValueError(f"unknown dataset {name!r}; choose fashion_mnist or cifar10.")
    if verify:
        verify_manifest(folder, what=f"{name} (images.{name})")
    if name == "fashion_mnist":
        return load_fashion_mnist(folder, split)
    return load_cifar10(folder, split)
