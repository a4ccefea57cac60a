"""Every measure of curvature.measures besides MagArea, for every cloud in one chunk."""

import json

import numpy as np
from _contract import Input, Output
from _job import log, run
from tqdm import tqdm

from diversity_core.atomic import atomic_write
from diversity_core.experiments.chunks import chunk_indices
from diversity_core.experiments.curvature import cloud_measures
from diversity_core.measures.registry import get_measure


def main(clouds: Input, t_cut: Input, functions: Input, values: Output, measures: list,
         chunk: int, n_chunks: int):
    """Write VALUES (.npz): index (the chunk's clouds), measures (MEASURES' names) and values
    (n_clouds_in_chunk, n_measures). FUNCTIONS: the chunk's MagArea (rule curvature_magnitude),
    read by the measures that need a scale, with T_CUT (.json)."""
    chosen = [get_measure(name) for name in measures]
    data = np.load(clouds)
    with open(t_cut) as f:
        limit = json.load(f)["t_cut"]
    magnitude = np.load(functions)
    index = chunk_indices(len(data["curvature"]), n_chunks, chunk)
    if not np.array_equal(magnitude["index"], index):
        raise ValueError(f"{functions} holds other clouds than chunk {chunk} of {n_chunks}.")
    out = np.empty((len(index), len(chosen)))
    for row, i in enumerate(tqdm(index, desc=f"measures, chunk {chunk}")):
        found = cloud_measures(chosen, data["polar"][i], t_cut=limit,
                               mag_area=float(magnitude["mag_area"][row]),
                               where=f"cloud {i} (curvature {data['curvature'][i]:.6g})")
        out[row] = [found[m.name] for m in chosen]
    with atomic_write(values, "wb") as f:
        np.savez(f, index=index, measures=np.array([m.name for m in chosen]), values=out)
    for m, column in zip(chosen, out.T, strict=True):
        log.info("chunk %d: %s in [%.6g, %.6g] over %d clouds", chunk, m.name, column.min(),
                 column.max(), len(index))


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
