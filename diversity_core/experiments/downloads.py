"""Checksummed downloads shared by the experiments: nothing half-written is ever left behind."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["download", "file_digest", "verify_checksum"]

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


def download(url: str, dest, *, checksum: str | None, algorithm: str = "sha256",
             timeout: float = 60.0, progress: bool = True) -> str:
    """Download ``url`` to ``dest``, verified by its ``algorithm`` digest; return the digest.

    The data stream into a temporary file beside ``dest`` that is renamed only once complete and
    matching ``checksum``: a failed, interrupted or corrupt download leaves nothing at ``dest``.
    An existing ``dest`` is verified, not fetched again. With ``checksum=None`` (no published
    checksum) the digest of what arrived is logged, printed and returned, to be pinned in the
    configuration (trust on first use).

    Raises
    ------
    ValueError
        The checksum does not match (the download is discarded; an existing file is kept).
    OSError
        The download failed; the message says where to place the file by hand.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    expected = checksum.lower() if checksum else None
    if dest.exists():
        digest = file_digest(dest, algorithm)
        if expected is not None and digest != expected:
            raise ValueError(
                f"{dest} exists but its {algorithm} is {digest}, not the expected {expected}: "
                "delete it to download it again."
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
                    f"could not download {url}: {exc}. Without network access, place the file "
                    f"at {dest} by hand."
                ) from exc
        digest = h.hexdigest()
        if expected is not None and digest != expected:
            raise ValueError(
                f"checksum mismatch for {url}: {algorithm} is {digest}, expected {expected}. "
                f"The download is corrupt or the file changed upstream; nothing was written to "
                f"{dest}."
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    if expected is None:
        log.warning("no checksum configured for %s; the downloaded file has %s %s (pin it in "
                    "config.yaml).", url, algorithm, digest)
        print(f"{algorithm} of {dest.name} ({url}): {digest}")
    return digest
