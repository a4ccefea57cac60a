"""The file formats of the text corpora (diversity_core.data.text): WordNet's data files, dictd
databases, plain lines, and the Hugging Face datasets' parquet and JSON-lines files.

Each reader takes the path it reads and nothing else (which files a corpus has, and their pins,
are :mod:`.text`'s); each refuses a malformed file with a ``ValueError`` naming the file and,
where it can, the line.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from .reading import decoding

__all__ = [
    "load_dictd",
    "load_wordnet",
    "normalise_whitespace",
    "read_column",
    "read_lines",
    "read_text",
]


def normalise_whitespace(text: str) -> str:
    """Runs of whitespace (newlines and tabs included) become one space; ends are stripped."""
    return " ".join(text.split())


# What to do about a corpus file that cannot be decoded.
_REFETCH = "delete its corpus folder to fetch it again (text_assets.corpora)."


def read_text(path: Path, encoding: str = "utf-8") -> str:
    """The whole text of ``path``; a missing file is a ``ValueError`` that says to fetch."""
    if not path.is_file():
        raise ValueError(f"{path} is missing: fetch the corpus first (fetch_corpus).")
    with decoding(path, f"{encoding} text file", _REFETCH):
        return path.read_text(encoding=encoding)


_WORDNET_POS = (("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r"))


def load_wordnet(folder) -> list[tuple[str, str, str]]:
    """WordNet 3.0 synsets as (lemma, pos, gloss), nouns, verbs, adjectives, adverbs in that order
    and each in file (offset) order.

    ``lemma`` is the synset's first word (underscores as spaces), ``pos`` one of n, v, a, r
    (satellite adjectives count as a), ``gloss`` the definition without the quoted examples that
    follow it in WordNet's gloss field.
    """
    folder = Path(folder)
    entries = []
    for file_pos, pos in _WORDNET_POS:
        path = folder / f"data.{file_pos}"
        for number, line in enumerate(read_text(path).splitlines(), start=1):
            if line.startswith("  "):  # the licence header
                continue
            head, sep, gloss_field = line.partition(" | ")
            fields = head.split()
            if not sep or len(fields) < 5:
                raise ValueError(f"{path}:{number}: not a WordNet data line.")
            lemma = fields[4].replace("_", " ")
            # The gloss field is "definition; \"example\"; \"example\"": keep the definition.
            definition = re.split(r';\s*"', gloss_field, maxsplit=1)[0]
            entries.append((lemma, pos, normalise_whitespace(definition).rstrip(";").strip()))
    return entries


_B64 = {c: i for i, c in enumerate(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _b64_number(text: str) -> int:
    value = 0
    for c in text:
        value = value * 64 + _B64[c]
    return value


def load_dictd(folder, name: str) -> list[tuple[str, str]]:
    """Entries of a dictd database (``<name>.index`` + ``<name>.dict.dz``) as (headword, body).

    Entries are in the order of their offsets in the database; headwords that point to the same
    entry (synonyms) give it once, under the first. The body is the entry without its head
    (the block of headwords and pronunciation before the first blank line), whitespace-normalised,
    with dictd markup removed: cross references ``{word}`` keep their word; FOLDOC's
    ``<category>`` tags, bare URLs and dates ``(YYYY-MM-DD)`` go. The database's own
    ``00-database-*`` entries are skipped.
    """
    folder = Path(folder)
    index_path, dict_path = folder / f"{name}.index", folder / f"{name}.dict.dz"
    if not dict_path.is_file():
        raise ValueError(f"{dict_path} is missing: fetch the corpus first (fetch_corpus).")
    with decoding(dict_path, "dictzip (gzip) file", _REFETCH):
        data = gzip.decompress(dict_path.read_bytes())  # dictzip: gzip with a random-access index
    seen: dict[tuple[int, int], str] = {}
    meta: set[tuple[int, int]] = set()
    for number, line in enumerate(read_text(index_path).splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) < 3:
            raise ValueError(f"{index_path}:{number}: not a dictd index line.")
        try:
            span = (_b64_number(fields[1]), _b64_number(fields[2]))
        except KeyError as exc:
            raise ValueError(f"{index_path}:{number}: bad base-64 offset.") from exc
        if fields[0].startswith(("00-database", "00database")):
            meta.add(span)
        else:
            seen.setdefault(span, fields[0])
    entries = []
    for (offset, length), headword in sorted(seen.items()):
        if (offset, length) in meta:
            continue
        raw = data[offset:offset + length].decode("utf-8", errors="replace").strip("\n")
        body = _clean_dictd(raw.partition("\n\n")[2])
        if body:
            entries.append((headword, body))
    return entries


def _clean_dictd(body: str) -> str:
    body = re.sub(r"\{([^{}]*)\}", r"\1", body)  # cross references keep their text
    body = re.sub(r"<[^<>\n]*>", " ", body)  # FOLDOC's subject tags
    body = re.sub(r"\(?https?://\S+\)?", " ", body)
    body = re.sub(r"\(\d{4}-\d{2}-\d{2}\)", " ", body)
    return normalise_whitespace(body)


def read_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """The non-empty lines of ``path``, each whitespace-normalised, in file order."""
    lines = read_text(path, encoding).splitlines()
    return [text for text in map(normalise_whitespace, lines) if text]


# A JSON line longer than this is refused, not read whole into memory (an arXiv record is a
# few KB).
_MAX_JSON_LINE = 16 << 20


def read_column(path: Path, column: str, limit: int | None) -> list:
    """The values of ``column`` in the first ``limit`` rows (None: all) of a parquet or
    JSON-lines file (``.jsonl``, ``.jsonl.gz``, ``.json``, ``.json.gz``).

    A file that cannot be read raises ``ValueError`` naming it, and for JSON lines the line
    (and the column where the parser knows it): a bad gzip stream, bytes that are not UTF-8, a
    line that is not a JSON object, nested past Python's recursion limit or longer than 16 MiB.
    """
    if limit is not None and limit <= 0:
        return []
    name = path.name.lower()
    if name.endswith(".parquet"):
        return _read_parquet_column(path, column, limit)
    if not name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
        raise ValueError(f"{path}: a Hugging Face corpus file must be parquet or JSON lines "
                         "(.parquet, .jsonl, .jsonl.gz).")
    import zlib

    values: list = []
    opener = gzip.open if name.endswith(".gz") else open
    number = 0
    try:
        with opener(path, "rb") as stream:
            while limit is None or len(values) < limit:
                raw = stream.readline(_MAX_JSON_LINE + 1)
                if not raw:
                    break
                number += 1
                if len(raw) > _MAX_JSON_LINE:
                    raise ValueError(f"{path}:{number}: the line is longer than "
                                     f"{_MAX_JSON_LINE >> 20} MiB.")
                if not raw.strip():
                    continue
                record = json.loads(raw.decode("utf-8"))
                if not isinstance(record, dict):
                    raise ValueError(f"{path}:{number}: not a JSON object.")
                if column not in record:
                    raise ValueError(f"{path}:{number} has no field {column!r}; its fields: "
                                     f"{sorted(record)[:20]}.")
                values.append(record[column])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{number}:{exc.colno}: not JSON ({exc.msg}).") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}:{number}: not UTF-8 text (byte {exc.start}: {exc.reason}).") \
            from None
    except RecursionError:
        raise ValueError(f"{path}:{number}: JSON nested too deeply to read.") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: not a whole gzip file after line {number} "
                         f"({type(exc).__name__}: {exc}); delete the corpus folder that holds "
                         "it to fetch it again.") from None
    return values


def _read_parquet_column(path: Path, column: str, limit: int | None) -> list:
    import pyarrow as pa
    import pyarrow.parquet as pq

    values: list = []
    try:
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
        if column not in names:
            raise ValueError(f"{path} has no column {column!r}; its columns: {names}.")
        for batch in parquet.iter_batches(batch_size=4096, columns=[column]):
            values.extend(batch.column(0).to_pylist())
            if limit is not None and len(values) >= limit:
                break
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path}: not a readable parquet file (row {len(values) + 1} on: "
                         f"{type(exc).__name__}: {str(exc)[:200]}); delete its corpus folder to "
                         "fetch it again.") from None
    return values[:limit] if limit is not None else values
