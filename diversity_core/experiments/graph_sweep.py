"""The perturbation sweep of the graph experiment (:mod:`.graph_mode_collapse`): the halves,
the clusters of the perturbed half, and the sets that collapse or drop a growing share p of them.

* :func:`split_halves`: the reference half and the perturbed half;
* :func:`wl_kernel`, :func:`cluster_graphs`: Weisfeiler–Lehman subtree kernel and affinity
  propagation on it (a precomputed affinity);
* :func:`perturbation_steps`, :func:`collapse_sets`, :func:`dropping_sets`: whole-cluster
  perturbations; :func:`graded_collapse_sets`, :func:`graded_dropping_sets` (with
  :func:`identical_to_exemplar`): one graph at a time; :func:`sweep_sets` picks the design;
* :func:`dataset_seeds`, :func:`prepare_sweeps`: one dataset prepared (what the rule
  ``graphs_prepare`` writes).

Differences from GGM-metrics' ``ModePermuter`` are listed in :mod:`.graph_mode_collapse`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

# networkx (0.2 CPU s to import) is imported by the functions that build or read graphs; here
# it only names their type.
if TYPE_CHECKING:
    import networkx as nx

log = logging.getLogger(__name__)

__all__ = ["EXPERIMENTS", "MIN_STEPS", "SWEEPS", "cluster_graphs", "collapse_sets",
           "dataset_seeds", "dropping_sets", "graded_collapse_sets", "graded_dropping_sets",
           "identical_to_exemplar", "perturbation_steps", "prepare_sweeps", "split_halves",
           "sweep_sets", "wl_kernel"]

EXPERIMENTS = ("collapse", "dropping")

# Fewest steps a sweep should have: with a handful of steps, rho = 1 asks no more of a
# measure than monotonicity over a few states; the prepare step warns below this.
MIN_STEPS = 20


# ----------------------------------------------------------------------------------------------
# Split, clusters, perturbations
# ----------------------------------------------------------------------------------------------

def split_halves(n_graphs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded random split: a reference half (``n // 2`` graphs) and a perturbed half (the rest)."""
    if n_graphs < 4:
        raise ValueError(f"need at least 4 graphs to split into halves; got {n_graphs}.")
    perm = np.random.default_rng(seed).permutation(n_graphs)
    half = n_graphs // 2
    return np.sort(perm[:half]), np.sort(perm[half:])


def wl_kernel(graphs: Sequence[nx.Graph], n_iter: int = 1) -> np.ndarray:
    """Normalised Weisfeiler–Lehman subtree kernel with degree labels (grakel).

    Returns
    -------
    K : array of shape (n_graphs, n_graphs), symmetric, unit diagonal, entries in [0, 1]
    """
    import networkx as nx
    from grakel import graph_from_networkx
    from grakel.kernels import VertexHistogram, WeisfeilerLehman

    labelled = []
    for g in graphs:
        h = nx.Graph(g)
        nx.set_node_attributes(h, dict(h.degree()), "degree")
        labelled.append(h)
    gk = WeisfeilerLehman(n_iter=n_iter, base_graph_kernel=VertexHistogram, normalize=True)
    K = np.asarray(gk.fit_transform(graph_from_networkx(labelled, node_labels_tag="degree")),
                   dtype=np.float64)
    return 0.5 * (K + K.T)


def cluster_graphs(
    K: np.ndarray,
    *,
    seed: int,
    damping: float | Sequence[float] = (0.5, 0.7, 0.9),
    max_iter: int = 1000,
    convergence_iter: int = 15,
) -> tuple[np.ndarray, np.ndarray]:
    """Affinity propagation with the kernel matrix as a precomputed affinity.

    (GGM-metrics passes the kernel matrix as features instead; see the module docstring.) The
    preference is scikit-learn's default, the median affinity. Affinity propagation oscillates on
    some kernels (many graphs with identical WL histograms, e.g. Cuneiform); the damping factors in
    ``damping`` are tried in order and the first run that converges to at least two clusters is
    kept.

    Returns
    -------
    labels : int array (n_graphs,), clusters numbered 0..n_clusters-1
    exemplars : int array (n_clusters,), ``exemplars[c]`` = index of cluster ``c``'s exemplar
        (its "centre": a member of the cluster)

    Raises
    ------
    RuntimeError
        No damping factor gave a converged clustering with at least two clusters.
    """
    from sklearn.cluster import AffinityPropagation
    from sklearn.exceptions import ConvergenceWarning

    K = np.asarray(K, dtype=np.float64)
    dampings = [float(damping)] if np.isscalar(damping) else [float(d) for d in damping]
    tried = []
    for d in dampings:
        ap = AffinityPropagation(affinity="precomputed", damping=d, max_iter=max_iter,
                                 convergence_iter=convergence_iter, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            try:
                ap.fit(K)
            except ConvergenceWarning:
                tried.append(f"damping {d}: no convergence")
                continue
        labels = np.asarray(ap.labels_, dtype=np.int64)
        exemplars = np.asarray(ap.cluster_centers_indices_, dtype=np.int64)
        if len(exemplars) < 2 or labels.min() < 0:
            tried.append(f"damping {d}: {len(exemplars)} cluster(s)")
            continue
        if not np.array_equal(labels[exemplars], np.arange(len(exemplars))):
            raise RuntimeError("affinity propagation exemplars do not match their labels.")
        if len(tried):
            log.info("affinity propagation: %s; converged with damping %s", "; ".join(tried), d)
        return labels, exemplars
    raise RuntimeError(
        f"affinity propagation gave no usable clustering ({'; '.join(tried)}, max_iter="
        f"{max_iter}). Try other damping factors or a larger max_iter."
    )


def perturbation_steps(
    n_clusters: int, step: float, experiment: str
) -> tuple[np.ndarray, np.ndarray]:
    """Numbers of perturbed clusters ``m`` and shares ``p`` visited by the sweep.

    ``p`` runs over ``0, step, 2·step, ..., 1``; ``m = round(p · n_max)`` with
    ``n_max = n_clusters`` for collapse and ``n_clusters - 1`` for dropping (one cluster must
    stay to resample from).
    Repeated ``m`` are merged, so with fewer than ``1/step`` clusters every ``m`` is visited once;
    the returned ``p`` are the exact shares ``m / n_max``.

    Returns
    -------
    ms : int array, strictly increasing from 0 to n_max
    ps : float array, ``ms / n_max``
    """
    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {EXPERIMENTS}; got {experiment!r}.")
    if not 0 < step <= 1:
        raise ValueError(f"step must lie in (0, 1]; got {step}.")
    n_max = n_clusters if experiment == "collapse" else n_clusters - 1
    if n_max < 1:
        raise ValueError(
            f"{experiment} needs at least {2 if experiment == 'dropping' else 1} clusters; the "
            f"clustering found {n_clusters}."
        )
    n_steps = int(np.floor(1.0 / step + 1e-9))
    grid = np.minimum(np.arange(n_steps + 1) * step, 1.0)
    ms = np.unique(np.concatenate([np.rint(grid * n_max).astype(np.int64), [n_max]]))
    return ms, ms / n_max


def collapse_sets(labels, exemplars, order, ms) -> list[np.ndarray]:
    """Index sets of the collapsed perturbed half, one per entry of ``ms``.

    After ``m`` steps the clusters ``order[:m]`` are collapsed: each of their members is replaced by
    the cluster's exemplar (its affinity-propagation centre).

    Returns
    -------
    sets : list of int arrays of shape (n_graphs,), indices into the perturbed half
    """
    labels = np.asarray(labels)
    out = []
    for m in ms:
        idx = np.arange(len(labels))
        for c in order[:m]:
            idx[labels == c] = exemplars[c]
        out.append(idx)
    return out


def dropping_sets(labels, order, ms, *, seed: int) -> list[np.ndarray]:
    """Index sets of the mode-dropped perturbed half, one per entry of ``ms`` (nested sweep).

    Clusters are dropped one at a time in ``order``: every current graph of the dropped cluster is
    replaced by a uniform draw (with replacement) from the current graphs of the clusters not yet
    dropped, as in GGM-metrics, but seeded. The set size stays the same. At most
    ``n_clusters - 1`` clusters can be dropped.

    Returns
    -------
    sets : list of int arrays of shape (n_graphs,), indices into the perturbed half
    """
    labels = np.asarray(labels)
    n_clusters = int(labels.max()) + 1
    ms = np.asarray(ms)
    if ms.size and ms.max() > n_clusters - 1:
        raise ValueError(f"cannot drop {ms.max()} of {n_clusters} clusters: one must remain.")
    rng = np.random.default_rng(seed)
    idx = np.arange(len(labels))
    current = labels.copy()
    out, dropped = [], 0
    for m in ms:
        while dropped < m:
            c = order[dropped]
            members = np.flatnonzero(current == c)
            candidates = np.flatnonzero(current != c)
            if members.size:
                draws = rng.choice(candidates, size=members.size, replace=True)
                idx[members] = idx[draws]
                current[members] = current[draws]
            dropped += 1
        out.append(idx.copy())
    return out


# Sweeps: "graded" (default) perturbs a cluster one graph at a time, "clusters" (GGM-metrics and
# the paper) a whole cluster per step.
SWEEPS = ("graded", "clusters")


def identical_to_exemplar(graphs: Sequence[nx.Graph], labels, exemplars) -> np.ndarray:
    """Which graphs are isomorphic to their cluster's exemplar (the exemplars themselves too).

    Collapsing such a graph changes nothing, so the graded collapse sweep skips it (a step that
    changes nothing would tie every measure). A Weisfeiler–Lehman hash (3 iterations, degree
    labels) rules most pairs out before the exact test (networkx's VF2).

    Returns
    -------
    identical : bool array (n_graphs,)
    """
    import networkx as nx

    labels, exemplars = np.asarray(labels), np.asarray(exemplars)

    def wl_hash(g):
        h = nx.Graph(g)
        nx.set_node_attributes(h, {v: str(d) for v, d in h.degree()}, "degree")
        return nx.weisfeiler_lehman_graph_hash(h, node_attr="degree", iterations=3)

    identical = np.zeros(len(labels), dtype=bool)
    identical[exemplars] = True
    hashes = {}
    for i in np.flatnonzero(~identical):
        e = int(exemplars[labels[i]])
        g, h = graphs[i], graphs[e]
        if not nx.faster_could_be_isomorphic(g, h):
            continue
        for j in (i, e):
            if j not in hashes:
                hashes[j] = wl_hash(graphs[j])
        identical[i] = hashes[i] == hashes[e] and nx.is_isomorphic(g, h)
    return identical


def _on_grid(ps: np.ndarray, states: list[np.ndarray], step: float):
    """The states nearest to ``p = 0, step, 2·step, ..., 1`` (each at most once; the first and
    last state always), with their exact ``p``."""
    if not 0 < step <= 1:
        raise ValueError(f"step must lie in (0, 1]; got {step}.")
    n_steps = int(np.floor(1.0 / step + 1e-9))
    grid = np.append(np.minimum(np.arange(n_steps + 1) * step, 1.0), 1.0)
    # For each grid value, the state whose p is nearest (ps is strictly increasing).
    right = np.clip(np.searchsorted(ps, grid), 1, len(ps) - 1)
    nearest = np.where(grid - ps[right - 1] <= ps[right] - grid, right - 1, right)
    picked = np.unique(np.concatenate([[0], nearest, [len(ps) - 1]]))
    return ps[picked], [states[i] for i in picked]


def graded_collapse_sets(labels, exemplars, order, step: float, *, seed: int,
                         identical=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Mode collapse one graph at a time: the *graded* sweep.

    Clusters are collapsed in ``order``, as in :func:`collapse_sets`, but within a cluster its
    graphs are moved onto the exemplar one at a time, in a seeded random order, so that every
    step changes the set. ``p`` is the share of clusters collapsed, counting the current cluster
    by the fraction of its graphs already moved: after ``j`` of the ``n_c`` graphs of the
    ``k``-th cluster, ``p = (k + j / n_c) / n_active``. Graphs ``identical`` to their exemplar
    (:func:`identical_to_exemplar`) are already collapsed and are skipped; clusters with nothing
    to collapse (singletons) are not counted in ``n_active``. At ``p = k / n_active`` the set is
    the one :func:`collapse_sets` gives after the first ``k`` active clusters of ``order``, up to
    the skipped graphs (each still itself, not a copy of the exemplar it is isomorphic to). The
    sweep visits the states nearest to ``p = 0, step, ..., 1`` (:func:`_on_grid`).

    Returns
    -------
    ps : float array, strictly increasing from 0 to 1
    sets : list of int arrays of shape (n_graphs,), indices into the perturbed half
    """
    labels, exemplars = np.asarray(labels), np.asarray(exemplars)
    movable = np.ones(len(labels), dtype=bool) if identical is None else ~np.asarray(identical)
    movable[exemplars] = False
    rng = np.random.default_rng(seed)
    active = [c for c in order if movable[labels == c].any()]
    if not active:
        raise ValueError("nothing to collapse: every graph is its cluster's exemplar or "
                         "identical to it.")
    idx = np.arange(len(labels))
    ps, states = [0.0], [idx.copy()]
    for k, c in enumerate(active):
        members = rng.permutation(np.flatnonzero((labels == c) & movable))
        for j, member in enumerate(members, start=1):
            idx[member] = exemplars[c]
            ps.append((k + j / len(members)) / len(active))
            states.append(idx.copy())
    return _on_grid(np.array(ps), states, step)


def graded_dropping_sets(labels, order, step: float, *,
                         seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Mode dropping one graph at a time: the *graded* sweep.

    Clusters are dropped in ``order`` (all but the last, which must remain), as in
    :func:`dropping_sets`, but one graph at a time: in a seeded random order, each current graph
    of the cluster being dropped is replaced by a uniform draw from the current graphs of the
    clusters not being dropped (copies placed by earlier drops included, as in GGM-metrics).
    ``p = (k + j / n_c) / (n_clusters - 1)`` after ``j`` of the ``n_c`` graphs of the ``k``-th
    cluster; the sweep visits the states nearest to ``p = 0, step, ..., 1``.

    Returns
    -------
    ps : float array, strictly increasing from 0 to 1
    sets : list of int arrays of shape (n_graphs,), indices into the perturbed half
    """
    labels = np.asarray(labels)
    n_clusters = len(order)
    if n_clusters < 2:
        raise ValueError(f"dropping needs at least 2 clusters; the clustering found {n_clusters}.")
    rng = np.random.default_rng(seed)
    idx = np.arange(len(labels))
    current = labels.copy()
    ps, states = [0.0], [idx.copy()]
    for k, c in enumerate(order[:-1]):
        members = rng.permutation(np.flatnonzero(current == c))
        for j, member in enumerate(members, start=1):
            draw = rng.choice(np.flatnonzero(current != c))
            idx[member], current[member] = idx[draw], current[draw]
            ps.append((k + j / len(members)) / (n_clusters - 1))
            states.append(idx.copy())
    return _on_grid(np.array(ps), states, step)


def sweep_sets(sweep: str, experiment: str, labels, exemplars, order, step: float, *,
               seed: int, identical=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """The shares ``p`` and perturbed index sets of one experiment's sweep.

    ``sweep``: ``graded`` (:func:`graded_collapse_sets`, :func:`graded_dropping_sets`: one graph
    at a time, so as many steps as there are graphs to move, at most ``1 / step + 1``) or
    ``clusters``
    (:func:`perturbation_steps` with :func:`collapse_sets` / :func:`dropping_sets`: one whole
    cluster per step, as in GGM-metrics and the paper). ``seed`` seeds the order of the graphs
    within a cluster and the replacements of dropped graphs; ``identical`` (graded collapse) marks
    the graphs identical to their exemplar.
    """
    if sweep not in SWEEPS:
        raise ValueError(f"sweep must be one of {SWEEPS}; got {sweep!r}.")
    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {EXPERIMENTS}; got {experiment!r}.")
    if sweep == "graded":
        if experiment == "collapse":
            return graded_collapse_sets(labels, exemplars, order, step, seed=seed,
                                        identical=identical)
        return graded_dropping_sets(labels, order, step, seed=seed)
    ms, ps = perturbation_steps(len(exemplars), step, experiment)
    if experiment == "collapse":
        return ps, collapse_sets(labels, exemplars, order, ms)
    return ps, dropping_sets(labels, order, ms, seed=seed)


# ----------------------------------------------------------------------------------------------
# One dataset prepared: seeds, halves, clusters, both sweeps
# ----------------------------------------------------------------------------------------------

def dataset_seeds(seed: int, dataset: str) -> dict[str, int]:
    """Independent seeds for the random choices of one dataset (``generate``, ``split``,
    ``cluster``, ``order``, ``dropping``, ``collapse``), derived from the experiment's ``seed``
    and the dataset's place in :data:`diversity_core.data.graphs.DATASETS`."""
    from ..data.graphs import DATASETS

    index = DATASETS.index(dataset)
    names = ("generate", "split", "cluster", "order", "dropping", "collapse")
    state = np.random.SeedSequence([int(seed), index]).generate_state(len(names))
    return dict(zip(names, map(int, state), strict=True))


def prepare_sweeps(graphs: Sequence[nx.Graph], dataset: str, *, seeds: Mapping[str, int],
                   sweep: str, p_step: float, wl_iterations: int, ap_damping,
                   ap_max_iter: int) -> tuple[dict[str, np.ndarray], dict]:
    """Split ``graphs`` into halves, cluster the perturbed half and build both experiments' sweeps.

    Parameters
    ----------
    graphs : the dataset's graphs
    dataset : its name (in the summary and the log)
    seeds : :func:`dataset_seeds` of the dataset
    sweep : one of :data:`SWEEPS`; ``p_step``: its grid of shares p
    wl_iterations : iterations of the Weisfeiler–Lehman kernel (:func:`wl_kernel`)
    ap_damping, ap_max_iter : affinity propagation's dampings to try and iterations
        (:func:`cluster_graphs`)

    Returns
    -------
    arrays : what ``setup.npz`` holds: the graphs as edge lists
        (:func:`diversity_core.data.graphs.graphs_to_arrays`), ``reference_idx``,
        ``perturbed_idx``, cluster ``labels`` and ``exemplars`` of the perturbed half, the
        ``order`` in which clusters are perturbed, ``identical`` (graphs isomorphic to their
        exemplar), and per experiment ``<experiment>_p`` (n_steps,) and ``<experiment>_sets``
        (n_steps, n_perturbed) index sets into the perturbed half
    summary : what ``clusters.json`` says (counts, cluster sizes, seeds, steps per experiment)
    """
    from ..data.graphs import graphs_to_arrays

    reference_idx, perturbed_idx = split_halves(len(graphs), seeds["split"])
    K = wl_kernel([graphs[i] for i in perturbed_idx], n_iter=wl_iterations)
    labels, exemplars = cluster_graphs(K, seed=seeds["cluster"], damping=ap_damping,
                                       max_iter=ap_max_iter)
    n_clusters = len(exemplars)
    order = np.random.default_rng(seeds["order"]).permutation(n_clusters)
    log.info("%s: %d clusters of sizes %s", dataset, n_clusters, np.bincount(labels).tolist())

    # Graphs isomorphic to their exemplar: collapsing them changes nothing (graded sweep).
    identical = identical_to_exemplar([graphs[i] for i in perturbed_idx], labels, exemplars)

    arrays = graphs_to_arrays(graphs)
    arrays.update(reference_idx=reference_idx, perturbed_idx=perturbed_idx, labels=labels,
                  exemplars=exemplars, order=order, identical=identical)
    summary = {"dataset": dataset, "n_graphs": len(graphs), "n_reference": len(reference_idx),
               "n_perturbed": len(perturbed_idx), "n_clusters": n_clusters,
               "cluster_sizes": np.bincount(labels).tolist(),
               "n_identical_to_exemplar": int(identical.sum()) - n_clusters, "sweep": sweep,
               "seeds": dict(seeds)}
    for experiment in EXPERIMENTS:
        ps, sets = sweep_sets(sweep, experiment, labels, exemplars, order, p_step,
                              seed=seeds[experiment], identical=identical)
        arrays[f"{experiment}_p"] = ps
        arrays[f"{experiment}_sets"] = np.stack(sets)
        summary[f"{experiment}_steps"] = len(ps)
        if len(ps) < MIN_STEPS:
            log.warning("%s, %s: the %s sweep has %d steps, fewer than %d: rank correlations "
                        "of monotone measures are 1 by construction more easily.", dataset,
                        experiment, sweep, len(ps), MIN_STEPS)
    return arrays, summary
