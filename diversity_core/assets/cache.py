"""Caches that several processes may share (embeddings per text or image, generated sets per
prompt): read with their corruption named, written under a lock to unique temporary names, and
merged with what another process wrote meanwhile.

A cache is one file. :func:`read_cache` returns its content or None (absent), and treats a file
it cannot read (truncated by a full disk, a killed writer of an older version, a foreign file) as
absent after logging its path and why: it is rebuilt, never used and never a bare
``BadZipFile``. A file that reads but does not hold what the cache must (vectors of another width
than the model's, a NaN: the reader raises :class:`CacheContentError`) is treated the same way,
and the log says so: the fault is the cache's, not the input's; a FIFO or a device in its place is
never opened. :func:`update_cache` holds the cache's lock (``.<name>.lock`` beside it, with
:mod:`filelock`), re-reads what is on disk now, lets the caller merge its own entries into it,
writes the result to a temporary file of its own (``.<name>.<random>.tmp<suffix>``) and renames
it over the cache: two writers never share a temporary name, and neither loses the other's
entries. Temporary files a killed writer left are removed under the lock.
"""

from __future__ import annotations

import logging
import re
import stat
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..atomic import atomic_path

__all__ = ["CacheContentError", "cache_lock", "read_cache", "update_cache"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class CacheContentError(ValueError):
    """Raised by a cache's reader for a file it could read whose content is not what the cache
    must hold (another shape or dtype, a non-finite value): logged as such, and rebuilt."""


# What a reader of a damaged cache raises: numpy's npz reader (zipfile), json, pickle-free
# readers' own ValueError / KeyError for a missing array, EOFError for a truncated stream.
_UNREADABLE = (zipfile.BadZipFile, EOFError, ValueError, KeyError, OSError, UnicodeDecodeError)


@contextmanager
def cache_lock(path) -> Iterator[Path]:
    """Hold the lock of the cache ``path`` (``.<name>.lock`` beside it) and remove the temporary
    files that killed writers of it left; yields ``path``."""
    from filelock import FileLock

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.parent / f".{path.name}.lock")):
        leftover = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}\.tmp.*")
        for stale in path.parent.iterdir():
            if leftover.fullmatch(stale.name):
                log.warning("removing %s, left by an interrupted cache write", stale)
                stale.unlink(missing_ok=True)
        yield path


def read_cache(path, read: Callable[[Path], T], *, what: str) -> T | None:
    """``read(path)``; None if ``path`` does not exist or cannot be read (logged with the path and
    the reason, so that the caller rebuilds it). A folder at ``path`` is a ``ValueError``."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(mode):  # no file can be written there either: said, not logged
        raise ValueError(f"{what}: the cache {path} is a folder; remove it or choose another "
                         "cache folder.")
    if not stat.S_ISREG(mode):
        # Opened by name, a FIFO would wait for a writer forever and a device never end.
        log.warning("%s: the cache %s is not a regular file; it is rebuilt.", what, path)
        return None
    try:
        return read(path)
    except CacheContentError as exc:
        log.warning("%s: the cache %s does not hold what it must (%s); it is rebuilt.", what,
                    path, exc)
        return None
    except _UNREADABLE as exc:
        log.warning("%s: the cache %s is unreadable (%s: %s); it is rebuilt.", what, path,
                    type(exc).__name__, exc)
        return None


def update_cache(path, read: Callable[[Path], T], merge: Callable[[T | None], T],
                 write: Callable[[Path, T], None], *, what: str) -> T:
    """Replace the cache ``path`` with ``merge(what is on disk now)``, under its lock; return it.

    ``read(path)`` reads the cache (see :func:`read_cache`: unreadable is None), ``merge`` adds
    the caller's entries to it, ``write(tmp, merged)`` writes a file at ``tmp`` (a unique
    temporary name ending in the cache's suffix, e.g. ``.npz``, so that ``numpy.savez`` keeps it),
    which is then renamed over ``path`` in one step.
    """
    path = Path(path)
    with cache_lock(path):  # read_cache refuses a folder in the cache's place
        merged = merge(read_cache(path, read, what=what))
        with atomic_path(path, what=what) as tmp:  # .<name>.<random>.tmp<suffix>, as below
            write(tmp, merged)
    return merged
