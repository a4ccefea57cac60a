"""Graph mode collapse and mode dropping (paper §4.5, Figure 6; protocol of Thompson et al. 2022).

The experiment asks which measure of a generated set of graphs tracks a known loss of diversity.
A dataset of graphs is split in half: a *reference* half and a *perturbed* half that plays the
generated set. The perturbed half is clustered (Weisfeiler–Lehman kernel + affinity propagation)
and a growing share ``p`` of its clusters is either *collapsed* (every graph of the cluster becomes
the cluster's exemplar) or *dropped* (every graph of the cluster is replaced by draws from the
remaining clusters), one whole cluster per step (GGM-metrics) or, by default, one graph at a time
(the *graded* sweep: tens of steps instead of one per cluster). Graphs are embedded by randomly
initialised GIN networks and each measure is computed between the reference and the perturbed
embeddings at every ``p``; a good measure has a Spearman correlation with ``p`` near 1, reported
with a bootstrap interval over architectures and steps.

Datasets live in :mod:`diversity_core.data.graphs` and the GIN networks in
:mod:`diversity_core.embed.gin`; this module holds the protocol:

* :func:`wl_kernel`, :func:`cluster_graphs`: WL subtree kernel and affinity propagation;
* :func:`perturbation_steps`, :func:`collapse_sets`, :func:`dropping_sets`: whole-cluster
  perturbations; :func:`graded_collapse_sets`, :func:`graded_dropping_sets` (with
  :func:`identical_to_exemplar`): one graph at a time; :func:`sweep_sets` picks the design;
* :func:`graph_measures`, :func:`evaluate_architecture`, :func:`spearman_per_setting`: the
  measures and their rank correlation;
* :func:`bootstrap_mean_rho`, :func:`rho_intervals`: bootstrap intervals of the mean ρ and of
  each measure's gap to MagDiff (architectures and steps resampled).

Differences from the reference code (GGM-metrics, ``permuters/ModePermuter.py``), on purpose:

* **Seeds.** GGM-metrics shuffles with Python's ``random`` and draws replacements with
  ``np.random`` without ever seeding either; here every random choice takes an explicit seed.
* **Every cluster can be perturbed.** GGM-metrics sets ``n_clusters = max(labels)``, one less than
  the number of clusters, so the last cluster is never collapsed or dropped; here all clusters enter
  the seeded random order. (Dropping stops when one cluster is left: the replacements must come from
  somewhere, so the last cluster of the order survives and ``p = dropped / (n_clusters - 1)``.)
* **Affinity propagation on a precomputed affinity.** GGM-metrics passes the WL kernel matrix to
  ``AffinityPropagation`` as *features* (rows of kernel values, compared by negative squared
  Euclidean distance); here the kernel is the affinity (``affinity="precomputed"``).
* **What is clustered.** GGM-metrics clusters the whole dataset and may pick a collapse centre from
  the reference half (then the perturbed set contains an exact copy of a reference graph). Here the
  *perturbed half* is clustered: clusters are the modes of the "generated" set, every cluster has
  members to perturb, the centre of a collapsed cluster is its affinity-propagation exemplar (a
  graph of the same half), and the reference half is never touched.
* **Node feature.** GGM-metrics feeds ``in_degree + out_degree`` of a DGL graph built from an
  undirected graph, i.e. twice the degree; here the feature is the degree itself.
* **Precision of the embeddings.** GGM-metrics embeds in float32, so graphs the GIN cannot tell
  apart end up 1e-7 apart instead of equal; here the GIN runs in float64 and its output is rounded
  to 10 significant digits, so such graphs are exact duplicates (magnitude merges them by the twin
  property), and the convergence scale of the reference counts distinct points
  (:func:`reference_t_cut`).

MagDiff, as reported here, is the *relative loss* of diversity,
``(MagArea_ref - MagArea_perturbed) / MagArea_ref`` on ``[0, t_conv(reference)]``: the paper's
MagDiff with its sign chosen so that, like MMD, it rises as modes collapse or drop.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np

from ..embed.gin import gin_embeddings
from ..settings import MagnitudeSettings

log = logging.getLogger(__name__)

__all__ = [
    "EXPERIMENTS",
    "MEASURES",
    "FLIPPED_MEASURES",
    "MIN_STEPS",
    "SWEEPS",
    "split_halves",
    "wl_kernel",
    "cluster_graphs",
    "perturbation_steps",
    "collapse_sets",
    "dropping_sets",
    "identical_to_exemplar",
    "graded_collapse_sets",
    "graded_dropping_sets",
    "sweep_sets",
    "graph_measures",
    "reference_t_cut",
    "evaluate_architecture",
    "spearman_per_setting",
    "bootstrap_mean_rho",
    "rho_intervals",
]

EXPERIMENTS = ("collapse", "dropping")


MEASURES = ("magdiff", "precision", "recall", "density", "coverage", "mmd_rbf", "mmd_linear")


# Measures that *fall* as diversity is lost: flipped as max - x before the rank correlation.
FLIPPED_MEASURES = ("precision", "recall", "density", "coverage")


# Fewest steps a sweep should have (issue 22): with a handful of steps, rho = 1 asks no more of a
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
# Measures
# ----------------------------------------------------------------------------------------------

def graph_measures(
    reference: np.ndarray,
    generated: np.ndarray,
    *,
    t_cut: float,
    reference_area: float,
    k: int = 5,
    settings: MagnitudeSettings | None = None,
) -> dict[str, float]:
    """All measures of one perturbed set against the reference.

    ``magdiff`` is the *loss* of diversity relative to the reference,
    ``-(MagArea_gen - MagArea_ref) / MagArea_ref`` on [0, t_cut] with Euclidean distances (signed:
    0 for an equally diverse set, positive when diversity is lost), so that, like MMD, it rises with
    the perturbation. Precision, recall, density and coverage (``k`` nearest neighbours) are
    returned as they are (they fall with the perturbation; :func:`spearman_per_setting` flips
    them).

    Parameters
    ----------
    reference : array (n_ref, d); generated : array (n_gen, d), both already standardised
    t_cut, reference_area : the reference's convergence scale and its MagArea on [0, t_cut]
    settings : magnitude conventions (MagArea integration); the package defaults if None
    """
    from diversity_core import mmd_linear, mmd_rbf, pairwise_distances, prdc

    settings = settings or MagnitudeSettings()
    area = settings.mag_area(pairwise_distances(generated), t_cut)
    out = {"magdiff": float((reference_area - area) / reference_area)}
    out.update({name: float(v) for name, v in prdc(reference, generated, k).items()
                if name in ("precision", "recall", "density", "coverage")})
    out["mmd_rbf"] = float(mmd_rbf(generated, reference))
    out["mmd_linear"] = float(mmd_linear(generated, reference))
    return out


def reference_t_cut(reference: np.ndarray, settings: MagnitudeSettings | None = None) -> float:
    """The reference's convergence scale, ``Mag(t_conv) = target · n_distinct``.

    Random GIN embeddings of degree-featured graphs often coincide (isomorphic or WL-equivalent
    graphs get identical embeddings; Cuneiform's reference half has only a handful of distinct
    embeddings). :func:`diversity_core.convergence_scale` counts distinct points, so such
    duplicates are harmless.

    Parameters
    ----------
    reference : array (n_ref, d)

    Returns
    -------
    t_cut : float
    """
    from diversity_core import pairwise_distances

    return (settings or MagnitudeSettings()).convergence_scale(pairwise_distances(reference))


def evaluate_architecture(
    graphs: Sequence[nx.Graph],
    reference_idx: np.ndarray,
    perturbed_idx: np.ndarray,
    sweeps: dict,
    architecture: dict,
    *,
    mlp_layers: int = 2,
    k: int = 5,
    settings: MagnitudeSettings | None = None,
) -> list[dict]:
    """Every measure at every step of every sweep, for one GIN architecture.

    All graphs are embedded once; the embeddings are standardised with a scaler fit on the reference
    half (as GGM-metrics does). MagDiff integrates up to the reference's convergence scale
    (:func:`reference_t_cut`) and is relative to the reference's MagArea (see
    :func:`graph_measures`); ``settings`` are the magnitude conventions (package defaults if
    None).

    Parameters
    ----------
    sweeps : ``{experiment: (ps, index_sets)}``; ``index_sets[i]`` indexes the perturbed half
    architecture : dict with ``setting``, ``layers``, ``hidden``, ``init_seed``
        (see :func:`draw_architectures`)

    Returns
    -------
    rows : list of dicts with keys experiment, setting, layers, hidden, init_seed, step, p, metric,
        value (plus ``t_cut``: the reference's convergence scale)
    """
    from sklearn.preprocessing import StandardScaler

    from diversity_core import MagnitudeSpace, pairwise_distances

    settings = settings or MagnitudeSettings()
    E = gin_embeddings(graphs, layers=architecture["layers"], hidden=architecture["hidden"],
                       seed=architecture["init_seed"], mlp_layers=mlp_layers)
    scaler = StandardScaler().fit(E[reference_idx])
    R = scaler.transform(E[reference_idx])
    P = scaler.transform(E[perturbed_idx])
    # One prepared space: the area's grid reuses Mag(t_cut) from the convergence-scale search.
    reference_space = MagnitudeSpace(pairwise_distances(R))
    t_cut = settings.convergence_scale(reference_space)
    ref_area = settings.mag_area(reference_space, t_cut)
    base = {k: architecture[k] for k in ("setting", "layers", "hidden", "init_seed")}
    rows = []
    for experiment, (ps, index_sets) in sweeps.items():
        for step, (p, idx) in enumerate(zip(ps, index_sets, strict=True)):
            values = graph_measures(R, P[idx], t_cut=t_cut, reference_area=ref_area, k=k,
                                    settings=settings)
            for metric in MEASURES:
                rows.append({"experiment": experiment, **base, "step": step, "p": float(p),
                             "metric": metric, "value": values[metric], "t_cut": t_cut})
    return rows


def spearman_per_setting(measures):
    """Spearman's ρ of every measure with ``p``, per (dataset, experiment, metric, setting).

    Parameters
    ----------
    measures : pandas.DataFrame with columns dataset, experiment, setting, p, metric, value

    Returns
    -------
    pandas.DataFrame with columns dataset, experiment, metric, setting, spearman. Measures in
    :data:`FLIPPED_MEASURES` are flipped as ``max - x`` (max over the sweep) first. A measure that
    is constant over the sweep has no rank correlation: NaN.
    """
    import pandas as pd
    from scipy.stats import spearmanr

    rows = []
    keys = ["dataset", "experiment", "metric", "setting"]
    for key, grp in measures.groupby(keys, sort=False):
        grp = grp.sort_values("p")
        v = grp["value"].to_numpy(dtype=float)
        if key[2] in FLIPPED_MEASURES:
            v = v.max() - v
        if len(v) < 2 or np.ptp(v) == 0 or np.ptp(grp["p"].to_numpy()) == 0:
            rho = np.nan
        else:
            rho = float(spearmanr(grp["p"].to_numpy(), v).statistic)
        rows.append(dict(zip(keys, key, strict=True), spearman=rho))
    return pd.DataFrame(rows, columns=keys + ["spearman"])


def _spearman_along_steps(p: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Spearman's ρ of ``values[..., step, metric]`` with ``p[..., step]`` along the step axis
    (average ranks for ties; NaN where either side is constant), rounded to 12 decimals so that
    a measure ranked exactly as ``p`` gets exactly 1 (not 1 - 1e-16)."""
    from scipy.stats import rankdata

    rp = rankdata(p, axis=-1)[..., None]
    rv = rankdata(values, axis=-2)
    rp = rp - rp.mean(axis=-2, keepdims=True)
    rv = rv - rv.mean(axis=-2, keepdims=True)
    num = (rp * rv).sum(axis=-2)
    den = np.sqrt((rp ** 2).sum(axis=-2) * (rv ** 2).sum(axis=-2))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = num / den
    return np.where(den > 0, np.round(rho, 12), np.nan)


def bootstrap_mean_rho(
    p: np.ndarray,
    values: np.ndarray,
    *,
    signs: np.ndarray | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    chunk: int = 100,
) -> np.ndarray:
    """Bootstrap replicates of the mean Spearman ρ over architectures, one sweep.

    The sweep is a crossed design: every architecture is scored at the same steps. Each
    replicate resamples both factors independently, with replacement (Owen's pigeonhole
    bootstrap): the steps (the (p, value) pairs from which each ρ is computed: their number is
    what gives a sweep its power) and the architectures (the random GIN networks the mean runs
    over). A measure that is monotone in p at every step of every architecture has ρ = 1 in
    every replicate, so its interval is exactly [1, 1], and two such measures are visibly tied.

    Parameters
    ----------
    p : array (n_steps,), the sweep's shares
    values : array (n_architectures, n_steps, n_metrics)
    signs : array (n_metrics,) of ±1; -1 flips a measure that falls with p (ρ of ``max - x``
        is minus ρ of ``x``); all +1 if None
    n_boot, seed : number of replicates and their seed
    chunk : replicates computed at once (memory: ``chunk · values.size`` floats)

    Returns
    -------
    replicates : array (n_boot, n_metrics), the mean ρ over the resampled architectures (NaN
        where ρ is undefined for every resampled architecture)
    """
    p = np.asarray(p, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    n_arch, n_steps, n_metrics = values.shape
    if p.shape != (n_steps,):
        raise ValueError(f"p has shape {p.shape}; values have {n_steps} steps.")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1; got {n_boot}.")
    signs = np.ones(n_metrics) if signs is None else np.asarray(signs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, n_metrics))
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        steps = rng.integers(n_steps, size=(b, n_steps))
        archs = rng.integers(n_arch, size=(b, n_arch))
        # rho[r, a, m]: architecture archs[r, a] scored on the steps of replicate r.
        rho = _spearman_along_steps(p[steps][:, None, :],
                                    values[archs[:, :, None], steps[:, None, :], :])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: undefined
            out[start:start + b] = np.nanmean(rho, axis=1) * signs
    return out


def rho_intervals(measures, *, n_boot: int, seed: int, level: float = 0.95):
    """Bootstrap intervals of the mean ρ of every measure, and of its gap to MagDiff.

    For each (dataset, experiment), :func:`bootstrap_mean_rho` on the table's sweep; the
    intervals are percentile intervals at ``level``. The gap ``magdiff - metric`` is taken
    within each replicate (paired: the same steps and architectures), so two measures tied at
    ρ = 1 have the gap interval [0, 0].

    Parameters
    ----------
    measures : pandas.DataFrame with columns dataset, experiment, setting, step, p, metric,
        value (every setting scored at the same steps)
    n_boot, seed : replicates and the seed (each panel its own stream, derived from ``seed``)
    level : coverage of the intervals, in (0, 1)

    Returns
    -------
    pandas.DataFrame with columns dataset, experiment, metric, ci_low, ci_high, gap, gap_low,
    gap_high (``gap`` = mean ρ of MagDiff minus this measure's)
    """
    import pandas as pd

    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1); got {level}.")
    tails = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
    signs = np.array([-1.0 if m in FLIPPED_MEASURES else 1.0 for m in MEASURES])
    rows = []
    for i, ((dataset, experiment), grp) in enumerate(
            measures.groupby(["dataset", "experiment"], sort=True)):
        wide = grp.pivot_table(index=["setting", "step"], columns="metric", values="value",
                               aggfunc="first")
        steps = np.sort(grp["step"].unique())
        settings = np.sort(grp["setting"].unique())
        full = pd.MultiIndex.from_product([settings, steps], names=["setting", "step"])
        if len(wide) != len(full) or not wide.index.equals(full):
            raise ValueError(f"{dataset}/{experiment}: the architectures were not scored at the "
                             "same steps.")
        values = wide.reindex(columns=list(MEASURES)).to_numpy().reshape(
            len(settings), len(steps), len(MEASURES))
        p = grp.drop_duplicates("step").set_index("step").loc[steps, "p"].to_numpy()
        reps = bootstrap_mean_rho(p, values, signs=signs, n_boot=n_boot,
                                  seed=np.random.SeedSequence([seed, i]).generate_state(1)[0])
        magdiff = MEASURES.index("magdiff")
        gaps = reps[:, [magdiff]] - reps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an undefined measure: NaN
            point = np.nanmean(_spearman_along_steps(p[None, :], values), axis=0) * signs
            ci = np.nanpercentile(reps, tails, axis=0)
            gap_ci = np.nanpercentile(gaps, tails, axis=0)
        for j, metric in enumerate(MEASURES):
            rows.append({"dataset": dataset, "experiment": experiment, "metric": metric,
                         "ci_low": ci[0, j], "ci_high": ci[1, j],
                         "gap": point[magdiff] - point[j], "gap_low": gap_ci[0, j],
                         "gap_high": gap_ci[1, j]})
    return pd.DataFrame(rows)


# Graphs in the datasets whose size the configuration fixes (the downloaded ones are checked
# when they are read).
FIXED_GRAPH_COUNTS = {"mutag": 188, "cuneiform": 267}


def config_problems(section: Mapping) -> list[str]:
    """The constraints between keys of the graphs section that the configuration schema cannot
    express, as sentences naming the keys (empty if there are none). The workflow checks them
    before any job runs (workflow/rules/common.smk: check_config)."""
    graphs = section
    problems = []
    if graphs["figure_dataset"] not in graphs["datasets"]:
        problems.append(
            f"graphs.figure_dataset ({graphs['figure_dataset']}) is not among graphs.datasets "
            f"{graphs['datasets']}.")
    for section, low, high in (("lobster", "min_nodes", "max_nodes"), ("grid", "lower", "upper"),
                               ("community", "min_size", "max_size"),
                               ("proteins", "min_nodes", "max_nodes"),
                               ("ego", "min_nodes", "max_nodes")):
        options = graphs[section]
        if options[low] > options[high]:
            problems.append(f"graphs.{section}.{low} ({options[low]}) exceeds "
                            f"graphs.{section}.{high} ({options[high]}).")
    counts = dict(FIXED_GRAPH_COUNTS, lobster=graphs["lobster"]["n_graphs"],
                  community=graphs["community"]["n_graphs"], zinc=graphs["zinc"]["n_graphs"],
                  grid=max(0, graphs["grid"]["upper"] - graphs["grid"]["lower"] + 1) ** 2)
    for name in graphs["datasets"]:
        half = counts.get(name, math.inf) // 2
        if graphs["k"] >= half:
            problems.append(
                f"graphs.k ({graphs['k']}) must be smaller than the {half} graphs of the "
                f"reference half of {name}: PRDC needs a k-th neighbour besides the graph itself.")
    return problems
