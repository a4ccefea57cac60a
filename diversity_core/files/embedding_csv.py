"""The CSV reader of embedding files: comma-separated numbers, one point per line.

The rules (what a number is, when the first line is a header, when the first column is an
index, the encodings read) are documented in :mod:`diversity_core.files.embeddings`, whose
:func:`~diversity_core.files.embeddings.read_embeddings` calls :func:`read_csv` on the bytes of
a ``.csv`` file it has opened and checked.
"""

from __future__ import annotations

import codecs
import csv
import re

import numpy as np

from .regular import InputError

__all__ = ["read_csv"]


# An ASCII number as numpy.savetxt, pandas and spreadsheets write it; nan/inf are read so that
# the finiteness check can name them.
_NUMBER = r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf(?:inity)?)"
_FIELD = rf'[ \t]*(?:{_NUMBER}|"{_NUMBER}")[ \t]*'
_NUMBER_RE = re.compile(_NUMBER, re.ASCII | re.IGNORECASE)
_ROW_RE = re.compile(rf"{_FIELD}(?:,{_FIELD})*", re.ASCII | re.IGNORECASE)
_WHOLE_RE = re.compile(r"[0-9]+", re.ASCII)  # a whole number without sign, point or exponent
_DECIMAL_RE = re.compile(r"[+-]?[0-9]*\.[0-9]*(?:[eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+",
                         re.ASCII)  # a number with a decimal point or an exponent
_DECIMAL_IN_LINE_RE = re.compile(r"[0-9]\.|\.[0-9]|[0-9][eE]", re.ASCII)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _decode(raw: bytes, shown: str) -> tuple[str, str]:
    if raw.startswith(codecs.BOM_UTF8):
        raw, encoding = raw[len(codecs.BOM_UTF8):], "UTF-8 with BOM"
    elif raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16"), "UTF-16"
        except UnicodeDecodeError as err:
            raise InputError(f"{shown}: not valid UTF-16 text ({err.reason} at byte "
                             f"{err.start}).") from None
    else:
        encoding = "UTF-8"
    if b"\x00" in raw:
        raise InputError(f"{shown}: binary data (NUL bytes), not text; a .csv holds "
                         "comma-separated numbers.")
    try:
        return raw.decode("utf-8"), encoding
    except UnicodeDecodeError as err:
        raise InputError(f"{shown}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset "
                         f"{err.start}); a .csv holds comma-separated numbers in UTF-8.") from None


def _fields(line: str) -> list[str]:
    """The fields of one CSV line (quotes as in RFC 4180), stripped of spaces and tabs."""
    return [f.strip(" \t") for f in next(csv.reader([line], skipinitialspace=True), [""])]


def _is_number(field: str) -> bool:
    return _NUMBER_RE.fullmatch(field) is not None


def _whole_numbers(fields: list[str]) -> bool:
    return bool(fields) and all(_WHOLE_RE.fullmatch(f) for f in fields)


def _pandas_names(fields: list[str]) -> bool:
    """The whole numbers 0..k-1: the names ``DataFrame.to_csv`` writes for unnamed columns."""
    return _whole_numbers(fields) and [int(f) for f in fields] == list(range(len(fields)))


def _header_kind(fields: list[str], rows_below: list[str]) -> str:
    """``"header"``, ``"data"``, ``"ambiguous"`` or ``"mixed"`` for the first line, by
    :data:`HEADER_RULE`; ``rows_below``: the other lines, searched for a decimal only when the
    first line is all whole numbers."""
    numbers = [_is_number(f) for f in fields]
    if not any(numbers):
        # Empty fields only (``""`` in a file of one column) name nothing: a row of missing
        # values, refused by its line below, not a header that would hide it.
        return "data" if all(f == "" for f in fields) else "header"
    if fields[0] == "" and len(fields) > 1 and (
            not any(numbers[1:]) or _pandas_names(fields[1:])):
        return "header"
    if _whole_numbers(fields) and (
            _pandas_names(fields) or any(_DECIMAL_IN_LINE_RE.search(line) for line in rows_below)):
        return "ambiguous"
    # Numbers and empty fields: a row of data with missing values (refused as such, by line).
    return "data" if all(n or f == "" for n, f in zip(numbers, fields, strict=True)) else "mixed"


def _line_problem(fields: list[str], delimiter_hint: str) -> str:
    bad = next(i for i, f in enumerate(fields) if not _is_number(f.strip('"')))
    what = "is empty" if fields[bad] == "" else f"is {fields[bad][:40]!r}, not a number"
    return f"column {bad + 1} {what}{delimiter_hint}"


def read_csv(raw: bytes, shown: str, header: bool | None,
             index_column: str | None) -> tuple[np.ndarray, dict, list[int]]:
    """The bytes of a CSV file read by the rules of :mod:`diversity_core.files.embeddings`.

    Parameters
    ----------
    raw : the file's bytes
    shown : the file's name in messages
    header, index_column : as :func:`~diversity_core.files.embeddings.read_embeddings` takes them

    Returns
    -------
    data : (n_rows, n_columns) float64, not yet checked for finiteness
    reading : how it was read, the keyword arguments of
        :class:`~diversity_core.files.embeddings.EmbeddingFile` (``header``, ``header_line``,
        ``first_column``, ``n_columns_in_file``, ``index_dropped``, ``encoding``,
        ``blank_lines``, ``comment_lines``)
    lines : the line number (1-based) of each row, for messages
    """
    text, encoding = _decode(raw, shown)
    rows: list[str] = []
    numbers: list[int] = []
    blank = comment = 0
    for number, line in enumerate(_LINE_BREAK.split(text), start=1):
        stripped = line.strip(" \t")
        if not stripped:
            blank += 1
        elif stripped.startswith("#"):
            comment += 1
        else:
            rows.append(line)
            numbers.append(number)
    blank -= 1 if text.endswith(("\n", "\r")) or not text else 0  # the final line break
    if not rows:
        raise InputError(f"{shown}: " + ("the file is empty." if not text.strip(" \t\r\n")
                                        else "no rows of numbers, only blank or comment lines."))
    names = None
    header_line = None
    first = _fields(rows[0])
    kind = "header" if header else "data" if header is False else _header_kind(first, rows[1:])
    if kind == "ambiguous":
        what = ("the column numbers pandas writes as a header" if _pandas_names(first)
                else "whole numbers above rows of decimals, like numeric column names")
        raise InputError(
            f"{shown}: line {numbers[0]} holds {_short(first)}: {what}. A header or a row of "
            "data? Say --header or --no-header.")
    if kind == "mixed":
        raise InputError(
            f"{shown}: line {numbers[0]} mixes numbers and text ({_short(first)}): neither a "
            "header (no field a number) nor a row of numbers; if it is a header, say --header.")
    if kind == "header":
        names, header_line = first, numbers[0]
        rows, numbers = rows[1:], numbers[1:]
        if not rows:
            raise InputError(f"{shown}: a header on line {header_line} and no rows of numbers.")
    # The data: every line must match the strict row pattern; the first that does not is named.
    width = None
    for line, number in zip(rows, numbers, strict=True):
        if _ROW_RE.fullmatch(line) is None:
            fields = _fields(line)
            hint = ""
            if len(fields) == 1 and any(sep in line for sep in (";", "\t", "|")):
                hint = " (the fields of a .csv here are separated by commas)"
            raise InputError(f"{shown}: line {number} is not a row of numbers: "
                             f"{_line_problem(fields, hint)}.")
        count = line.count(",") + 1
        if width is None:
            width = count
        elif count != width:
            raise InputError(f"{shown}: rows have different numbers of columns: line {number} "
                             f"has {count}, line {numbers[0]} has {width}.")
    if names is not None and len(names) != width:
        raise InputError(f"{shown}: the header on line {header_line} names {len(names)} "
                         f"columns, the rows have {width}.")
    table = [line.replace('"', "").split(",") for line in rows]
    index_reason = None
    if index_column == "drop":
        index_reason = "--index-column drop"
    elif index_column is None:
        index_reason = _index_reason(names, [r[0].strip(" \t") for r in table], table)
        if index_reason is not None:
            raise InputError(
                f"{shown}: column 1 looks like an index, not a feature ({index_reason}): drop "
                "it with --index-column drop, or keep it as a feature with --index-column keep.")
    if index_reason is not None:
        if width < 2:
            raise InputError(f"{shown}: --index-column drop leaves no column.")
        table = [r[1:] for r in table]
        names = None if names is None else names[1:]
    data = np.array(table, dtype=np.float64) if table else np.empty((0, width))
    reading = {"header": None if names is None else tuple(names), "header_line": header_line,
               "first_column": 2 if index_reason else 1, "n_columns_in_file": width,
               "index_dropped": index_reason, "encoding": encoding, "blank_lines": blank,
               "comment_lines": comment}
    return data, reading, numbers


def _index_reason(names, first_column: list[str], table: list[list[str]]) -> str | None:
    """Why the first column is an index by :data:`INDEX_RULE`, or None."""
    if names is not None and names[0] in ("", "Unnamed: 0"):
        return f"its header is {names[0]!r}, as pandas and R write over an index"
    n = len(first_column)
    if len(table[0]) < 2 or n < 2 or not all(_WHOLE_RE.fullmatch(v) for v in first_column):
        return None
    values = [int(v) for v in first_column]
    if values not in (list(range(n)), list(range(1, n + 1))):
        return None
    if any(_DECIMAL_RE.fullmatch(v.strip(" \t")) for row in table for v in row[1:]):
        return (f"its values count {values[0]} to {values[-1]} in whole numbers, beside "
                "columns of decimals: a row number")
    return None


def _short(fields: list[str]) -> str:
    shown = ", ".join(repr(f) for f in fields[:5])
    return shown + (", ..." if len(fields) > 5 else "")
