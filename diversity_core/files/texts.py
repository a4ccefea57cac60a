"""Texts of the user's files: ``.txt`` (one text per non-blank line) and ``.jsonl``.

**Texts** (:func:`read_texts`): a ``.txt`` file holds one text per non-blank line, a ``.jsonl``
file one JSON value per line whose ``field`` is a string or a list of strings. Both are UTF-8
(a byte-order mark is dropped). A JSON line is bounded before it is parsed: nested at most
:data:`MAX_JSON_DEPTH` deep, integers of at most Python's digit limit (4,300); a text that is not
valid Unicode (a lone surrogate ``\\ud800``) is refused. Each refusal is one line naming the file
and the line.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .._validation import json_depth
from .regular import InputError, open_regular

__all__ = ["MAX_JSON_DEPTH", "read_texts"]

# Records of texts are a level or two deep; Python's JSON parser recurses per level and ends in
# a RecursionError (not a ValueError) near 1,000, later or sooner with the stack it starts on.
MAX_JSON_DEPTH = 100
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
def _json_int(digits: str) -> int:
    # int() of n digits costs O(n^2); Python refuses beyond its limit with advice about
    # sys.set_int_max_str_digits, which says nothing of the file: the caller names it.
    limit = sys.get_int_max_str_digits()
    if limit and len(digits.lstrip("-")) > limit:
        raise ValueError(f"a number of {len(digits.lstrip('-'))} digits (at most {limit} are "
                         "read)")
    return int(digits)


def read_texts(path, field: str | None = None) -> list[str]:
    """The texts of a ``.txt`` file (one per non-blank line) or a ``.jsonl`` file (``field`` of
    every non-blank line: a string or a list of strings).

    Raises :class:`~diversity_core.input_files.InputError` (a ``ValueError``) in one line
    naming the file, and the line where one is at fault: not a regular file, not UTF-8, not
    JSON, nested deeper than :data:`MAX_JSON_DEPTH`, a number too long to read, no ``field``, a
    text with a lone surrogate, no text at all.
    """
    shown = str(path)
    suffix = Path(path).suffix.lower()
    if suffix not in (".txt", ".jsonl"):
        raise InputError(f"{shown}: --embed reads texts from .txt or .jsonl files; got "
                         f"{suffix or 'no extension'!r}.")
    if suffix == ".jsonl" and field is None:
        raise InputError(f"{shown}: a .jsonl file needs --field, the key of its texts.")
    with open_regular(path, shown, expected="a .txt or .jsonl file") as stream:
        raw = stream.read()
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is not part of the first text
    except UnicodeDecodeError as err:
        raise InputError(f"{shown}: not UTF-8 text ({err.reason} at byte {err.start}).") from None
    texts: list[str] = []
    if suffix == ".txt":
        texts = [line for line in text.splitlines() if line.strip()]
    else:
        # Line breaks that JSON cannot hold raw inside a string; U+2028 and the like can.
        for number, line in enumerate(_LINE_BREAK.split(text), 1):
            if line.strip():
                texts.extend(_jsonl_texts(line, field, f"{shown}, line {number}"))
    if not texts:
        how = "one per line" if suffix == ".txt" else f"field {field!r}"
        raise InputError(f"{shown}: no text in it ({how}).")
    return texts


def _jsonl_texts(line: str, field: str, where: str) -> list[str]:
    if line.count("[") + line.count("{") > MAX_JSON_DEPTH and json_depth(line) > MAX_JSON_DEPTH:
        raise InputError(f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels deep.")
    try:
        record = json.loads(line, parse_int=_json_int)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: not JSON ({err.msg}).") from None
    except ValueError as err:  # a number too long to read
        raise InputError(f"{where}: not JSON that can be read ({err}).") from None
    except RecursionError:  # deeper than this interpreter's stack allows, within the bound
        raise InputError(f"{where}: JSON nested too deeply to read.") from None
    if not isinstance(record, dict) or field not in record:
        raise InputError(f"{where}: no field {field!r}.")
    value = record[field]
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) for v in values):
        raise InputError(f"{where}: field {field!r} is not a string or a list of strings.")
    for v in values:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as err:  # JSON's \u escapes can make lone surrogates
            raise InputError(f"{where}: field {field!r} holds a lone surrogate "
                             f"(U+{ord(v[err.start]):04X}) at character {err.start + 1}, which "
                             "is not text; write the character itself, or its pair of "
                             "surrogates.") from None
    return values


