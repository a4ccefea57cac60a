"""What a downloaded file is, checked before it is kept, pinned or read.

* :func:`format_problem`: what a file *is*, by its format's magic bytes or its parser (zip,
  gzip, tar, parquet, pickle, JSON, safetensors, PyTorch weights, UTF-8 text), and what an
  archive must hold, each member once (:func:`archive_members`); a file that fails is never
  kept or pinned. A file of no known kind is still refused if it is an HTML (or XML) page (a
  server's error page sent with status 200), in any of the encodings a browser would read it
  in and behind leading comments;
* :func:`check_zip_members`: a zip archive's members checked from its directory (sizes, the
  inflation of each member, their total) before any member is read: the memory rule of the
  ``.npz`` readers (:data:`diversity_core.files.embeddings.MEMORY_RULE`) for archives of text.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "MAX_MEMBER_INFLATION",
    "archive_members",
    "check_regular",
    "check_zip_members",
    "expected_format",
    "format_problem",
]

# A format by its file name's ending (the longest that matches).
_BY_SUFFIX = ((".tar.gz", "gzip"), (".tgz", "gzip"), (".gz", "gzip"), (".zip", "zip"),
              (".tar", "tar"), (".parquet", "parquet"), (".safetensors", "safetensors"),
              (".json", "json"), (".pt", "torch"), (".pth", "torch"), (".pkl", "pickle"),
              (".pickle", "pickle"), (".txt", "text"), (".csv", "text"), (".jsonl", "text"))


def expected_format(name: str) -> str | None:
    """The format a file name promises (a kind of :func:`format_problem`) or None."""
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


# The byte-order marks a browser honours, and the encodings they announce.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))
_MARKUP = ("<!doctype", "<html", "<head", "<body", "<?xml", "<meta", "<title", "<script",
           "<style", "<!--")
_COMMENT = re.compile(r"\s*<!--.*?-->", re.DOTALL)


def _as_text(head: bytes) -> str:
    """The start of a file as a browser would decode it: by its byte-order mark, else UTF-16
    when every other byte is NUL (UTF-16 without a mark), else UTF-8 (errors replaced)."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return head[len(bom):].decode(encoding, errors="replace")
    sample = head[:64]
    if len(sample) >= 4 and sample[1::2].count(0) >= len(sample) // 2 - 1:
        return head.decode("utf-16-le", errors="replace")
    if len(sample) >= 4 and sample[0::2].count(0) >= len(sample) // 2 - 1:
        return head.decode("utf-16-be", errors="replace")
    return head.decode("utf-8", errors="replace")


def _looks_like_html(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a markup page: HTML or XML, in UTF-8, UTF-16 or
    UTF-32, after whitespace and any number of comments."""
    text = _as_text(head).lstrip()
    while (comment := _COMMENT.match(text)) is not None:
        text = text[comment.end():].lstrip()
    return text.lower().startswith(_MARKUP)


# A JSON file is parsed whole up to this size (configuration and tokenizer files take a few MB).
_MAX_JSON_PARSE = 64 << 20


def _kind_problem(path: Path, kind: str, head: bytes, tail: bytes, size: int) -> str | None:
    """Why a file whose first bytes are ``head`` and last four ``tail`` is not of ``kind``."""
    if kind == "zip":
        return None if head.startswith((b"PK\x03\x04", b"PK\x05\x06")) else (
            "not a zip archive (no PK signature)")
    if kind == "gzip":
        return None if head.startswith(b"\x1f\x8b") else (
            "not gzip-compressed (no gzip magic bytes)")
    if kind == "tar":
        return None if head[257:262] == b"ustar" else "not a tar archive (no ustar header)"
    if kind == "parquet":
        return None if head.startswith(b"PAR1") and tail == b"PAR1" and size >= 12 else (
            "not a parquet file (no PAR1 magic bytes at both ends)")
    if kind == "pickle":
        return None if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") \
            else "not a pickle (no header of pickle protocol 2 to 5)"
    if kind == "torch":  # torch.save: a zip archive (PyTorch 1.6 on) or a pickle (before)
        return None if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80" else (
            "not PyTorch weights (neither a zip archive nor a pickle)")
    if kind == "safetensors":  # an 8-byte little-endian header length, then a JSON object
        length = struct.unpack("<Q", head[:8])[0] if len(head) >= 9 else 0
        return None if 2 <= length <= size - 8 and head[8:9] == b"{" else (
            "not a safetensors file (no header of JSON after its length)")
    if kind == "json":
        if size > _MAX_JSON_PARSE:
            return None if head.lstrip()[:1] in (b"{", b"[") else "not JSON"
        try:
            json.loads(path.read_bytes().decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            return f"not JSON in UTF-8 ({type(exc).__name__}: {str(exc)[:80]})"
        return None
    if kind == "text":
        cut = head if len(head) < 4096 else head[:-3]  # a character cut at the end of the head
        try:
            cut.decode("utf-8")
        except UnicodeDecodeError:
            return "not UTF-8 text"
        return "not text (it holds NUL bytes)" if b"\0" in head else None
    raise ValueError(f"unknown file format {kind!r}")


def format_problem(path, kind: str | None = None, members: Iterable[str] = ()) -> str | None:
    """Why ``path`` is not a file of ``kind`` (default: :func:`expected_format` of its name), in
    words, or None: its magic bytes, or its parser (JSON); with ``members``, what the archive
    must hold, each once (:func:`archive_members`); a zip archive's directory is read whole, and
    one that holds a name twice is refused. Any file that is an HTML (or XML) page is refused
    unless so named (``.html``, ``.xml``); a file of no known kind is otherwise not judged."""
    path = Path(path)
    kind = expected_format(path.name) if kind is None else kind
    with open(path, "rb") as stream:
        head = stream.read(4096)
        size = stream.seek(0, os.SEEK_END)
        stream.seek(max(size - 4, 0))
        tail = stream.read(4)
    if _looks_like_html(head) and not path.name.lower().endswith((".html", ".htm", ".xml")):
        return "an HTML page (a server's error or login page?)"
    problem = None if kind is None else _kind_problem(path, kind, head, tail, size)
    try:
        if problem is None and members:
            archive_members(path, kind, members)
        if problem is None and kind == "zip":  # its directory is cheap to read: read whole
            _repeated(_member_names(path, kind))
    except ValueError as exc:
        return str(exc)
    return problem


def _repeated(names: list[str]) -> None:
    """``ValueError`` in words for an archive that holds a name twice (which is meant?)."""
    seen, twice = set(), []
    for name in names:
        if name in seen and name not in twice:
            twice.append(name)
        seen.add(name)
    if twice:
        raise ValueError(f"an archive that holds {', '.join(twice[:3])} more than once: which "
                         "one is meant would be a guess")


def _member_names(path: Path, kind: str | None) -> list[str]:
    """The names of the regular files of the archive ``path`` (zip, or tar, compressed or not),
    in its order; ``ValueError`` in words for one that cannot be read."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                return [info.filename for info in archive.infolist() if not info.is_dir()]
        with tarfile.open(path) as archive:
            return [member.name for member in archive if member.isfile()]
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ValueError(f"not a readable {kind or 'tar'} archive ({type(exc).__name__}: "
                         f"{exc})") from None


def archive_members(path, kind: str | None, required: Iterable[str]) -> dict[str, str]:
    """Each name of ``required`` -> the one member of the archive ``path`` (``kind`` "zip", else
    a tar, compressed or not) that it names: a name with a ``/`` names the member of that path
    (``cifar-10-batches-py/data_batch_1``), a name without one the member of that base name in
    any folder (``DD_A.txt``).

    Raises ``ValueError`` in words ("an archive without ...", "an archive that holds ... twice")
    when a name has no member or several: which one is meant would be a guess.
    """
    names = [name.removeprefix("./") for name in _member_names(Path(path), kind)]
    found, missing, repeated = {}, [], []
    for want in required:
        hits = [n for n in names if (n == want if "/" in want else n.rsplit("/", 1)[-1] == want)]
        if not hits:
            missing.append(want)
        elif len(hits) > 1:
            repeated.append(f"{want} {len(hits)} times ({', '.join(hits[:4])})")
        else:
            found[want] = hits[0]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ValueError(f"an archive without {', '.join(missing[:3])}{more}")
    if repeated:
        raise ValueError(f"an archive that holds {'; '.join(repeated)}: which one is meant "
                         "would be a guess")
    return found


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
