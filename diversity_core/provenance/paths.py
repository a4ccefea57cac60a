"""Paths inside the records' roots: names the pipeline can write, links that leave a root, and
reads that cannot be redirected out of it.

* :func:`name_problem`: why a name (walked or recorded) is not one the pipeline writes: not
  valid UTF-8, a control character (a newline would forge a line of the text report), longer
  than the file system allows;
* :func:`printable`: a text as one printable line, every control character, line separator and
  undecodable byte escaped (``\\n``, ``\\x1b``, ``\\xff``);
* :func:`leaves`: whether ``root/relative`` leaves ``root`` through a link (a folder's or the
  file's own), naming the first such link;
* :func:`open_inside`: open a regular file of a root for reading without following any link
  out of it. The path is resolved once, checked to lie inside the root, then opened component
  by component with ``O_NOFOLLOW`` from the root's descriptor: a link swapped in after the
  check makes the open fail instead of reading elsewhere. The standard library has no
  "openat beneath" (Linux's ``openat2(RESOLVE_BENEATH)`` is not exposed), hence this by hand.
"""

from __future__ import annotations

import os
import re
import stat as stat_
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

_KINDS = {stat_.S_IFREG: "a regular file", stat_.S_IFDIR: "a folder", stat_.S_IFIFO: "a FIFO",
          stat_.S_IFCHR: "a character device", stat_.S_IFBLK: "a block device",
          stat_.S_IFSOCK: "a socket"}


class NotRegularFile(ValueError):
    """A path that is there but is not a regular file (a FIFO, a device, a socket, a folder, a
    dangling link): never opened. ``kind`` says what it is."""

    def __init__(self, path, kind: str):
        super().__init__(f"{path} is {kind}, not a regular file: not read")
        self.path, self.kind = path, kind


def file_kind(path) -> str:
    """What ``path`` is, in words: ``"a regular file"``, ``"a folder"``, ``"a FIFO"``,
    ``"a character device"``, ``"a block device"``, ``"a socket"``, ``"a dangling link"`` or
    ``"not there"``; a symbolic link is described by its target (``"a link to a FIFO"``). Only
    ``stat`` is called: nothing is opened."""
    try:
        link = stat_.S_ISLNK(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return "not there"
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return "a dangling link" if link else "not there"
    kind = mode_kind(mode)
    return f"a link to {kind}" if link and kind not in ("a regular file", "a folder") else kind


def mode_kind(mode: int) -> str:
    """What a ``stat`` mode is, in words (``"a FIFO"``, ...; ``"a special file"`` otherwise)."""
    return _KINDS.get(stat_.S_IFMT(mode), "a special file")


@contextmanager
def regular_stream(fd: int, path, *, kind: str | None = None):
    """``(stream, size)`` of the file opened (non-blocking) as ``fd``, checked by ``fstat`` to be
    a regular file (else :class:`NotRegularFile`, named ``kind`` or by its mode) and switched to
    blocking reads; ``fd`` is closed on every way out."""
    try:
        status = os.fstat(fd)
        if not stat_.S_ISREG(status.st_mode):
            raise NotRegularFile(path, kind or mode_kind(status.st_mode))
        os.set_blocking(fd, True)
        stream = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    with stream:
        yield stream, status.st_size


# Linux's limits (PATH_MAX, NAME_MAX), in bytes: a recorded path beyond them cannot name a file.
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
# C0 and C1 control characters, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u0085]")
# What os.fsdecode makes of a byte that is not UTF-8 (surrogateescape): U+DC80..U+DCFF.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def name_problem(path: str) -> str | None:
    """Why ``path`` (a relative POSIX path) is not a name the pipeline writes, completing
    "its name ..."; None when it is one."""
    if _SURROGATE.search(path):
        return "is not valid UTF-8"
    if _CONTROL.search(path):
        return "holds a control character"
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES:,} bytes"
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in path.split("/")):
        return f"holds a name longer than {MAX_NAME_BYTES} bytes"
    return None


def printable(text: str) -> str:
    """``text`` on one printable line: control characters as ``\\n``, ``\\t``, ``\\x1b``…,
    bytes that were not UTF-8 as ``\\xff``, other lone surrogates as ``\\udXXX``."""
    def escaped(match):
        char = match.group()
        if "\udc80" <= char <= "\udcff":
            return f"\\x{ord(char) - 0xDC00:02x}"
        return ascii(char)[1:-1]

    return _SURROGATE.sub(escaped, _CONTROL.sub(escaped, text))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def leaves(root, relative: str, real_root: str | None = None) -> str | None:
    """None when ``root/relative`` stays inside ``root`` once every link on the way is
    followed (``root`` itself may be a link; ``real_root``: its ``realpath``, when the caller
    knows it); else ``"<the first link leaving> -> <its target>"``. Only ``lstat``,
    ``readlink`` and ``realpath`` are called: nothing is opened."""
    real_root = real_root or os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, relative))
    if _inside(real, real_root):
        return None
    root = Path(root)
    current = root
    for part in PurePosixPath(relative).parts:
        current = current / part
        if os.path.islink(current) and not _inside(os.path.realpath(current), real_root):
            try:
                target = os.readlink(current)
            except OSError:
                target = os.path.realpath(current)
            return f"{PurePosixPath(current.relative_to(root)).as_posix()} -> {target}"
    return f"{relative} -> {real}"


class LeavesRoot(ValueError):
    """A path that leaves its root through a link: not read."""

    def __init__(self, relative: str, link: str):
        super().__init__(f"{relative} leaves its folder through a link ({link}): not read")
        self.link = link


@contextmanager
def open_inside(root, relative: str):
    """Open the regular file ``root/relative`` for reading, following no link out of ``root``
    (see the module); yield ``(binary stream, size in bytes at opening)``. Raises
    :class:`LeavesRoot`, :class:`NotRegularFile` (nothing read) or ``OSError``."""

    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, relative))
    if not _inside(real, real_root):
        raise LeavesRoot(relative, leaves(root, relative) or f"{relative} -> {real}")
    parts = PurePosixPath(os.path.relpath(real, real_root)).parts
    if not parts or parts == (".",):
        raise NotRegularFile(Path(root) / relative, "a folder")
    nofollow = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=fd)
            os.close(fd)
            fd = below
        try:
            mode = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise
        if not stat_.S_ISREG(mode):  # a FIFO is never opened (it would wait for a writer)
            raise NotRegularFile(Path(root) / relative, file_kind(Path(root) / relative))
        file_fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | nofollow,
                          dir_fd=fd)
    finally:
        os.close(fd)
    with regular_stream(file_fd, Path(root) / relative, kind="not a regular file") as opened:
        yield opened
