"""Reading embedding files (``.npy``, ``.npz``, ``.csv``) as the user meant, or not at all.

One reader for every command (``score``, ``compare``): :func:`read_embeddings` returns the array
(float64, shape (n_points, n_features)) with a description of what was read (points ×
dimensions, the header or its absence, the columns kept), and raises :class:`InputError` with a
one-line message naming the file (and the line and column of a CSV) for anything else.

* **Regular files only.** The file is opened without blocking and checked with ``fstat``: a FIFO,
  a character device (``/dev/zero``, ``/dev/urandom``, also behind a symbolic link named
  ``x.csv``), a socket or a directory is refused before a byte is read, so nothing can hang.
* **The content must be what the extension says.** The first bytes decide: ``\\x93NUMPY`` is a
  ``.npy``, a zip archive an ``.npz``, a pickle is never loaded; a file whose content and name
  disagree is refused with what it actually holds. A ``.npy`` header is checked (a numeric dtype,
  2-D, the file as long as the header promises) before its data are read.
* **Sizes before bytes** (:data:`MEMORY_RULE`): an array's shape and dtype are read from its
  header — a ``.npy`` file's, or an ``.npz`` member's through :meth:`zipfile.ZipFile.open`, with
  the sizes the archive's directory gives — and the memory reading it takes is checked before
  a byte of data is read or decompressed: a small ``.npz`` of compressed zeros is refused, not
  inflated to gigabytes.
* **CSV**: comma-separated numbers, one point per line, in UTF-8 (a byte-order mark is removed and
  said; UTF-16 with its BOM is read too). Blank lines and lines starting with ``#`` (what
  ``numpy.savetxt`` writes before a header) are skipped and counted. A number is ASCII
  ``[+-]digits[.digits][e[+-]digits]`` or ``nan``/``inf`` (which the finiteness check then
  names), optionally in double quotes; nothing else (no ``1_000``, no non-ASCII digits, no
  ``0x1p3``) is read as a number.

  *Header* (:data:`HEADER_RULE`): with ``header=None`` (the default) the first line that is not
  blank or a comment is a header when none of its fields is a number (``a,b,c``; a line of
  empty fields only is a row of missing values, refused as such), or when its
  first field is empty and the others are names or ``0 … k-1`` (the header pandas and R write
  over an index column: ``,a,b,c`` or ``,0,1,2``); it is a data row when every field is a
  number — except when every field is a whole number (no sign, point or exponent) and they are
  either ``0 … d-1`` (the header ``DataFrame.to_csv`` writes for unnamed columns) or stand above
  rows of decimals (numeric column names, such as wavelengths): that file is refused until
  ``header`` says which (``--header`` / ``--no-header``), since either reading is possible. A
  line that mixes numbers and text (or empty fields) is refused too. So no data row is taken
  for a header, and no header that a tool writes for unnamed or numbered columns becomes a
  point. (Numeric column names other than ``0 … d-1`` above rows of whole numbers only, and an
  index column in a file of one row, cannot be told from data; say ``--header`` and
  ``--index-column drop`` there.)

  *Index column* (:data:`INDEX_RULE`): a first column whose header is empty or ``Unnamed: 0``
  (what pandas and R write over an index), or whose values count ``0 … n-1`` or ``1 … n`` in
  whole numbers (no sign, point or exponent: a row number) while other columns hold decimals
  (what ``to_csv(header=False)`` writes), is an index, not a feature. It is refused unless
  ``index_column="drop"`` (drop it) or ``"keep"`` (it is a feature after all). (An integer-valued
  set whose first column counts 0, 1, 2, ... is left alone: points on a grid look like that.)

The rooms: opening a file and :class:`InputError` in :mod:`.regular`, the CSV reader in
:mod:`.embedding_csv`; this module reads ``.npy`` and ``.npz`` files, checks every array, and
re-exports what the others need (``InputError``, ``file_kind``, ``open_regular``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from .embedding_csv import read_csv
from .regular import KIND_NAMES, InputError, file_kind, open_regular, sniff

__all__ = ["FORMATS", "HEADER_RULE", "INDEX_RULE", "MEMORY_RULE", "EmbeddingFile", "InputError",
           "check_npz_sizes", "file_kind", "open_regular", "read_embeddings"]

FORMATS = (".npy", ".npz", ".csv")
_FORMAT_LIST = ".npy, .npz or .csv"
INDEX_CHOICES = (None, "drop", "keep")

HEADER_RULE = (
    "the first line is a header when none of its fields is a number (not all of them empty: "
    "that is a row of missing values), or when its first field is "
    "empty (an index column) and the others are names or 0..k-1; a data row when every "
    "field is a number, except whole numbers (no sign, point or exponent) that are 0..d-1 or "
    "stand above rows of decimals: those are ambiguous and need --header or --no-header; a "
    "line mixing numbers and text is refused")
INDEX_RULE = (
    "a first column is an index when its header is empty or 'Unnamed: 0', or when its values "
    "count 0..n-1 or 1..n in whole numbers (no sign, point or exponent) beside columns of "
    "decimals")


# Reading an array takes its bytes as stored plus a float64 copy. A .npy file cannot make that
# more than 9 times its own size (int8 data), whereas a compressed .npz member can inflate a
# thousandfold or more (deflate of zeros; bzip2 and lzma further): the bound below is far above
# what any uncompressed file needs and far below what a zip bomb asks for, and the floor lets
# small, very regular arrays (one-hot rows, grids) through whatever their compression.
MAX_INFLATION = 100
INFLATION_FLOOR = 256 * 2**20
MEMORY_RULE = (
    f"reading an array (its bytes as stored plus a float64 copy) may take at most "
    f"{MAX_INFLATION} times the file's size on disk or {INFLATION_FLOOR // 2**20} MiB, whichever "
    "is larger, and no more than the memory available; checked from the array's header (and an "
    ".npz archive's directory) before any data are read or decompressed")


@dataclasses.dataclass(frozen=True)
class EmbeddingFile:
    """An embedding file as read: the array and what was read to make it.

    Attributes
    ----------
    path : str
        The path as given.
    data : array of shape (n_points, n_features), float64, finite
    format : {"npy", "npz", "csv"}
    key : str or None
        The array's name inside an ``.npz`` archive.
    header : tuple of str or None
        CSV: the names of the columns kept (None: the file has no header line).
    header_line : int or None
        CSV: the line number (1-based) of the header.
    first_column : int
        CSV: the 1-based number of the first column kept (2 when an index column was dropped).
    n_columns_in_file : int
        CSV: columns per line in the file (the index column included).
    index_dropped : str or None
        CSV: why the first column was dropped as an index (None: nothing dropped).
    encoding : str
        CSV: ``"UTF-8"``, ``"UTF-8 with BOM"`` or ``"UTF-16"``.
    blank_lines, comment_lines : int
        CSV: lines skipped.
    """

    path: str
    data: np.ndarray
    format: str
    key: str | None = None
    header: tuple[str, ...] | None = None
    header_line: int | None = None
    first_column: int = 1
    n_columns_in_file: int | None = None
    index_dropped: str | None = None
    encoding: str | None = None
    blank_lines: int = 0
    comment_lines: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.shape

    @property
    def reading(self) -> str:
        """How the file was read: ``CSV; header on line 1: a, b, ...; columns 1-16``."""
        parts = [{"npy": "NumPy .npy", "npz": f"array {self.key!r} of an .npz archive",
                  "csv": "CSV"}[self.format]]
        if self.format == "csv":
            if self.encoding != "UTF-8":
                parts.append(self.encoding)
            if self.header is None:
                parts.append("no header")
            else:
                names = ", ".join(self.header[:4]) + (", ..." if len(self.header) > 4 else "")
                parts.append(f"header on line {self.header_line}: {names}")
            d = self.data.shape[1]
            last = self.first_column + d - 1
            parts.append(f"columns {self.first_column}-{last}" if d > 1
                         else f"column {self.first_column}")
            if self.index_dropped:
                parts.append(f"column 1 dropped as an index ({self.index_dropped})")
            for count, what in ((self.blank_lines, "blank"), (self.comment_lines, "comment")):
                if count:
                    parts.append(f"{count} {what} line{'s' if count > 1 else ''} skipped")
        return "; ".join(parts)

    def describe(self) -> str:
        """One line: ``x.csv: 300 points x 16 dims (CSV; header on line 1: a, b, ...; ...)``."""
        n, d = self.data.shape
        return f"{self.path}: {n} points x {d} dims ({self.reading})"

    def to_dict(self) -> dict:
        """What was read, for JSON (the array left out)."""
        out = {"path": self.path, "format": self.format, "n_points": int(self.data.shape[0]),
               "n_features": int(self.data.shape[1])}
        if self.format == "npz":
            out["key"] = self.key
        if self.format == "csv":
            out |= {"header": None if self.header is None else list(self.header),
                    "header_line": self.header_line,
                    "columns": [self.first_column, self.first_column + self.data.shape[1] - 1],
                    "n_columns_in_file": self.n_columns_in_file,
                    "index_dropped": self.index_dropped, "encoding": self.encoding,
                    "blank_lines": self.blank_lines, "comment_lines": self.comment_lines}
        return out


def read_embeddings(path, *, key: str | None = None, header: bool | None = None,
                    index_column: str | None = None) -> EmbeddingFile:
    """Read an (n_points, n_features) array of finite real numbers from a regular file.

    Parameters
    ----------
    path : str or Path
        A ``.npy``, ``.npz`` or ``.csv`` file (the extension decides, and the content must agree).
    key : str, optional
        The array inside an ``.npz`` archive (needed when it holds more than one).
    header : bool, optional
        CSV only. None (default): decided by :data:`HEADER_RULE`; True: the first line that is
        not blank or a comment is a header; False: there is no header.
    index_column : {None, "drop", "keep"}
        CSV only. None (default): a first column that :data:`INDEX_RULE` calls an index is
        refused; ``"drop"``: the first column is dropped; ``"keep"``: it is a feature.

    Raises
    ------
    InputError
        Anything that is not a finite, real, 2-D, non-empty array in the file's own format, with
        one line naming the file and where in it.
    """
    shown = str(path)
    path = Path(path)
    suffix = path.suffix.lower()
    if index_column not in INDEX_CHOICES:
        raise InputError(f"index_column must be one of {INDEX_CHOICES}; got {index_column!r}.")
    if suffix not in FORMATS:
        if path.is_dir():
            raise InputError(f"{shown} is a directory; give a {_FORMAT_LIST} file.")
        raise InputError(f"{shown}: unsupported file type {path.suffix!r}; use {_FORMAT_LIST}.")
    if key is not None and suffix != ".npz":
        raise InputError(f"--key {key!r} names an array inside a .npz file, but {shown} is a "
                         f"{suffix} file; drop --key.")
    with open_regular(path, shown) as fh:
        actual = sniff(fh.read(8))
        fh.seek(0)
        expected = suffix[1:]
        if actual == "empty":
            raise InputError(f"{shown}: the file is empty.")
        if actual != expected and not (expected == "csv" and actual == "text"):
            raise InputError(f"{shown}: named {suffix} but holds {KIND_NAMES[actual]}"
                             + (f"; rename it to .{actual}." if actual in ("npy", "npz")
                                else "."))
        lines = None  # CSV: the line number of each row, for messages
        try:
            if suffix == ".npy":
                read = EmbeddingFile(shown, _read_npy(fh, shown), "npy")
            elif suffix == ".npz":
                data, key = _read_npz(fh, shown, key)
                read = EmbeddingFile(shown, data, "npz", key=key)
            else:
                data, reading, lines = read_csv(fh.read(), shown, header, index_column)
                read = EmbeddingFile(shown, data, "csv", **reading)
        except InputError:
            raise
        except MemoryError:
            raise InputError(f"{shown}: not enough memory to read it.") from None
        except Exception as err:  # noqa: BLE001 - any failure to parse is the file's: said once
            said = " ".join(str(err).split())  # one line, whatever the parser said
            raise InputError(f"{shown}: cannot read it as {suffix} ({type(err).__name__}: "
                             f"{said}).") from err
    return dataclasses.replace(read, data=_checked_array(read.data, shown, lines,
                                                         read.first_column))


# --------------------------------------------------------------------------------------------
# .npy and .npz
# --------------------------------------------------------------------------------------------


def _read_header(fh) -> tuple[tuple, np.dtype]:
    """Shape and dtype from the magic string and header at ``fh``'s position; ``fh`` is left at
    the first byte of data."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(fh)
    else:
        shape, _, dtype = fmt.read_array_header_2_0(fh)
    return shape, dtype


def _read_npy(fh, shown: str) -> np.ndarray:
    """The array of a .npy file, its header checked before its data are read."""
    shape, dtype = _read_header(fh)
    _check_header(shown, shape, dtype)
    promised = math.prod(shape) * dtype.itemsize  # Python ints: a forged shape cannot wrap
    size = os.fstat(fh.fileno()).st_size
    have = size - fh.tell()
    if have < promised:
        raise InputError(f"{shown}: truncated: its header promises {promised} bytes of "
                         f"{dtype} data (shape {shape}), the file holds {have}.")
    _check_memory(shown, f"the array {tuple(shape)} {dtype}", _need(shape, dtype), size)
    fh.seek(0)
    return np.load(fh, allow_pickle=False)


def _check_header(shown: str, shape: tuple, dtype: np.dtype) -> None:
    """Numbers in two dimensions, by the array's header alone (before its data are read)."""
    if dtype.hasobject or dtype.fields is not None or not np.issubdtype(dtype, np.number):
        raise InputError(f"{shown}: expected numbers, found dtype {dtype}.")
    if len(shape) != 2:
        raise InputError(f"{shown}: expected a 2-D array (n_points, n_features), found shape "
                         f"{tuple(shape)}.")


def _available_memory() -> int:
    from .._memory import available_memory  # the rule compare and score measure sets by

    return available_memory()


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _need(shape: tuple, dtype: np.dtype) -> int:
    """Bytes to read an array of this header: its data as stored, and a float64 copy unless it
    is float64 already."""
    count = math.prod(shape)
    return count * dtype.itemsize + (8 * count if dtype != np.float64 else 0)


def _check_memory(shown: str, what: str, need: int, on_disk: int) -> None:
    """:data:`MEMORY_RULE`: ``need`` bytes to read ``what`` from a file of ``on_disk`` bytes."""
    if need > max(MAX_INFLATION * on_disk, INFLATION_FLOOR):
        raise InputError(
            f"{shown}: {what} would take {_size(need)} to read from {_size(on_disk)} on disk, "
            f"more than {MAX_INFLATION} times its size; refused before decompressing it (a zip "
            "bomb?). A genuine array reads when saved with numpy.save or numpy.savez "
            "(uncompressed).")
    available = _available_memory()
    if need > available:
        raise InputError(f"{shown}: {what} would take {_size(need)} to read; "
                         f"{_size(available)} of memory is available.")


_ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_ZIP_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma"}


def _check_member(shown: str, key: str, info: zipfile.ZipInfo, size: int) -> None:
    """An archive member's compression and sizes, by the archive's directory, before it is
    opened (:data:`MEMORY_RULE`)."""
    if info.compress_type not in _ZIP_METHODS:
        # zipfile inflates a bzip2 or lzma member a whole block at a time, however few bytes are
        # asked for: a few kilobytes can become gigabytes before the header is seen. numpy
        # writes stored (savez) or deflated (savez_compressed) members only.
        raise InputError(f"{shown}: {key!r} is compressed with "
                         f"{_ZIP_METHOD_NAMES.get(info.compress_type, info.compress_type)}; an "
                         ".npz is read when written by numpy.savez or numpy.savez_compressed "
                         "(stored or deflated members).")
    if info.compress_size > size:
        raise InputError(f"{shown}: the archive's directory gives {key!r} {info.compress_size} "
                         f"compressed bytes, the file has {size}: a damaged archive.")
    # The directory's uncompressed size bounds what zipfile will ever inflate (it stops there
    # and checks the CRC).
    _check_memory(shown, f"{key!r} (uncompressed, by the archive's directory)", info.file_size,
                  size)


def check_npz_sizes(path, shown: str | None = None) -> None:
    """Every member of the .npz archive ``path`` checked by the archive's directory
    (:data:`MEMORY_RULE`) without decompressing anything; :class:`InputError` naming the first
    that fails. For readers that then use ``numpy.load`` (the embedding caches)."""
    shown = str(path) if shown is None else shown
    with open_regular(path, shown, expected="an .npz archive") as fh:
        size = os.fstat(fh.fileno()).st_size
        with zipfile.ZipFile(fh) as archive:
            for info in archive.infolist():
                _check_member(shown, info.filename, info, size)


def _read_npz(fh, shown: str, key: str | None) -> tuple[np.ndarray, str]:
    """The array ``key`` of an .npz archive as ``numpy.load`` gives it, its header and sizes
    checked (:data:`MEMORY_RULE`) before any of its data are decompressed."""
    size = os.fstat(fh.fileno()).st_size
    with zipfile.ZipFile(fh) as archive:
        raw = archive.namelist()
        # numpy.load's names: "x.npy" is "x", and the member's own name is accepted too.
        names = [name.removesuffix(".npy") for name in raw]
        members = dict(zip(names, raw, strict=True)) | dict(zip(raw, raw, strict=True))
        if key is None:
            if len(names) != 1:
                raise InputError(f"{shown}: the archive holds {len(names)} arrays "
                                 f"({', '.join(names) or 'none'}); choose one with --key.")
            key = names[0]
        if key not in names:
            raise InputError(f"{shown}: no array {key!r} in the archive (it has "
                             f"{', '.join(names) or 'none'}).")
        info = archive.getinfo(members[key])
        _check_member(shown, key, info, size)
        with archive.open(info) as stream:
            if stream.read(len(np.lib.format.MAGIC_PREFIX)) != np.lib.format.MAGIC_PREFIX:
                raise InputError(f"{shown}: {key!r} in the archive is not a NumPy array.")
            stream.seek(0)
            shape, dtype = _read_header(stream)  # a few hundred bytes decompressed, no more
            header = stream.tell()
        _check_header(shown, shape, dtype)
        promised = math.prod(shape) * dtype.itemsize  # Python ints: a forged shape cannot wrap
        if info.file_size - header < promised:
            raise InputError(f"{shown}: {key!r} is truncated: its header promises {promised} "
                             f"bytes of {dtype} data (shape {shape}), the archive's directory "
                             f"gives {max(info.file_size - header, 0)}.")
        _check_memory(shown, f"{key!r}, {tuple(shape)} {dtype},", _need(shape, dtype), size)
        with archive.open(info) as stream:
            return np.lib.format.read_array(stream, allow_pickle=False), key


# --------------------------------------------------------------------------------------------
# Every format: a finite, real, 2-D, non-empty array
# --------------------------------------------------------------------------------------------


def _checked_array(X, shown: str, csv_lines: list[int] | None, first_column: int) -> np.ndarray:
    if np.iscomplexobj(X):
        raise InputError(f"{shown}: complex numbers (dtype {X.dtype}); the measures take real "
                         "embeddings: save the real part, the modulus or both parts as columns.")
    _check_header(shown, X.shape, X.dtype)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise InputError(f"{shown}: no {'points' if X.shape[0] == 0 else 'features'} (shape "
                         f"{X.shape}).")
    X = X.astype(np.float64, copy=False)
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        where = f"line {csv_lines[row]}" if csv_lines is not None else f"row {row}"
        raise InputError(
            f"{shown}: {int(bad.sum())} non-finite value(s) ({int(np.isnan(X).sum())} NaN, "
            f"{int(np.isinf(X).sum())} inf), the first at {where}, column {col + first_column} "
            f"({X[row, col]}).")
    return X
