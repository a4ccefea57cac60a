"""Prepare one graph dataset: graphs, reference/perturbed halves, clusters, perturbed index sets.

Writes ``setup.npz`` (graphs as edge lists, the halves, cluster labels and exemplars of the
perturbed half, which of its graphs are isomorphic to their exemplar, the order in which clusters
are perturbed, and for each experiment the shares ``p`` and the index sets into the perturbed
half) and ``clusters.json`` (a readable summary, with each sweep's number of steps), as
``diversity_core.experiments.graph_sweep.prepare_sweeps`` makes them.
"""

import json

import numpy as np
from _contract import Inputs, Output
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.data import graphs as data_graphs
from diversity_core.experiments import graph_mode_collapse as protocol


def main(downloads: Inputs, setup: Output, clusters: Output, dataset: str, options: dict,
         seed: int, sweep: str, p_step: float, wl_iterations: int, ap_damping: list,
         ap_max_iter: int, resources_dir: str):
    """Generate or read ``dataset`` (DOWNLOADS: the files of a fetched one, in RESOURCES_DIR;
    none for the generated ones and grakel's), split it, cluster the perturbed half and build
    both sweeps (SWEEP: graded or clusters, on a grid of P_STEP)."""
    seeds = protocol.dataset_seeds(seed, dataset)
    graphs = data_graphs.load_dataset(dataset, options, seed=seeds["generate"],
                                      resources_dir=resources_dir)
    log.info("%s: %d graphs, %.1f nodes on average (%s)", dataset, len(graphs),
             np.mean([g.number_of_nodes() for g in graphs]),
             f"read from {', '.join(downloads)}" if downloads else "generated or packaged")
    arrays, summary = protocol.prepare_sweeps(graphs, dataset, seeds=seeds, sweep=sweep,
                                              p_step=p_step, wl_iterations=wl_iterations,
                                              ap_damping=ap_damping, ap_max_iter=ap_max_iter)
    with atomic_write(setup, "wb") as f:
        np.savez(f, **arrays)
    with atomic_write(clusters) as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
