"""Opening the user's files: regular files only, never blocking, judged by their first bytes.

:class:`InputError` is the one error of a problem with the user's files or options (reported
in one line, exit status 2, by the command line). :func:`open_regular` opens a file only when
it is a regular file (a FIFO, a device, a socket or a directory is refused before a byte is
read, so nothing can hang); :func:`sniff` says what a file holds by its first bytes.
Used by the readers of embedding files (:mod:`.embeddings`) and of raw data
(:mod:`.embed.raw`).
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

__all__ = ["KIND_NAMES", "InputError", "file_kind", "open_regular", "sniff"]

_FORMAT_LIST = ".npy, .npz or .csv"


class InputError(ValueError):
    """A problem with the user's files or options: reported in one line, without a traceback."""


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a file of this ``stat`` mode is, in words, when it is not a regular file ("a
    directory", "a FIFO (named pipe)", "a character device", ...)."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def open_regular(path, shown: str | None = None, *, expected: str = f"a {_FORMAT_LIST} file"):
    """The file opened for binary reading, if it is a regular file; else :class:`InputError`
    naming it (``shown``, default ``path``) and saying what to give instead (``expected``).

    O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; ``fstat`` on the
    open descriptor (not ``stat`` on the name) judges the very file that would be read."""
    path = Path(path)
    shown = str(path) if shown is None else shown
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
             | getattr(os, "O_CLOEXEC", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        link = " (a symbolic link to a missing file)" if path.is_symlink() else ""
        raise InputError(f"{shown}: no such file{link}.") from None
    except PermissionError:
        raise InputError(f"{shown}: permission denied.") from None
    except OSError as err:
        raise InputError(f"{shown}: cannot open it ({err.strerror or err}).") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{shown} is {file_kind(mode)}, not a regular file; give {expected}.")
    return os.fdopen(fd, "rb")


KIND_NAMES = {"npy": "a NumPy .npy array", "npz": "a .npz (zip) archive",
               "pickle": "a Python pickle (never loaded: unpickling can run code)",
               "text": "text", "binary": "binary data of an unknown format", "empty": "nothing"}


def sniff(head: bytes) -> str:
    """What the first bytes of a file say it holds: a key of :data:`KIND_NAMES`."""
    if not head:
        return "empty"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "npz"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "text"
    return "binary" if b"\x00" in head else "text"
