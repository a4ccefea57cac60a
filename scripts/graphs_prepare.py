"""Prepare one graph dataset: graphs, reference/perturbed halves, clusters, perturbed index sets.

Writes ``setup.npz`` (graphs as edge lists, the halves, cluster labels and exemplars of the
perturbed half, the order in which clusters are perturbed, and for each experiment the shares ``p``
and the index sets into the perturbed half) and ``clusters.json`` (a readable summary).
"""

import json

import numpy as np
from _helpers import Inputs, Output, log, run

from diversity_core.data import graphs as data_graphs
from diversity_core.experiments import graph_mode_collapse as protocol


def dataset_seeds(seed: int, dataset: str) -> dict[str, int]:
    """Independent seeds for the random choices of one dataset, derived from the experiment seed."""
    index = data_graphs.DATASETS.index(dataset)
    state = np.random.SeedSequence([int(seed), index]).generate_state(5)
    return dict(zip(("generate", "split", "cluster", "order", "dropping"), map(int, state),
                    strict=True))


def main(downloads: Inputs, setup: Output, clusters: Output, dataset: str, options: dict,
         seed: int, p_step: float, wl_iterations: int, ap_damping: list, ap_max_iter: int,
         resources_dir: str):
    """Generate or read ``dataset`` (DOWNLOADS: the files of a downloaded one, in
    RESOURCES_DIR; none for the generated and packaged ones), split it, cluster the perturbed half
    and build both sweeps."""
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

    arrays = data_graphs.graphs_to_arrays(graphs)
    arrays.update(reference_idx=reference_idx, perturbed_idx=perturbed_idx, labels=labels,
                  exemplars=exemplars, order=order)
    summary = {"dataset": dataset, "n_graphs": len(graphs), "n_reference": len(reference_idx),
               "n_perturbed": len(perturbed_idx), "n_clusters": n_clusters,
               "cluster_sizes": np.bincount(labels).tolist(), "seeds": seeds}
    for experiment in protocol.EXPERIMENTS:
        ms, ps = protocol.perturbation_steps(n_clusters, p_step, experiment)
        if experiment == "collapse":
            sets = protocol.collapse_sets(labels, exemplars, order, ms)
        else:
            sets = protocol.dropping_sets(labels, order, ms, seed=seeds["dropping"])
        arrays[f"{experiment}_p"] = ps
        arrays[f"{experiment}_sets"] = np.stack(sets)
        summary[f"{experiment}_steps"] = len(ps)
    with open(setup, "wb") as f:
        np.savez(f, **arrays)
    with open(clusters, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
