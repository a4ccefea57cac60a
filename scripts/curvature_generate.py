"""Sample the point clouds of the curvature experiment (geodesic polar coordinates)."""

import numpy as np
from _contract import Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.data.curvature import curvature_design, sample_disk


def main(clouds: Output, n_points: int, curvature_min: float, curvature_max: float,
         n_train_curvatures: int, clouds_per_curvature: int, n_test_clouds: int, seed: int):
    """Write CLOUDS (.npz): curvature and split (n_clouds,), polar (n_clouds, n_points, 2)."""
    design_seq, clouds_seq = np.random.SeedSequence(seed).spawn(2)
    curvature, split = curvature_design(
        curvature_min=curvature_min, curvature_max=curvature_max,
        n_train_curvatures=n_train_curvatures, clouds_per_curvature=clouds_per_curvature,
        n_test_clouds=n_test_clouds, rng=np.random.default_rng(design_seq),
    )
    # One independent stream per cloud: a cloud does not change when others are added.
    streams = clouds_seq.spawn(len(curvature))
    polar = np.stack([
        sample_disk(K, n_points, np.random.default_rng(stream))
        for K, stream in zip(curvature, streams, strict=True)
    ])
    with atomic_write(clouds, "wb") as out:
        np.savez(out, curvature=curvature, split=split, polar=polar)
    log.info("wrote %d clouds of %d points (%d train, %d test)", len(curvature), n_points,
             (split == "train").sum(), (split == "test").sum())


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
