"""Embed one class's reference and pool images with the FID Inception V3 (2048-d pool features).

Features are memoised per data-set image in ``cache`` (see ``embed_with_cache``): a rerun, or a
configuration with a smaller reference or pool, embeds only the images not seen before.
"""

import time

import numpy as np
from _contract import Input, Output
from _job import input_sha256, log, run

from diversity_core.atomic import atomic_write
from diversity_core.data.images import load_dataset
from diversity_core.device import parse_device
from diversity_core.embed.inception import embed_with_cache


def main(folder: Input, selection: Input, model: Input, embeddings: Output, dataset: str,
         split: str, cls: int, batch_size: int, device: str, threads: int, cache: str):
    """Write ``embeddings`` (.npz): ``reference`` (n_ref, 2048) and ``pool`` (n_pool, 2048)
    float32 features of class ``cls`` and their data-set indices, computed with ``threads`` CPU
    threads (the features depend on it: part of the cache key)."""
    images, labels = load_dataset(dataset, folder, split)
    chosen = np.load(selection)
    ref_idx, pool_idx = chosen["reference"][cls], chosen["pool"][cls]
    idx = np.concatenate([ref_idx, pool_idx])
    if np.any(labels[idx] != cls):
        raise ValueError(f"selection rows for class {cls} hold images of other classes.")
    device = parse_device(device, key="images.device")  # this job's one parse
    model_sha256 = input_sha256(model)  # hashed once, for the record and the cache key
    start = time.perf_counter()
    feats, n_new = embed_with_cache(images, idx, model, cache, batch_size=batch_size,
                                    device=device, model_sha256=model_sha256, threads=threads,
                                    checkpoint_every=200, desc=f"class {cls}")
    seconds = time.perf_counter() - start
    if n_new:
        log.info("class %d: embedded %d images in %.1f s on %s (%.2f images/s)", cls, n_new,
                 seconds, device.torch, n_new / seconds)
    with atomic_write(embeddings, "wb") as out:
        np.savez(out, reference=feats[:len(ref_idx)], pool=feats[len(ref_idx):],
                 reference_indices=ref_idx, pool_indices=pool_idx)
    return {"device": device.torch, "threads": threads, "n_images": len(idx), "image_size": 299,
            "preprocessing": "grey->RGB, TF-1.x bilinear resize, x/128 - 1"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
