"""MagArea and magnitude function of every cloud in one chunk, on the common [0, t_cut]."""

import json

import numpy as np
from _contract import Input, Output
from _job import log, run
from tqdm import tqdm

from diversity_core import MagnitudeSettings
from diversity_core.atomic import atomic_write
from diversity_core.data.curvature import geodesic_distances
from diversity_core.experiments.chunks import chunk_indices


def main(clouds: Input, t_cut: Input, functions: Output, magnitude: dict, chunk: int,
         n_chunks: int, hyperbolic_distance: bool | str):
    """Write FUNCTIONS (.npz): index, mag_area (the configured integral), ts (n_ts,) evenly
    spaced on [0, t_cut], the magnitude functions at ts (n_clouds_in_chunk, n_ts) and
    mag_area_trapezoid, the paper's trapezoid rule on those scales. MAGNITUDE: the
    configuration's ``magnitude`` section (JSON); HYPERBOLIC_DISTANCE: true or turkes
    (``curvature.hyperbolic_distance``).
    """
    settings = MagnitudeSettings.from_config(magnitude)
    n_ts = settings.n_ts
    data = np.load(clouds)
    with open(t_cut) as f:
        limit = json.load(f)["t_cut"]
    index = chunk_indices(len(data["curvature"]), n_chunks, chunk)
    ts = np.linspace(0.0, limit, n_ts)
    area = np.empty(len(index))
    values = np.empty((len(index), n_ts))
    for row, i in enumerate(tqdm(index, desc=f"MagArea, chunk {chunk}")):
        D = geodesic_distances(data["polar"][i], data["curvature"][i], hyperbolic_distance)
        space = settings.space(D)
        area[row] = settings.mag_area(space, limit)
        values[row] = space.magnitude_function(ts)  # shares t = 0 and t_cut with the area
    area_trapezoid = np.trapezoid(values, ts, axis=1)
    with atomic_write(functions, "wb") as out:
        np.savez(out, index=index, mag_area=area, mag_area_trapezoid=area_trapezoid, ts=ts,
                 magnitude=values)
    log.info("chunk %d: %d clouds, MagArea in [%.6g, %.6g]", chunk, len(index), area.min(),
             area.max())


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
