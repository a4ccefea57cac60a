"""Prepare one graph dataset: graphs, reference/perturbed halves, clusters, perturbed index sets.

Writes ``setup.npz`` (graphs as edge lists, the halves, cluster labels and exemplars of the
perturbed half, which of its graphs are isomorphic to their exemplar, the order in which clusters
are perturbed, and for each experiment the shares ``p`` and the index sets into the perturbed
half) and ``clusters.json`` (a readable summary, with each sweep's number of steps).
"""

import json

import numpy as np
from _helpers import Inputs, Output, log, run

from diversity_core.atomic import atomic_write
from diversity_core.data import graphs as data_graphs
from diversity_core.experiments import graph_mode_collapse as protocol


def dataset_seeds(seed: int, dataset: str) -> dict[str, int]:
    """Independent seeds for the random choices of one dataset, derived from the experiment seed."""
    index = data_graphs.DATASETS.index(dataset)
    names = ("generate", "split", "cluster", "order", "dropping", "collapse")
    state = np.random.SeedSequence([int(seed), index]).generate_state(len(names))
    return dict(zip(names, map(int, state), strict=True))


def main(downloads: Inputs, setup: Output, clusters: Output, dataset: str, options: dict,
         seed: int, sweep: str, p_step: float, wl_iterations: int, ap_damping: list,
         ap_max_iter: int, resources_dir: str):
    """Generate or read ``dataset`` (DOWNLOADS: the files of a fetched one, in RESOURCES_DIR;
    none for the generated ones and grakel's), split it, cluster the perturbed half and build
    both sweeps (SWEEP: graded or clusters, on a grid of P_STEP)."""
    seeds = dataset_seeds(seed, dataset)
    graphs = data_graphs.load_dataset(dataset, options, seed=seeds["generate"],
                                      resources_dir=resources_dir)
    log.info("%s: %d graphs, %.1f nodes on average (%s)", dataset, len(graphs),
             np.mean([g.number_of_nodes() for g in graphs]),
             f"read from {', '.join(downloads)}" if downloads else "generated or packaged")
    reference_idx, perturbed_idx = protocol.split_halves(len(graphs), seeds["split"])
    K = protocol.wl_kernel([graphs[i] for i in perturbed_idx], n_iter=wl_iterations)
    labels, exemplars = protocol.cluster_graphs(K, seed=seeds["cluster"], damping=ap_damping,
                                         max_iter=ap_max_iter)
    n_clusters = len(exemplars)
    order = np.random.default_rng(seeds["order"]).permutation(n_clusters)
    log.info("%s: %d clusters of sizes %s", dataset, n_clusters, np.bincount(labels).tolist())

    # Graphs isomorphic to their exemplar: collapsing them changes nothing (graded sweep).
    identical = protocol.identical_to_exemplar([graphs[i] for i in perturbed_idx], labels,
                                               exemplars)

    arrays = data_graphs.graphs_to_arrays(graphs)
    arrays.update(reference_idx=reference_idx, perturbed_idx=perturbed_idx, labels=labels,
                  exemplars=exemplars, order=order, identical=identical)
    summary = {"dataset": dataset, "n_graphs": len(graphs), "n_reference": len(reference_idx),
               "n_perturbed": len(perturbed_idx), "n_clusters": n_clusters,
               "cluster_sizes": np.bincount(labels).tolist(),
               "n_identical_to_exemplar": int(identical.sum()) - n_clusters, "sweep": sweep,
               "seeds": seeds}
    for experiment in protocol.EXPERIMENTS:
        ps, sets = protocol.sweep_sets(sweep, experiment, labels, exemplars, order, p_step,
                                       seed=seeds[experiment], identical=identical)
        arrays[f"{experiment}_p"] = ps
        arrays[f"{experiment}_sets"] = np.stack(sets)
        summary[f"{experiment}_steps"] = len(ps)
        if len(ps) < protocol.MIN_STEPS:
            log.warning("%s, %s: the %s sweep has %d steps, fewer than %d: rank correlations "
                        "of monotone measures are 1 by construction more easily.", dataset,
                        experiment, sweep, len(ps), protocol.MIN_STEPS)
    with atomic_write(setup, "wb") as f:
        np.savez(f, **arrays)
    with atomic_write(clusters, encoding=None) as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
