"""Files of Hugging Face hub repositories, fetched with the checksummed :func:`.fetch.download`.

The paper configurations read two kinds of hub repositories (they need a network):

* datasets: parquet or JSON-lines files at pinned paths (``diversity_core.data.text``, kind
  ``hf``), each from ``<endpoint>/datasets/<repo>/resolve/<revision>/<path>``;
* sentence-transformers models (``diversity_core.embed.sentences``, kind ``hub``): the files that
  sentence-transformers loads, from ``<endpoint>/<repo>/resolve/<revision>/<path>``, chosen from
  the repository's listing (:func:`list_model_files`, the hub's tree API through
  :mod:`huggingface_hub`) by :func:`sentence_model_files`.

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
from collections.abc import Mapping
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


def list_model_files(repo: str, revision: str, *, endpoint: str | None = None,
                     what: str | None = None) -> dict[str, HubFile]:
    """Every file of model repository ``repo`` at ``revision``: path -> :class:`HubFile`.

    Raises ``OSError`` naming ``what`` (default: the repository) when the listing cannot be had
    (no network, no such repository or revision).
    """
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    what = what or repo
    api = HfApi(endpoint=hub_endpoint(endpoint))
    try:
        entries = list(api.list_repo_tree(repo, revision=revision, recursive=True))
    except Exception as exc:  # huggingface_hub's HTTP, connection and not-found errors
        raise OSError(f"{what}: cannot list the files of {repo}@{revision} at "
                      f"{hub_endpoint(endpoint)} ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}).") from exc
    files = {}
    for entry in entries:
        if isinstance(entry, RepoFile):
            relative_name(entry.path, what=f"{what} (listing of {repo})")
            files[entry.path] = HubFile(entry.path, entry.size,
                                        sha256=entry.lfs.sha256 if entry.lfs else None,
                                        git_sha1=None if entry.lfs else entry.blob_id)
    return files


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


def _git_blob_sha1(path: Path) -> str:
    """The git object id of a file's bytes (what the hub's listing gives a non-LFS file)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def fetch_hub_files(repo: str, revision: str, files: Mapping[str, HubFile | str | None],
                    dest_dir, *, scratch, dataset: bool, endpoint: str | None = None,
                    asset: str, config_key: str, offline_default: str) -> dict[str, str]:
    """Download ``files`` of ``repo`` at ``revision`` into ``dest_dir`` (their paths kept);
    return path -> SHA-256 of what arrived.

    Each value is the file's pin: a SHA-256 (from the configuration), a :class:`HubFile` of the
    listing (verified against the digest the hub publishes for it: that only proves the transfer
    whole, so the file still counts as unpinned, its SHA-256 logged to be pinned) or None (taken
    on trust, logged). Each file arrives in ``scratch`` (a folder of the caller's, with the
    downloads' locks) and is moved into ``dest_dir`` (a staging folder of the caller's) once
    verified. ``asset``, ``config_key`` and ``offline_default`` word every error, as in
    :func:`.fetch.download`; a file that fails its check raises ``ValueError``.
    """
    digests = {}
    for path, pin in files.items():
        arrived = inside(Path(scratch), path, what=asset)
        listed = pin if isinstance(pin, HubFile) else None
        digest = download(hub_file_url(repo, revision, path, dataset=dataset, endpoint=endpoint),
                          arrived, checksum=listed.sha256 if listed else pin, progress=False,
                          asset=f"{asset} ({path} of {repo}@{revision})",
                          config_key=config_key, offline_default=offline_default)
        if listed and listed.git_sha1 and _git_blob_sha1(arrived) != listed.git_sha1:
            arrived.unlink()
            raise ValueError(f"{asset}: {path} of {repo}@{revision} is not the file the hub lists "
                             f"(git blob {listed.git_sha1}); the download is corrupt or the "
                             "file changed upstream. Nothing was kept.")
        if not (isinstance(pin, str) and pin):  # not pinned by the configuration: say how
            log.warning("%s: %s of %s@%s has sha256 %s; to pin it: %s, files: {%s: %s}.",
                        asset, path, repo, revision, digest, config_key, path, digest)
        target = inside(Path(dest_dir), path, what=asset)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(arrived, target)
        digests[path] = digest
    return digests
