"""MagArea and magnitude function of every cloud in one chunk, on the common [0, t_cut]."""

import json

import numpy as np
from _helpers import chunk_indices, log, run
from tqdm import tqdm

from diversity_core import MagnitudeSpace
from diversity_core.experiments.curvature import geodesic_distances


def main(clouds, t_cut, magnitude, chunk=0, n_chunks=1, integration="chebyshev", rtol=1e-8,
         n_ts=30):
    """Write MAGNITUDE (.npz): index, mag_area (the configured integral), ts (n_ts,) evenly spaced
    on [0, t_cut], the magnitude functions at ts (n_clouds_in_chunk, n_ts) and mag_area_trapezoid,
    the paper's trapezoid rule on those scales.
    """
    data = np.load(clouds)
    with open(t_cut) as f:
        limit = json.load(f)["t_cut"]
    index = chunk_indices(len(data["curvature"]), n_chunks, chunk)
    ts = np.linspace(0.0, limit, n_ts)
    area = np.empty(len(index))
    functions = np.empty((len(index), n_ts))
    for row, i in enumerate(tqdm(index, desc=f"MagArea, chunk {chunk}")):
        space = MagnitudeSpace(geodesic_distances(data["polar"][i], data["curvature"][i]))
        area[row] = space.mag_area(limit, method=integration, rtol=rtol, n_ts=n_ts)
        functions[row] = space.magnitude_function(ts)  # shares t = 0 and t_cut with the area
    area_trapezoid = np.trapezoid(functions, ts, axis=1)
    np.savez(magnitude, index=index, mag_area=area, mag_area_trapezoid=area_trapezoid, ts=ts,
             magnitude=functions)
    log.info("chunk %d: %d clouds, MagArea in [%.6g, %.6g]", chunk, len(index), area.min(),
             area.max())


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
