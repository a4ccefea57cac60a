"""Embed every distinct response of one task with one sentence embedding model.

Identical responses (frequent at low temperature) are embedded once, so they stay exact
duplicates (magnitude merges them by the twin property). Embeddings are cached per text in CACHE,
so a rerun embeds only new responses. Writes EMBEDDINGS (.npz): ``texts`` (the distinct responses
in order of first appearance) and ``embeddings`` (len(texts), d) float32.
"""

import numpy as np
from _contract import Input, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.data import text_tasks
from diversity_core.device import parse_device
from diversity_core.embed import sentences


def main(data: Input, model: Input, embeddings: Output, model_name: str, pins: dict | None,
         batch_size: int, device: str, cache: str, threads: int):
    """Embed the responses in DATA (.jsonl) with MODEL_NAME (weights in folder MODEL)."""
    device = parse_device(device, key="text.device")  # this job's one parse
    records = text_tasks.read_sets(data)
    texts = list(dict.fromkeys(r for record in records for r in record["responses"]))
    vectors, n_new = sentences.embed_with_cache(
        lambda: sentences.load_text_model(model_name, model, device, threads=threads, pins=pins),
        texts, cache,
        fingerprint=sentences.model_fingerprint(model_name, pins, folder=model, device=device),
        batch_size=batch_size)
    with atomic_write(embeddings, "wb") as out:
        np.savez(out, texts=np.asarray(texts), embeddings=vectors)
    log.info("%s: %d distinct responses of %d sets (%d embedded now), dimension %d", model_name,
             len(texts), len(records), n_new, vectors.shape[1])


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
