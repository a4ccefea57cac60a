"""Embed one collection's documents with one sentence embedding model, memoised per text.

The cache is keyed by everything that makes the model's embeddings what they are (its files'
SHA-256, pins, device kind: ``model_fingerprint``) and by each text's SHA-256: a rerun, or a
larger draw, embeds only new texts.
"""

import json
import time

import numpy as np
from _contract import Input, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.device import parse_device
from diversity_core.embed.sentences import embed_with_cache, load_text_model, model_fingerprint


def main(documents: Input, model_dir: Input, embeddings: Output, model: str, cache: str,
         batch_size: int, device: str, threads: int, pins: dict | None):
    """Write ``embeddings`` (.npy, (n_documents, d) float32) for the texts in ``documents``;
    ``pins``: the configuration's pins of the model (text_assets.models), None for the
    package's."""
    pins = pins or None
    device = parse_device(device, key="models.device")  # this job's one parse
    with open(documents, encoding="utf-8") as stream:
        texts = json.load(stream)["texts"]
    start = time.perf_counter()
    X, n_new = embed_with_cache(
        lambda: load_text_model(model, model_dir, device=device, threads=threads, pins=pins),
        texts, cache, fingerprint=model_fingerprint(model, pins, folder=model_dir, device=device),
        batch_size=batch_size)
    seconds = time.perf_counter() - start
    if n_new:
        log.info("%s: embedded %d texts in %.1f s (%.2f texts/s)", model, n_new, seconds,
                 n_new / seconds)
    if not np.all(np.isfinite(X)) or np.any(np.linalg.norm(X, axis=1) == 0):
        raise ValueError(f"{model} gave a zero or non-finite embedding for a text of "
                         f"{documents}.")
    with atomic_write(embeddings, "wb") as out:
        np.save(out, X)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
