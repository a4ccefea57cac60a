"""What a downloaded file's format promises, checked before it is kept, pinned or read.

* :func:`format_problem`: the magic bytes a zip, gzip, tar or parquet file starts (and, for
  parquet, ends) with, and an HTML page where data was expected (a server's error page sent with
  status 200): a file that fails is never kept or pinned;
* :func:`check_zip_members`: a zip archive's members checked from its directory (sizes, the
  inflation of each member, their total) before any member is read: the memory rule of the
  ``.npz`` readers (:data:`diversity_core.files.embeddings.MEMORY_RULE`) for archives of text.
"""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

__all__ = [
    "MAX_MEMBER_INFLATION",
    "check_regular",
    "check_zip_members",
    "expected_format",
    "format_problem",
]

# A format by its file name's ending (the longest that matches).
_BY_SUFFIX = ((".tar.gz", "gzip"), (".tgz", "gzip"), (".gz", "gzip"), (".zip", "zip"),
              (".tar", "tar"), (".parquet", "parquet"))


def expected_format(name: str) -> str | None:
    """The format a file name promises ("zip", "gzip", "tar", "parquet") or None."""
    lower = str(name).lower()
    return next((kind for suffix, kind in _BY_SUFFIX if lower.endswith(suffix)), None)


def check_regular(path, *, what: str) -> None:
    """Refuse ``path`` unless it is a regular file (a link to one included): a FIFO would block
    its reader for ever, a device (``/dev/zero``) never end. Raises ``ValueError`` naming it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ValueError(f"{what}: {path} does not exist (a dangling link?); delete it.") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{what}: {path} is not a regular file (a FIFO, a device or a folder); "
                         "it is not read. Delete it.")


def _looks_like_html(head: bytes) -> bool:
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml"))


def format_problem(path, kind: str | None = None) -> str | None:
    """Why ``path`` is not a file of ``kind`` (default: :func:`expected_format` of its name), in
    words, or None. Any file that is an HTML (or XML) page is refused unless so named
    (``.html``, ``.xml``); a file of no known kind is otherwise not judged."""
    path = Path(path)
    kind = expected_format(path.name) if kind is None else kind
    with open(path, "rb") as stream:
        head = stream.read(512)
        size = stream.seek(0, os.SEEK_END)
        stream.seek(max(size - 4, 0))
        tail = stream.read(4)
    if _looks_like_html(head) and not path.name.lower().endswith((".html", ".htm", ".xml")):
        return "an HTML page (a server's error or login page?)"
    if kind == "zip" and not head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "not a zip archive (no PK signature)"
    if kind == "gzip" and not head.startswith(b"\x1f\x8b"):
        return "not gzip-compressed (no gzip magic bytes)"
    if kind == "tar" and head[257:262] != b"ustar":
        return "not a tar archive (no ustar header)"
    if kind == "parquet" and not (head.startswith(b"PAR1") and tail == b"PAR1" and size >= 12):
        return "not a parquet file (no PAR1 magic bytes at both ends)"
    return None


# A member of an archive of text may inflate at most this many times its compressed size, and
# only past the floor: CSV and JSON text deflates 3 to 10 times, a bomb of one repeated byte
# a thousandfold. The same bound as the .npz readers' (embedding_files.MAX_INFLATION).
MAX_MEMBER_INFLATION = 100
_INFLATION_FLOOR = 256 << 20


def check_zip_members(archive: zipfile.ZipFile, *, what: str, archive_size: int,
                      names=None) -> None:
    """Check the members ``names`` (default: all) of ``archive`` from its directory alone:
    each may inflate to at most :data:`MAX_MEMBER_INFLATION` times its compressed size or 256
    MiB, whichever is larger, and to no more than the memory available. Raises ``ValueError``
    naming ``what`` (the archive and its configuration key) and the first member that fails."""
    from .._memory import available_memory

    names = set(archive.namelist() if names is None else names)
    budget = available_memory()
    for info in archive.infolist():
        if info.filename not in names:
            continue
        limit = max(MAX_MEMBER_INFLATION * max(info.compress_size, 1), _INFLATION_FLOOR)
        if info.file_size > min(limit, budget) or info.compress_size > archive_size:
            raise ValueError(
                f"{what}: member {info.filename!r} declares {info.file_size} bytes from "
                f"{info.compress_size} compressed (a zip bomb, or more than the memory "
                f"available): not read. A member may inflate {MAX_MEMBER_INFLATION}-fold or to "
                f"{_INFLATION_FLOOR >> 20} MiB, whichever is larger.")
