"""Choose the reference images (per class) and the disjoint pool perturbed sets draw from."""

import numpy as np
from _contract import Input, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.data.images import CLASS_NAMES, load_dataset
from diversity_core.experiments.image_mode_dropping import select_reference_and_pool


def main(folder: Input, selection: Output, dataset: str, split: str, n_reference_per_class: int,
         n_pool_per_class: int, seed: int):
    """Write ``selection`` (.npz): ``reference`` (classes, n_ref) and ``pool`` (classes, n_pool)
    indices into the data set's ``split``."""
    _, labels = load_dataset(dataset, folder, split)
    reference, pool = select_reference_and_pool(labels, n_reference_per_class, n_pool_per_class,
                                                seed)
    log.info("%s/%s: %d classes, %d reference + %d pool images per class", dataset, split,
             len(reference), n_reference_per_class, n_pool_per_class)
    with atomic_write(selection, "wb") as out:
        np.savez(out, reference=reference, pool=pool,
                 class_names=np.asarray(CLASS_NAMES[dataset]))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
