"""Files of Hugging Face hub repositories, fetched with the checksummed :func:`.fetch.download`.

The paper configurations read two kinds of hub repositories (they need a network):

* datasets: parquet or JSON-lines files at pinned paths, or a config's split found in the
  repository's listing in any layout the hub uses (:func:`split_shards`; ``diversity_core.data.
  text``, kind ``hf``), each from ``<endpoint>/datasets/<repo>/resolve/<revision>/<path>``;
* sentence-transformers models (``diversity_core.embed.sentences``, kind ``hub``): the files that
  sentence-transformers loads, from ``<endpoint>/<repo>/resolve/<revision>/<path>``, chosen from
  the repository's listing (:func:`list_repo_files`: the hub's tree API, every page, read with
  the bounded client of :mod:`.http`) by :func:`sentence_model_files`.

No call goes through :mod:`huggingface_hub`'s HTTP client (see :func:`list_repo_files`): the
pipeline's hub calls depend neither on its telemetry nor on its caches in the user's folder.

Why not ``huggingface_hub.snapshot_download``: it fetches every file of a repository, and the
paper's model repositories hold the same weights several times over (TensorFlow, Flax, Rust,
ONNX and OpenVINO exports: several GB for a 400 MB model), none of which is checked against a
pin; here only what the model loads is fetched, each file verified against the digest the listing
publishes (an LFS file's SHA-256, a small file's git blob SHA-1) or against the configuration's
pin (``text_assets.models.<name>.files``), and written only once verified.

``endpoint``: the source's own, else ``$HF_ENDPOINT`` (as :mod:`huggingface_hub` reads it), else
https://huggingface.co, so that a mirror is one environment variable away.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path

from .fetch import download
from .verify import inside, relative_name

__all__ = [
    "HF_ENDPOINT",
    "HubFile",
    "fetch_hub_files",
    "hub_endpoint",
    "hub_file_url",
    "list_model_files",
    "sentence_model_files",
]

log = logging.getLogger(__name__)

HF_ENDPOINT = "https://huggingface.co"


def hub_endpoint(endpoint: str | None = None) -> str:
    """``endpoint``, else ``$HF_ENDPOINT``, else https://huggingface.co (no trailing slash)."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or HF_ENDPOINT).rstrip("/")


def hub_file_url(repo: str, revision: str, path: str, *, dataset: bool,
                 endpoint: str | None = None) -> str:
    """``<endpoint>/[datasets/]<repo>/resolve/<revision>/<path>``, the revision URL-encoded (a
    branch such as ``refs/convert/parquet`` becomes ``refs%2Fconvert%2Fparquet``)."""
    kind = "datasets/" if dataset else ""
    return (f"{hub_endpoint(endpoint)}/{kind}{repo}/resolve/"
            f"{urllib.parse.quote(str(revision), safe='')}/{urllib.parse.quote(path)}")


class HubFile:
    """One file of a repository's listing: its path, size in bytes, and the digest the hub
    publishes for it (``sha256`` of an LFS file, else the git blob ``sha1``)."""

    def __init__(self, path: str, size: int, *, sha256: str | None = None,
                 git_sha1: str | None = None):
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.git_sha1 = git_sha1

    def __repr__(self) -> str:
        return f"HubFile({self.path!r}, {self.size})"


def hub_offline() -> bool:
    """Whether the user asked for the hub's offline mode (``HF_HUB_OFFLINE``, as
    :mod:`huggingface_hub` reads it)."""
    # The constant huggingface_hub read from the environment at its import: the user's setting,
    # not the HF_HUB_OFFLINE=1 that loading a packaged model sets later in this process.
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def client_cache_problem() -> str | None:
    """What is wrong with :mod:`huggingface_hub`'s own cache of the endpoint's
    ``/api/agent-harnesses`` answer (``$HF_HOME/.agent_harnesses.json``), in one line naming the
    file, or None. A mirror or proxy that answered that call with a JSON list left a file that
    breaks every later call of the user's own ``huggingface_hub`` (an ``AttributeError``, no
    path named); the pipeline does not read it (:func:`list_repo_files`), but says so."""
    import json

    from huggingface_hub import constants

    path = Path(getattr(constants, "AGENT_HARNESSES_PATH", "") or "")
    if not path.name or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"huggingface_hub's cache file {path} is unreadable ({exc}): delete it."
    if not isinstance(record, dict):
        return (f"huggingface_hub's cache file {path} holds a JSON {type(record).__name__}, not "
                "the object it expects (an endpoint's answer to /api/agent-harnesses): every "
                "huggingface_hub call of yours fails until it goes; delete it.")
    return None


def tree_url(repo: str, revision: str, *, dataset: bool, endpoint: str | None = None) -> str:
    """The hub's tree API for ``repo`` at ``revision``, recursive (what
    ``huggingface_hub.HfApi.list_repo_tree`` reads)."""
    kind = "datasets" if dataset else "models"
    return (f"{hub_endpoint(endpoint)}/api/{kind}/{repo}/tree/"
            f"{urllib.parse.quote(str(revision), safe='')}?recursive=true&expand=false")


_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _entry(entry, index: int, where: str) -> HubFile | None:
    """One entry of a tree page as a :class:`HubFile` (None for a folder); ``ValueError`` naming
    the page and the entry for one that is not what the hub sends."""
    if not isinstance(entry, dict) or entry.get("type") not in ("file", "directory"):
        raise ValueError(f"{where}: entry {index} is not a file or folder entry: "
                         f"{str(entry)[:120]}")
    path = relative_name(entry.get("path"), what=f"{where}, entry {index}")
    if entry["type"] == "directory":
        return None
    size, lfs = entry.get("size"), entry.get("lfs")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"{where}: entry {index} ({path}) has no size in bytes.")
    if lfs is not None:
        sha256 = lfs.get("oid") if isinstance(lfs, dict) else None
        if not (isinstance(sha256, str) and _HEX64.fullmatch(sha256)) or lfs.get("size") != size:
            raise ValueError(f"{where}: entry {index} ({path}) has a malformed LFS record.")
        return HubFile(path, size, sha256=sha256)
    oid = entry.get("oid")
    if not (isinstance(oid, str) and _HEX40.fullmatch(oid)):
        raise ValueError(f"{where}: entry {index} ({path}) has no git blob id.")
    return HubFile(path, size, git_sha1=oid)


def list_repo_files(repo: str, revision: str, *, dataset: bool, endpoint: str | None = None,
                    what: str | None = None, strict: bool | None = None) -> dict[str, HubFile]:
    """Every file of ``repo`` at ``revision``: path -> :class:`HubFile`, from the hub's tree API,
    every page of it (``Link: <...>; rel="next"``).

    Read with :func:`.http.get_json_pages`, not with :mod:`huggingface_hub`'s client, whose
    listing has no timeout and follows a page that links to itself for ever, and which asks the
    endpoint for ``/api/agent-harnesses`` and caches the answer in the user's own folder (a
    mirror's answer there broke every later hub call of the user's). Raises ``OSError`` naming
    ``what`` (default: the repository) when the listing cannot be had (offline mode, no network,
    no such repository or revision, a loop, a page too large), ``ValueError`` for a page or entry
    that is not what the hub sends (an over-long name included).
    """
    import requests

    from .fetch import failure_reason
    from .http import get_json_pages

    what = what or repo
    url = tree_url(repo, revision, dataset=dataset, endpoint=endpoint)
    where = f"{what}: the listing of {repo}@{revision}"
    if hub_offline():
        raise OSError(f"{what}: cannot list the files of {repo}@{revision} at "
                      f"{hub_endpoint(endpoint)} (offline mode is enabled: HF_HUB_OFFLINE=1).")
    problem = client_cache_problem()
    if problem:  # not ours to delete, nor in our way: said once per listing
        log.warning("%s", problem)
    files: dict[str, HubFile] = {}
    try:
        for page in get_json_pages(url, strict=strict, what=where):
            if not isinstance(page, list):
                raise ValueError(f"{where}: a page of {url} is not a list of entries.")
            for index, entry in enumerate(page):
                listed = _entry(entry, index, where)
                if listed is not None:
                    files[listed.path] = listed
    except (requests.exceptions.RequestException, OSError) as exc:
        raise OSError(f"{what}: cannot list the files of {repo}@{revision} at "
                      f"{hub_endpoint(endpoint)} ({failure_reason(exc)}).") from exc
    return files


def list_model_files(repo: str, revision: str, *, endpoint: str | None = None,
                     what: str | None = None) -> dict[str, HubFile]:
    """Every file of model repository ``repo`` at ``revision`` (:func:`list_repo_files`)."""
    return list_repo_files(repo, revision, dataset=False, endpoint=endpoint, what=what)


# The layouts in which the hub holds a dataset config's split as parquet shards, each with the
# key that orders its shards (huggingface/dataset-viewer, parquet_and_info.py: the converter's
# "<config>/[partial-]<split>/NNNN.parquet" on refs/convert/parquet, "partial-" for a config
# over its size limit; datasets' push_to_hub: "<config>/<split>-NNNNN-of-NNNNN.parquet", and
# "data/<split>-NNNNN-of-NNNNN.parquet" for the default config).
def _layouts(config: str, split: str) -> list[tuple[str, re.Pattern]]:
    c, s = re.escape(config), re.escape(split)
    shards = r"-(\d{5})-of-(\d{5})\.parquet"
    layouts = [("<config>/<split>/NNNN.parquet", re.compile(rf"{c}/{s}/(\d{{4}})\.parquet")),
               ("<config>/partial-<split>/NNNN.parquet",
                re.compile(rf"{c}/partial-{s}/(\d{{4}})\.parquet")),
               ("<config>/<split>-NNNNN-of-NNNNN.parquet", re.compile(rf"{c}/{s}{shards}"))]
    if config == "default":
        layouts.append(("data/<split>-NNNNN-of-NNNNN.parquet", re.compile(rf"data/{s}{shards}")))
    return layouts


def split_shards(listing: Mapping[str, HubFile], config: str, split: str, *,
                 what: str, complete: bool = True) -> tuple[str, list[HubFile]]:
    """The parquet shards of ``config``'s ``split`` in ``listing``, in row order, and the name of
    their layout (one of those the hub uses, see :func:`_layouts`).

    Raises ``ValueError`` naming ``what`` when no layout holds the split, when two do (which is
    the data set's would be a guess), or when the shards of a numbered layout are not all there
    (``-00003-of-00018`` without its siblings; with ``complete=False``, as in a folder that
    keeps only the first shards, the shards need only be numbered from 0 without a gap).
    """
    found = []
    for name, pattern in _layouts(config, split):
        matches = sorted(((tuple(int(g) for g in m.groups()), f) for p, f in listing.items()
                          if (m := pattern.fullmatch(p))), key=lambda pair: pair[0])
        if matches:
            found.append((name, matches))
    if not found:
        raise ValueError(f"{what}: the listing holds no parquet shards of config {config!r}, "
                         f"split {split!r}, in any layout the hub uses "
                         f"({', '.join(n for n, _ in _layouts(config, split))}).")
    if len(found) > 1:
        raise ValueError(f"{what}: the listing holds the split {config}/{split} in several "
                         f"layouts ({', '.join(n for n, _ in found)}); pin the files by path.")
    name, matches = found[0]
    numbers = [key[0] for key, _ in matches]
    counts = {key[1] for key, _ in matches if len(key) == 2}
    if numbers != list(range(len(numbers))) or len(counts) > 1 or (
            complete and counts and counts != {len(matches)}):
        raise ValueError(f"{what}: the shards of {config}/{split} ({name}) are not numbered "
                         f"0, 1, 2, ... without a gap: {[f.path for _, f in matches][:6]}.")
    return name, [f for _, f in matches]


def _git_blob_sha1(path: Path, chunk_size: int = 1 << 20) -> str:
    """The git object id of a file's bytes (what the hub's listing gives a non-LFS file), read
    in blocks (the header needs only the size)."""
    h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


# What sentence-transformers reads from a model folder (besides the weights): the module list,
# each module's configuration, the transformer's configuration and its tokenizer's files.
_ST_CONFIG_FILES = frozenset({
    "modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.txt", "vocab.json", "merges.txt", "sentencepiece.bpe.model",
    "spiece.model"})
# A module's own folder (1_Pooling, 2_Normalize, 2_Dense, ...): its configuration and weights.
_ST_MODULE_FILE = re.compile(r"\d+_[A-Za-z]+/[^/]+\.(json|safetensors|bin|txt)")
# The transformer's weights, the first present of these (the others are the same weights).
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def sentence_model_files(listing: Mapping[str, HubFile]) -> list[str]:
    """The files of a sentence-transformers repository that it loads, in path order: module and
    tokenizer configuration, one copy of the weights (safetensors if present, else the PyTorch
    pickle), module folders' files. Not the TensorFlow, Flax, Rust, ONNX or OpenVINO exports,
    nor READMEs and training scripts.

    Raises ``ValueError`` if the listing has no ``modules.json`` or no weights.
    """
    weights = next((w for w in _WEIGHTS if w in listing), None)
    if "modules.json" not in listing or weights is None:
        raise ValueError(f"not a sentence-transformers repository with PyTorch weights: its "
                         f"files are {sorted(listing)}.")
    chosen = {weights}
    chosen |= {p for p in listing if p in _ST_CONFIG_FILES or _ST_MODULE_FILE.fullmatch(p)}
    return sorted(chosen)


def fetch_hub_files(repo: str, revision: str, files: Mapping[str, HubFile | str | None],
                    dest_dir, *, scratch, dataset: bool, endpoint: str | None = None,
                    asset: str, config_key: str, offline_default: str,
                    check: Callable[[Path], None] | None = None) -> dict[str, str]:
    """Download ``files`` of ``repo`` at ``revision`` into ``dest_dir`` (their paths kept);
    return path -> SHA-256 of what arrived.

    Each value is the file's pin: a SHA-256 (from the configuration), a :class:`HubFile` of the
    listing (verified against the digest the hub publishes for it: that only proves the transfer
    whole, so the file still counts as unpinned, its SHA-256 logged to be pinned; its listed
    size caps the transfer) or None (taken on trust, logged). Each file arrives in ``scratch``
    (a private folder of the caller's, who holds the asset's lock: no lock file is made there)
    and is moved into ``dest_dir`` (a staging folder of the caller's) once verified, its format
    checked (:func:`.formats.format_problem`) and ``check(path)`` passed, if given. ``asset``,
    ``config_key`` and ``offline_default`` word every error, as in :func:`.fetch.download`; a
    file that fails its check raises ``ValueError`` and nothing of it is kept.
    """
    digests = {}
    for path, pin in files.items():
        arrived = inside(Path(scratch), path, what=asset)
        arrived.parent.mkdir(parents=True, exist_ok=True)
        listed = pin if isinstance(pin, HubFile) else None
        checksum = pin if isinstance(pin, str) and pin else (listed.sha256 if listed else None)
        digest = download(hub_file_url(repo, revision, path, dataset=dataset, endpoint=endpoint),
                          arrived, checksum=checksum, progress=False,
                          size=listed.size if listed else None, by_hand=False, locked=True,
                          expect="torch" if path.endswith(".bin") else "auto",
                          asset=f"{asset} ({path} of {repo}@{revision})",
                          config_key=config_key, offline_default=offline_default)
        try:
            if listed and listed.git_sha1 and _git_blob_sha1(arrived) != listed.git_sha1:
                raise ValueError(f"{asset}: {path} of {repo}@{revision} is not the file the hub "
                                 f"lists (git blob {listed.git_sha1}); the download is corrupt "
                                 "or the file changed upstream. Nothing was kept.")
            if check is not None:
                check(arrived)
        except ValueError:
            arrived.unlink()
            raise
        if not (isinstance(pin, str) and pin):  # not pinned by the configuration: say how
            log.warning("%s: %s of %s@%s has sha256 %s; to pin it: %s, files: {%s: %s}.",
                        asset, path, repo, revision, digest, config_key, path, digest)
            if listed is not None and listed.sha256:  # download() printed the others
                print(f"sha256 of {path} ({repo}@{revision}): {digest}")
        target = inside(Path(dest_dir), path, what=asset)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(arrived, target)
        digests[path] = digest
    return digests
