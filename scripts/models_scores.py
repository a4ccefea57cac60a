"""Magnitude functions and scalar diversity scores of every subsample of one collection and
variant (a preprocessing and the distance of magnitude), for all models at once: they share one
grid of scales.

For each model: its embeddings are preprocessed (diversity_core.experiments.model_distinguishing
.preprocess), ``n_subsamples`` sets of ``subsample_size`` documents drawn (seeded per collection
and model; every variant uses the same sets), and each set summarised.
"""

import numpy as np
from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.experiments import model_distinguishing as md
from diversity_core.magnitude.settings import MagnitudeSettings


def main(embeddings: Inputs, scores: Output, collection: str, preprocessing: str, distance: str,
         models: list, subsample_size: int, n_subsamples: int, pca_dim: int, pca_rank: str,
         dcscore_tau: float, magnitude: dict, seed: int):
    """Write ``scores`` (.npz): ts, functions, t_conv, t_cut, one array per scalar measure,
    labels (model index of each set), models, subsets (document indices of each set),
    dimensions (of each model after preprocessing), preprocessing, metric (the distance of
    magnitude)."""
    settings = MagnitudeSettings.from_config(magnitude)
    block = md.block_sets([np.load(path) for path in embeddings], models, collection=collection,
                          preprocessing=preprocessing, pca_dim=pca_dim, pca_rank=pca_rank,
                          subsample_size=subsample_size, n_subsamples=n_subsamples, seed=seed)
    for model, dimension in zip(models, block["dimensions"], strict=True):
        log.info("%s / %s / %s: %d dimensions", collection, preprocessing, model, dimension)
    summary = md.summarise_sets(block["spaces"], settings, metric=distance,
                                dcscore_tau=dcscore_tau, progress=True)
    log.info("%s / %s, %s distance: t_cut = %.4g (median convergence scale of %d sets, range "
             "%.4g to %.4g)", collection, preprocessing, distance, summary["t_cut"],
             len(block["spaces"]), summary["t_conv"].min(), summary["t_conv"].max())
    with atomic_write(scores, "wb") as out:
        np.savez(out, labels=block["labels"], models=np.array(models), subsets=block["subsets"],
                 dimensions=block["dimensions"], collection=np.array(collection),
                 preprocessing=np.array(preprocessing), metric=np.array(distance), **summary)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
