"""Magnitude functions and scalar diversity scores of every subsample of one collection and
preprocessing (raw or PCA), for all models at once: they share one grid of scales.

For each model: its embeddings are preprocessed (diversity_core.experiments.model_distinguishing
.preprocess), ``n_subsamples`` sets of ``subsample_size`` documents drawn (seeded per collection
and model; the raw and PCA variants use the same sets), and each set summarised.
"""

import numpy as np
from _helpers import Inputs, Output, log, run

from diversity_core.experiments import model_distinguishing as md
from diversity_core.settings import MagnitudeSettings


def main(embeddings: Inputs, scores: Output, collection: str, variant: str, models: list,
         subsample_size: int, n_subsamples: int, pca_dim: int, metric: str, dcscore_tau: float,
         magnitude: dict, seed: int):
    """Write ``scores`` (.npz): ts, functions, t_conv, t_cut, one array per scalar measure,
    labels (model index of each set), models, subsets (document indices of each set)."""
    settings = MagnitudeSettings.from_config(magnitude)
    if len(embeddings) != len(models):
        raise ValueError(f"{len(embeddings)} embedding files for {len(models)} models.")
    spaces, labels, subsets = [], [], []
    for label, (model, path) in enumerate(zip(models, embeddings, strict=True)):
        X = md.preprocess(np.load(path), variant, pca_dim=pca_dim)
        rng = md.subsample_rng(seed, collection, model)
        sets = md.subsample_indices(len(X), subsample_size, n_subsamples, rng)
        spaces.extend(X[s] for s in sets)
        labels.extend([label] * len(sets))
        subsets.append(sets)
        log.info("%s / %s / %s: %d documents in %d dimensions", collection, variant, model,
                 len(X), X.shape[1])
    summary = md.summarise_sets(spaces, settings, metric=metric, dcscore_tau=dcscore_tau,
                                progress=True)
    log.info("%s / %s: t_cut = %.4g (median convergence scale of %d sets, range %.4g to %.4g)",
             collection, variant, summary["t_cut"], len(spaces), summary["t_conv"].min(),
             summary["t_conv"].max())
    with open(scores, "wb") as out:
        np.savez(out, labels=np.array(labels), models=np.array(models),
                 subsets=np.concatenate(subsets), collection=np.array(collection),
                 variant=np.array(variant), metric=np.array(metric), **summary)


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
