"""Convergence scale and distance-matrix quantiles of every cloud in one chunk."""

import numpy as np
from _contract import Input, Output
from _job import log, run
from tqdm import tqdm

from diversity_core import MagnitudeSettings
from diversity_core.atomic import atomic_write
from diversity_core.data.curvature import geodesic_distances
from diversity_core.experiments.chunks import chunk_indices
from diversity_core.experiments.curvature import distance_quantile_features


def main(clouds: Input, scales: Output, magnitude: dict, chunk: int, n_chunks: int,
         n_quantiles: int, hyperbolic_distance: bool | str):
    """Write SCALES (.npz): cloud index, t_conv and distance quantiles for the chunk's clouds.
    MAGNITUDE: the configuration's ``magnitude`` section (JSON); HYPERBOLIC_DISTANCE: true or
    turkes (``curvature.hyperbolic_distance``)."""
    settings = MagnitudeSettings.from_config(magnitude)
    data = np.load(clouds)
    index = chunk_indices(len(data["curvature"]), n_chunks, chunk)
    t_conv = np.empty(len(index))
    quantiles = np.empty((len(index), n_quantiles))
    for row, i in enumerate(tqdm(index, desc=f"convergence scales, chunk {chunk}")):
        D = geodesic_distances(data["polar"][i], data["curvature"][i], hyperbolic_distance)
        t_conv[row] = settings.convergence_scale(D)
        quantiles[row] = distance_quantile_features(D, n_quantiles)
    with atomic_write(scales, "wb") as out:
        np.savez(out, index=index, t_conv=t_conv, distance_quantiles=quantiles)
    log.info("chunk %d: %d clouds, t_conv in [%.4g, %.4g]", chunk, len(index), t_conv.min(),
             t_conv.max())


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
