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

Only regular files are read, and each read is bounded: a FIFO, a device file or a
socket (or a link to one) is never opened (:class:`NotRegularFile`); a file is read up to the
size it had when it was opened, and one that grows meanwhile (a log being written, a ``/proc``
file) is an error, not an endless read. A folder's walk lists its regular files, follows no
link to a folder inside it, and sets aside (:func:`scan_folder`) what it did not read; it stops
with an error past :data:`MAX_FOLDER_ENTRIES` entries. :meth:`Hasher.prefetch` runs at most
:data:`MAX_WORKERS` threads, and they stop with it (an exception or Ctrl-C in the caller).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from .paths import NotRegularFile, file_kind, leaves, name_problem, printable, regular_stream

MANIFEST = ".pins.json"
RECORD_SUFFIX = ".provenance.json"
# Snakemake marks a finished directory output with this file, after the job wrote its record.
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"
# A SHA-256 as records and manifests write it: 64 lowercase hexadecimal digits.
HEX64 = re.compile(r"[0-9a-f]{64}")
_BLOCK = 1 << 20
# Threads that hash files side by side (hashlib releases the GIL on large blocks): beyond a few,
# the disk, not the CPU, is the limit; 32 keeps a typo (--workers 10000) from spawning thousands.
MAX_WORKERS = 32
# Entries (files and folders) one folder's walk visits before it stops with an error: a full
# default run's largest folder holds a few thousand; a link to / would otherwise walk the disk.
MAX_FOLDER_ENTRIES = 200_000
# The largest manifest or provenance record read (bytes): a record of a folder of thousands of
# files is a few hundred kB; the bound keeps a planted multi-GB "record" from filling memory.
MAX_JSON_BYTES = 64 << 20


class Stopped(Exception):
    """Hashing was stopped from outside (:meth:`Hasher.stop`: the audit ends)."""




@contextmanager
def open_regular(path) -> Iterator[tuple]:
    """Open ``path`` for reading if it is a regular file (a link to one included); yield
    ``(binary file object, size in bytes at opening)``. Anything else raises
    :class:`NotRegularFile` before it is opened: opening a FIFO waits for a writer, a device
    can stream forever. The descriptor is checked again after opening (``O_NONBLOCK``: even a
    FIFO swapped in between does not wait), so a race cannot slip one through."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.lexists(path):
            raise NotRegularFile(path, "a dangling link") from None
        raise
    if not stat_.S_ISREG(mode):
        raise NotRegularFile(path, file_kind(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    with regular_stream(fd, path) as opened:
        yield opened


def read_blocks(path, *, stop: threading.Event | None = None,
                limit: int | None = None) -> Iterator[bytes]:
    """The bytes of the regular file ``path``, in blocks of at most 1 MiB, read up to the size
    it had when opened (a bounded read). Raises :class:`NotRegularFile` (see
    :func:`open_regular`), ``ValueError`` if the file is larger than ``limit`` bytes or grew
    while it was read, :class:`Stopped` once ``stop`` is set."""
    with open_regular(path) as (stream, size):
        yield from stream_blocks(stream, size, path, stop=stop, limit=limit)


def stream_blocks(stream, size: int, path, *, stop: threading.Event | None = None,
                  limit: int | None = None) -> Iterator[bytes]:
    """The blocks of an opened regular file (:func:`read_blocks`, which opens it; the crate
    opens through :func:`.paths.open_inside`), up to ``size``, the size it had when opened."""
    if limit is not None and size > limit:
        raise ValueError(f"{path} is {size:,} bytes, more than the {limit:,} it may hold")
    left = size
    while left > 0:
        if stop is not None and stop.is_set():
            raise Stopped(str(path))
        block = stream.read(min(_BLOCK, left))
        if not block:  # truncated while read: the bytes hashed are all there is
            return
        left -= len(block)
        yield block
    # One byte past the size it had: a file still being written (or a /proc file, whose
    # size says 0) would make the digest that of a moment, not of the file.
    if stream.read(1):
        raise ValueError(f"{path} grew while it was read ({size:,} bytes at opening): "
                         "it is still being written")


def read_bounded(path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, refused (``ValueError``) beyond ``limit`` bytes
    before any is read (:func:`read_blocks`)."""
    return b"".join(read_blocks(path, limit=limit))


def file_sha256(path, *, stop: threading.Event | None = None) -> str:
    """SHA-256 (hex) of the regular file at ``path`` (a bounded read: :func:`read_blocks`)."""
    h = hashlib.sha256()
    for block in read_blocks(path, stop=stop):
        h.update(block)  # hashlib releases the GIL on large blocks: threads hash side by side
    return h.hexdigest()


def walk_bounded(top, *, limit: int, refusal: str,
                 onerror=None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top, onerror=onerror)``, stopped with a ``ValueError`` once it has visited more
    than ``limit`` entries (files and folders): a link to ``/`` or a planted tree would
    otherwise walk the disk. ``refusal`` ends the message (what ``top`` is not; what is not done).
    """
    seen = 0
    for parent, dirs, names in os.walk(top, onerror=onerror):
        seen += len(dirs) + len(names)
        if seen > limit:
            raise ValueError(f"{top} holds more than {limit:,} entries: {refusal}")
        yield parent, dirs, names


def scan_folder(folder) -> tuple[list[str], dict[str, str]]:
    """``(files, set_aside)`` of ``folder``: the relative POSIX paths of its regular files
    (recursive, sorted; a link to a regular file inside the folder counts as one, as before),
    without manifests, provenance records and Snakemake's marker; and ``{relative path: what it
    is}`` of what the walk did not read: FIFOs, devices, sockets, dangling links and links to
    them, links to folders (not followed: ``find -type f`` does not follow them either), links
    to a file outside the folder (a folder's digest vouches only for its own bytes),
    names that are not valid UTF-8 or hold a control character. Raises ``ValueError`` past
    :data:`MAX_FOLDER_ENTRIES` entries."""

    folder = Path(folder)
    out, aside = [], {}
    for parent, dirs, files in walk_bounded(
            folder, limit=MAX_FOLDER_ENTRIES,
            refusal="not a folder the pipeline wrote or fetched; not walked further"):
        here = Path(parent)
        for name in list(dirs):
            if os.path.islink(here / name):  # os.walk would not descend; say so
                aside[(here / name).relative_to(folder).as_posix()] = "a link to a folder"
                dirs.remove(name)
        dirs.sort()
        for name in files:
            if name in (MANIFEST, SNAKEMAKE_TIMESTAMP) or name.endswith(RECORD_SUFFIX):
                continue
            relative = (here / name).relative_to(folder).as_posix()
            kind = file_kind(here / name)
            problem = name_problem(relative)
            if problem:
                aside[relative] = f"its name {problem}"
            elif kind == "a regular file" and os.path.islink(here / name) \
                    and leaves(folder, relative):
                aside[relative] = f"a link leaving the folder ({leaves(folder, relative)})"
            elif kind == "a regular file":
                out.append(relative)
            else:
                aside[relative] = kind
    return sorted(out), dict(sorted(aside.items()))


def listed_files(folder) -> list[str]:
    """Relative POSIX paths of the regular files in ``folder`` (recursive, sorted), without
    manifests and provenance records (:func:`scan_folder`, without what it set aside)."""
    return scan_folder(folder)[0]


def tree_sha256(files: dict[str, str]) -> str:
    """Digest of a folder from ``{relative path: sha256}`` of its files (see the module)."""
    listing = "".join(f"{files[name]}  {name}\n" for name in sorted(files))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


class Hasher:
    """SHA-256 of files and folders, each file read once per process (thread-safe)."""

    def __init__(self):
        self._known: dict[tuple, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.bytes = 0
        self.seconds = 0.0
        self.files = 0
        # {folder (absolute): {relative path: what it is}}: what folder walks set aside.
        self.set_aside: dict[str, dict[str, str]] = {}

    def stop(self) -> None:
        """Make every hash in progress (in any thread) stop at its next block."""
        self._stop.set()

    def file(self, path) -> tuple[str, int]:
        """(sha256, size in bytes) of a regular file; :class:`NotRegularFile` for anything
        else (nothing opened), ``OSError`` when it cannot be read."""
        stat = os.stat(path)
        if not stat_.S_ISREG(stat.st_mode):
            raise NotRegularFile(path, file_kind(path))
        key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            known = self._known.get(key)
        if known is not None:
            return known, stat.st_size
        start = time.perf_counter()
        digest = file_sha256(path, stop=self._stop)
        with self._lock:
            self._known[key] = digest
            self.bytes += stat.st_size
            self.files += 1
            self.seconds += time.perf_counter() - start
        return digest, stat.st_size

    def folder(self, path) -> tuple[str, int, dict[str, str]]:
        """(tree sha256, total size in bytes, {relative path: sha256}) of a folder's regular
        files; what the walk set aside is kept in :attr:`set_aside`."""
        files, total = {}, 0
        for name in self.folder_names(path):
            files[name], size = self.file(Path(path) / name)
            total += size
        return tree_sha256(files), total, files

    def prefetch(self, paths: Iterable, workers: int = 2) -> None:
        """Hash many files (folders: their regular files) in ``workers`` threads (1 to
        :data:`MAX_WORKERS`), so that later calls find them known. A file that cannot be hashed
        is left for the later call, which says why in its context. An exception or Ctrl-C in
        the caller stops the threads at their next block and cancels what had not started:
        they end with the call, not after it."""
        check_workers(workers)
        todo = []
        for path in paths:
            path = Path(path)
            try:
                if path.is_dir():
                    todo += [path / name for name in self.folder_names(path)]
                elif path.is_file():
                    todo.append(path)
            except (OSError, ValueError):
                continue  # said where the folder is checked
        # Largest first: the long files start early and the threads finish together.
        todo.sort(key=_size_descending)
        if workers == 1 or len(todo) <= 1:
            for path in todo:
                self._quietly(path)
            return
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit-hash")
        try:
            wait([pool.submit(self._quietly, path) for path in todo])
        except BaseException:
            # Ctrl-C (KeyboardInterrupt) or an error here: stop the running hashes at their
            # next block, drop the queued ones, and wait for the threads to end.
            self._stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            self._stop.clear()
            raise
        pool.shutdown(wait=True)

    def folder_names(self, path) -> list[str]:
        """The regular files of a folder (:func:`scan_folder`), keeping what it set aside."""
        names, aside = scan_folder(path)
        if aside:
            with self._lock:
                self.set_aside[os.path.abspath(path)] = aside
        return names

    def _quietly(self, path) -> None:
        try:
            self.file(path)
        except (OSError, ValueError):
            pass  # the audit's own call for this file reports it


def _size_descending(path: Path) -> int:
    try:
        return -path.stat().st_size
    except OSError:
        return 0


def check_workers(workers) -> int:
    """``workers`` if it is an integer from 1 to :data:`MAX_WORKERS`, else ``ValueError``."""
    if isinstance(workers, bool) or not isinstance(workers, int) \
            or not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be an integer from 1 to {MAX_WORKERS} (threads that "
                         f"hash files); got {workers!r}.")
    return workers


# --- the .pins.json manifests of assets -----------------------------------------------------

class ManifestError(ValueError):
    """A ``.pins.json`` manifest that does not follow its format."""


def read_manifest(path) -> dict:
    """Read and check a ``.pins.json`` manifest; raise :class:`ManifestError` naming it."""
    path = Path(path)
    try:
        data = json.loads(read_bounded(path, MAX_JSON_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise ManifestError(f"{path}: unreadable manifest ({type(err).__name__}: {err}).") \
            from err
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise ManifestError(f"{path}: a manifest needs a 'files' mapping.")
    for field in ("asset", "config_key", "source"):
        if data.get(field) is not None and not isinstance(data[field], str):
            raise ManifestError(f"{path}: field {field} is {type(data[field]).__name__}, not a "
                                "string.")

    for name, entry in files.items():
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or not name:
            raise ManifestError(f"{path}: file name {printable(name[:200])!r} leaves the "
                                "asset's folder.")
        if name_problem(name):
            raise ManifestError(f"{path}: file name {printable(name[:200])!r} "
                                f"{name_problem(name)}.")
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and HEX64.fullmatch(entry["sha256"].lower())
                and isinstance(entry.get("pinned"), bool)):
            raise ManifestError(f"{path}: entry {printable(name[:200])!r} needs a 64-hex "
                                "'sha256' and a boolean 'pinned'.")
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
