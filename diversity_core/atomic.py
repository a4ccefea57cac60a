"""Writing a file atomically, exactly where it was asked: the one helper every writer uses.

A result is either the complete file or absent, never half-written: the bytes go to a fresh
temporary file in the destination's folder, created exclusively (``tempfile.mkstemp``: a name
nobody chose before, opened with ``O_EXCL``, so a link planted in advance is never followed), and
the temporary file replaces the destination in one step (``os.replace``) only once it is written
and closed. An error on the way removes the temporary file and leaves the destination as it was.

The destination itself is checked first: a folder, or a symbolic link (which would send the
write elsewhere, or turn the output into that link), is refused with a ``ValueError`` naming it;
a missing folder is created.

* :func:`atomic_write`: a file object to write into (text or bytes);
* :func:`atomic_path`: a temporary path, for libraries that write by name (``savefig``,
  ``np.save``, ``DataFrame.to_csv``); the library's file keeps the destination's suffix.

>>> with atomic_write("results/table.csv", "w") as out:
...     out.write("a,b\\n1,2\\n")
>>> with atomic_path("results/figure.png") as tmp:
...     fig.savefig(tmp)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "atomic_write", "check_destination"]


def check_destination(path, *, what: str = "output") -> Path:
    """``path`` as a :class:`Path` if a file may be written there: not a folder, not a symbolic
    link (dangling or not); its folder is created. Raises ``ValueError`` naming the problem."""
    path = Path(path)
    if path.is_symlink():
        raise ValueError(f"{what} {path} is a symbolic link (to {os.readlink(path)}); refusing "
                         "to write through it. Remove it or choose another path.")
    if path.is_dir():
        raise ValueError(f"{what} {path} is a folder; give a file name.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create the folder of {what} {path}: {exc.strerror or exc}."
                         ) from None
    if not path.parent.is_dir():
        raise ValueError(f"the folder of {what} {path} is not a folder.")
    return path


@contextmanager
def atomic_path(path, *, what: str = "output") -> Iterator[Path]:
    """Yield a fresh temporary path beside ``path`` (same suffix) to write into; on success it
    replaces ``path`` (mode 0644), on an error it is removed. See the module docstring."""
    path = check_destination(path, what=what)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                                    dir=path.parent)
    except OSError as exc:
        raise ValueError(f"cannot write {what} {path}: {exc.strerror or exc}.") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_write(path, mode: str = "w", *, encoding: str | None = "utf-8", newline=None,
                 what: str = "output"):
    """Yield a file object (``mode`` ``"w"`` or ``"wb"``) whose bytes replace ``path`` once the
    block ends without an error. See the module docstring."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}.")
    with atomic_path(path, what=what) as tmp:
        if mode == "wb":
            with open(tmp, "wb") as out:
                yield out
        else:
            with open(tmp, "w", encoding=encoding, newline=newline) as out:
                yield out
