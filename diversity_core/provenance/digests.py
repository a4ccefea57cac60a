"""Digests of files and folders, and the pinned digests of assets (``.pins.json`` manifests).

* A file's digest is the SHA-256 of its bytes.
* A folder's digest is the SHA-256 of its ``sha256sum``-style listing: one line
  ``"<sha256>  <relative posix path>\\n"`` per file, sorted by path (code-point order), leaving
  out ``.pins.json`` manifests, ``*.provenance.json`` records (they describe the files, they
  are not among them) and Snakemake's ``.snakemake_timestamp`` marker. A reader reproduces it
  without our code::

      cd FOLDER && find . -type f ! -name .pins.json ! -name '*.provenance.json' \\
          ! -name .snakemake_timestamp -printf '%P\\n' \\
          | LC_ALL=C sort | tr '\\n' '\\0' | xargs -0 sha256sum | sha256sum

* An asset under ``resources/`` carries the digest its fetch checked against a pin, read from the
  ``.pins.json`` manifest in the asset's folder (format: ``docs/auditing.md``; written by the
  fetch after every file was verified). Without a manifest the file is hashed and marked
  ``pinned: false``.

:class:`Hasher` hashes each file once per process (keyed on its size, mtime and inode, so a
file rewritten in between is hashed again) and counts the bytes and seconds it spent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from ..assets.verify import file_digest

MANIFEST = ".pins.json"
RECORD_SUFFIX = ".provenance.json"
# Snakemake marks a finished directory output with this file, after the job wrote its record.
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_BLOCK = 1 << 20


def file_sha256(path) -> str:
    """SHA-256 (hex) of the file at ``path``."""
    # hashlib releases the GIL on large blocks: threads hash files side by side.
    return file_digest(path, "sha256", chunk_size=_BLOCK)


def listed_files(folder) -> list[str]:
    """Relative POSIX paths of the files in ``folder`` (recursive, sorted), without manifests
    and provenance records."""
    folder = Path(folder)
    out = []
    for parent, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            if name in (MANIFEST, SNAKEMAKE_TIMESTAMP) or name.endswith(RECORD_SUFFIX):
                continue
            out.append((Path(parent) / name).relative_to(folder).as_posix())
    return sorted(out)


def tree_sha256(files: dict[str, str]) -> str:
    """Digest of a folder from ``{relative path: sha256}`` of its files (see the module)."""
    listing = "".join(f"{files[name]}  {name}\n" for name in sorted(files))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


class Hasher:
    """SHA-256 of files and folders, each file read once per process (thread-safe)."""

    def __init__(self):
        self._known: dict[tuple, str] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.seconds = 0.0
        self.files = 0

    def file(self, path) -> tuple[str, int]:
        """(sha256, size) of a file."""
        stat = os.stat(path)
        key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            known = self._known.get(key)
        if known is not None:
            return known, stat.st_size
        start = time.perf_counter()
        digest = file_sha256(path)
        with self._lock:
            self._known[key] = digest
            self.bytes += stat.st_size
            self.files += 1
            self.seconds += time.perf_counter() - start
        return digest, stat.st_size

    def folder(self, path) -> tuple[str, int, dict[str, str]]:
        """(tree sha256, total size, {relative path: sha256}) of a folder."""
        files, total = {}, 0
        for name in listed_files(path):
            files[name], size = self.file(Path(path) / name)
            total += size
        return tree_sha256(files), total, files

    def prefetch(self, paths: Iterable, workers: int = 2) -> None:
        """Hash many files (folders: their files) in ``workers`` threads, so that later calls
        find them known."""
        todo = []
        for path in paths:
            path = Path(path)
            if path.is_dir():
                todo += [path / name for name in listed_files(path)]
            elif path.is_file():
                todo.append(path)
        # Largest first: the long files start early and the threads finish together.
        todo.sort(key=lambda p: -p.stat().st_size)
        if workers <= 1 or len(todo) <= 1:
            for path in todo:
                self.file(path)
            return
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(self.file, todo))


# --- the .pins.json manifests of assets -----------------------------------------------------

class ManifestError(ValueError):
    """A ``.pins.json`` manifest that does not follow its format."""


def read_manifest(path) -> dict:
    """Read and check a ``.pins.json`` manifest; raise :class:`ManifestError` naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ManifestError(f"{path}: unreadable manifest ({type(err).__name__}: {err}).") \
            from err
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise ManifestError(f"{path}: a manifest needs a 'files' mapping.")
    for name, entry in files.items():
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or not name:
            raise ManifestError(f"{path}: file name {name!r} leaves the asset's folder.")
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and _HEX64.fullmatch(entry["sha256"].lower())
                and isinstance(entry.get("pinned"), bool)):
            raise ManifestError(f"{path}: entry {name!r} needs a 64-hex 'sha256' and a boolean "
                                "'pinned'.")
    return data


def find_manifest(path, resources_root) -> Path | None:
    """The ``.pins.json`` of the asset holding ``path`` (a file or folder inside
    ``resources_root``): the nearest one in ``path`` (a folder) or a folder above it, up to
    ``resources_root``."""
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(resources_root))
    folder = path if path.is_dir() else path.parent
    while True:
        candidate = folder / MANIFEST
        if candidate.is_file():
            return candidate
        if folder == root or root not in folder.parents:
            return None
        folder = folder.parent


def pinned_entry(path, resources_root, hasher: Hasher) -> dict:
    """Digest fields of an asset under ``resources_root``: from its manifest where one covers
    it (every file of a folder), else hashed with ``pinned: false``."""
    path = Path(path)
    manifest_path = find_manifest(path, resources_root)
    manifest = read_manifest(manifest_path) if manifest_path else None
    base = manifest_path.parent if manifest_path else None
    pins = manifest["files"] if manifest else {}
    if path.is_dir():
        files, pinned, total = {}, True, 0
        for name in listed_files(path):
            # relpath, not Path.relative_to: Snakemake hands relative paths, the manifest's
            # folder is absolute
            key = os.path.relpath(path / name, base).replace(os.sep, "/") if base else None
            size = (path / name).stat().st_size
            if key in pins:
                files[name] = pins[key]["sha256"].lower()
                pinned &= pins[key]["pinned"]
            else:  # a file no manifest lists: its bytes, unpinned
                files[name], size = hasher.file(path / name)
                pinned = False
            total += size
        entry = {"kind": "directory", "sha256": tree_sha256(files), "size": total,
                 "files": files, "pinned": pinned}
    else:
        key = os.path.relpath(path, base).replace(os.sep, "/") if base else None
        if key in pins:
            entry = {"sha256": pins[key]["sha256"].lower(), "size": path.stat().st_size,
                     "pinned": pins[key]["pinned"]}
        else:
            digest, size = hasher.file(path)
            entry = {"sha256": digest, "size": size, "pinned": False}
    if manifest:
        entry["manifest"] = os.path.relpath(manifest_path, resources_root).replace(os.sep, "/")
        for field in ("asset", "config_key", "source"):
            if field in manifest:
                entry[field] = manifest[field]
    return entry
