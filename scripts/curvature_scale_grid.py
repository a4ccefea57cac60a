"""Magnitude of every cloud in one chunk at the scales of the sensitivity study's grid."""

import numpy as np
from _contract import Input, Output
from _job import log, run
from tqdm import tqdm

from diversity_core import MagnitudeSpace
from diversity_core.atomic import atomic_write
from diversity_core.data.curvature import geodesic_distances
from diversity_core.experiments.chunks import chunk_indices
from diversity_core.magnitude import ScaleGrid


def main(clouds: Input, grid: Output, scale_grid: dict, chunk: int, n_chunks: int):
    """Write GRID (.npz): index, scales (n_nodes,), magnitude (n_clouds_in_chunk, n_nodes) and
    n_distinct (n_clouds_in_chunk,) of the chunk's clouds. SCALE_GRID: the configuration's
    ``curvature.sensitivity.grid`` section (JSON).

    Distances are the true ones: the Turkeš variant (K < 0 distances halved) has
    ``Mag_turkes(t) = Mag(t/2)``, since exp(−t·D/2) = exp(−(t/2)·D), so the study derives it from
    these values instead of evaluating magnitude again.
    """
    scales = ScaleGrid(**scale_grid).nodes
    data = np.load(clouds)
    index = chunk_indices(len(data["curvature"]), n_chunks, chunk)
    values = np.empty((len(index), scales.size))
    n_distinct = np.empty(len(index), dtype=np.int64)
    for row, i in enumerate(tqdm(index, desc=f"magnitude on the scale grid, chunk {chunk}")):
        space = MagnitudeSpace(geodesic_distances(data["polar"][i], data["curvature"][i]))
        values[row] = space.magnitude_function(scales)
        n_distinct[row] = space.n_unique
    with atomic_write(grid, "wb") as out:
        np.savez(out, index=index, scales=scales, magnitude=values, n_distinct=n_distinct)
    log.info("chunk %d: %d clouds x %d scales in [%.4g, %.4g]", chunk, len(index), scales.size,
             scales[0], scales[-1])


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
