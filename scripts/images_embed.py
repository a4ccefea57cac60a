"""Embed one class's reference and pool images with the FID Inception V3 (2048-d pool features).

Features are memoised per data-set image in ``cache`` (see ``embed_with_cache``): a rerun, or a
configuration with a smaller reference or pool, embeds only the images not seen before.
"""

import time

import numpy as np
from _helpers import log, run, write_provenance

from diversity_core.assets import file_digest
from diversity_core.data.images import load_dataset
from diversity_core.embed.device import resolve_device
from diversity_core.embed.inception import embed_with_cache


def main(folder, selection, model, embeddings, dataset="fashion_mnist", split="train", cls=0,
         batch_size=50, device="auto", cache=""):
    """Write ``embeddings`` (.npz): ``reference`` (n_ref, 2048) and ``pool`` (n_pool, 2048)
    float32 features of class ``cls`` and their data-set indices."""
    images, labels = load_dataset(dataset, folder, split)
    chosen = np.load(selection)
    ref_idx, pool_idx = chosen["reference"][cls], chosen["pool"][cls]
    idx = np.concatenate([ref_idx, pool_idx])
    if np.any(labels[idx] != cls):
        raise ValueError(f"selection rows for class {cls} hold images of other classes.")
    device = resolve_device(device)
    model_sha256 = file_digest(model)
    start = time.perf_counter()
    feats, n_new = embed_with_cache(images, idx, model, cache, batch_size=batch_size,
                                    device=device, model_sha256=model_sha256, checkpoint_every=200,
                                    desc=f"class {cls}")
    seconds = time.perf_counter() - start
    if n_new:
        log.info("class %d: embedded %d images in %.1f s on %s (%.2f images/s)", cls, n_new,
                 seconds, device, n_new / seconds)
    with open(embeddings, "wb") as out:
        np.savez(out, reference=feats[:len(ref_idx)], pool=feats[len(ref_idx):],
                 reference_indices=ref_idx, pool_indices=pool_idx)
    write_provenance(
        embeddings,
        config={"dataset": dataset, "split": split, "class": cls, "batch_size": batch_size,
                "image_size": 299,
                "preprocessing": "grey->RGB, TF-1.x bilinear resize, x/128 - 1"},
        device=device, model_sha256=model_sha256, n_images=len(idx),
    )


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
