"""The stability check of one (collection, variant) block: every model's embeddings moved at the
level of their round-off (diversity_core.experiments.stability.perturb), the block scored
and classified again exactly as models_scores and models_classify do, once per perturbation.
scripts/models_stability_table.py compares the runs with the unperturbed one.
"""

import numpy as np
import pandas as pd
from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_path
from diversity_core.experiments import model_distinguishing as md
from diversity_core.experiments import stability as ms
from diversity_core.magnitude.settings import MagnitudeSettings


def main(embeddings: Inputs, stability: Output, collection: str, preprocessing: str,
         distance: str, models: list, subsample_size: int, n_subsamples: int, pca_dim: int,
         pca_rank: str, dcscore_tau: float, magnitude: dict, seed: int, k: int, ks: list,
         cv_folds: int, cv_repeats: int, perturbations: int,
         relative_to_column: float, common_to_column: float):
    """Write ``stability`` (.csv): the block's accuracy rows (as models_classify's, unrounded)
    of each of PERTURBATIONS runs on embeddings whose every value is moved by RELATIVE_TO_COLUMN
    of its dimension's root mean square and every dimension shifted by COMMON_TO_COLUMN of it
    (``stability.perturb``), with a ``perturbation`` column."""
    settings = MagnitudeSettings.from_config(magnitude)
    stored = [np.load(path) for path in embeddings]
    rows = []
    for perturbation in range(perturbations):
        moved = [ms.perturb(E, relative_to_column,
                            ms.perturbation_rng(seed, collection, model, perturbation),
                            common_to_column=common_to_column)
                 for model, E in zip(models, stored, strict=True)]
        block = md.block_sets(moved, models, collection=collection, preprocessing=preprocessing,
                              pca_dim=pca_dim, pca_rank=pca_rank, subsample_size=subsample_size,
                              n_subsamples=n_subsamples, seed=seed)
        summary = md.summarise_sets(block["spaces"], settings, metric=distance,
                                    dcscore_tau=dcscore_tau, progress=True)
        summary.update(labels=block["labels"], models=np.array(models),
                       collection=np.array(collection), preprocessing=np.array(preprocessing),
                       metric=np.array(distance))
        accuracy, _ = md.classify_block(summary, ks=ks, k=k, n_splits=cv_folds,
                                        n_repeats=cv_repeats, seed=seed)
        rows.extend({**row, "perturbation": perturbation} for row in accuracy)
        log.info("%s / %s / %s: perturbation %d of %d done", collection, preprocessing, distance,
                 perturbation + 1, perturbations)
    with atomic_path(stability) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    return {"perturbation": f"each embedding value x_ij plus rms_j ({relative_to_column} g_ij + "
                            f"{common_to_column} h_j), rms_j its column's root mean square, "
                            "g, h ~ N(0, 1), h shared by the vectors"}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
