"""Graph mode collapse and mode dropping (paper §4.5, Figure 6; protocol of Thompson et al. 2022).

The experiment asks which measure of a generated set of graphs tracks a known loss of diversity.
A dataset of graphs is split in half: a *reference* half and a *perturbed* half that plays the
generated set. The perturbed half is clustered (Weisfeiler–Lehman kernel + affinity propagation)
and a growing share ``p`` of its clusters is either *collapsed* (every graph of the cluster becomes
the cluster's exemplar) or *dropped* (every graph of the cluster is replaced by draws from the
remaining clusters). Graphs are embedded by randomly initialised GIN networks and each measure is
computed between the reference and the perturbed embeddings at every ``p``; a good measure has a
Spearman correlation with ``p`` near 1.

Contents:

* dataset generators (Lobster, Grid, Community, as in GRAN / GGM-metrics, but seeded), a reader of
  the TU text format (MUTAG and Cuneiform ship with ``grakel``; TU DD = "Proteins"), the
  Citeseer ego-network extractor ("Ego"), and checksummed download helpers for DD and Citeseer;
* :func:`gin_embeddings`: random GIN graph embeddings in torch-geometric;
* :func:`wl_kernel`, :func:`cluster_graphs`: WL subtree kernel and affinity propagation;
* :func:`perturbation_steps`, :func:`collapse_sets`, :func:`dropping_sets`: the perturbations;
* :func:`graph_measures`, :func:`spearman_per_setting`: the measures and their rank correlation.

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
import os
import pickle
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from .downloads import download

log = logging.getLogger(__name__)

__all__ = [
    "SYNTHETIC_DATASETS",
    "OFFLINE_DATASETS",
    "DOWNLOADED_DATASETS",
    "DATASETS",
    "EXPERIMENTS",
    "MEASURES",
    "FLIPPED_MEASURES",
    "DD_URL",
    "CITESEER_GRAPH_URL",
    "CITESEER_GRAPH_SHA256",
    "lobster_graphs",
    "grid_graphs",
    "community_graphs",
    "read_tu_graphs",
    "grakel_tu_folder",
    "citeseer_ego_graphs",
    "fetch_dd",
    "fetch_citeseer_graph",
    "load_dataset",
    "evaluate_architecture",
    "reference_t_cut",
    "graphs_to_arrays",
    "graphs_from_arrays",
    "split_halves",
    "wl_kernel",
    "cluster_graphs",
    "perturbation_steps",
    "collapse_sets",
    "dropping_sets",
    "draw_architectures",
    "gin_embeddings",
    "graph_measures",
    "spearman_per_setting",
]

SYNTHETIC_DATASETS = ("lobster", "grid", "community")
OFFLINE_DATASETS = SYNTHETIC_DATASETS + ("mutag", "cuneiform")
DOWNLOADED_DATASETS = ("proteins", "ego")
DATASETS = OFFLINE_DATASETS + DOWNLOADED_DATASETS
EXPERIMENTS = ("collapse", "dropping")
MEASURES = ("magdiff", "precision", "recall", "density", "coverage", "mmd_rbf", "mmd_linear")
# Measures that *fall* as diversity is lost: flipped as max - x before the rank correlation.
FLIPPED_MEASURES = ("precision", "recall", "density", "coverage")

DD_URL = "https://www.chrsmrrs.com/graphkerneldatasets/DD.zip"
# torch_geometric's Planetoid URL (kimiyoung/planetoid). Only the adjacency pickle is needed.
CITESEER_GRAPH_URL = "https://github.com/kimiyoung/planetoid/raw/master/data/ind.citeseer.graph"
# SHA-256 of ind.citeseer.graph as recorded by two independent public projects.
CITESEER_GRAPH_SHA256 = "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7"


# ----------------------------------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------------------------------

def _clean(g: nx.Graph) -> nx.Graph:
    """Simple undirected graph on nodes 0..n-1 (self-loops removed, labels in sorted order)."""
    g = nx.Graph(g)
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    return nx.convert_node_labels_to_integers(g, ordering="sorted")


# networkx 3.5 renamed random_lobster (same generator) to random_lobster_graph.
_random_lobster = getattr(nx, "random_lobster_graph", None) or nx.random_lobster


def lobster_graphs(
    n_graphs: int = 100,
    *,
    mean_nodes: int = 80,
    p1: float = 0.7,
    p2: float = 0.7,
    min_nodes: int = 10,
    max_nodes: int = 100,
    seed: int = 1234,
) -> list[nx.Graph]:
    """Random lobsters as in GRAN / GGM-metrics: ``nx.random_lobster(mean_nodes, p1, p2)``.

    Graph ``i`` is drawn with networkx seed ``seed + j`` for consecutive ``j``, keeping the first
    ``n_graphs`` whose node count lies in ``[min_nodes, max_nodes]`` (GGM-metrics' scheme).

    Returns
    -------
    graphs : list of ``n_graphs`` networkx graphs on nodes 0..n-1
    """
    if n_graphs < 1:
        raise ValueError(f"n_graphs must be >= 1; got {n_graphs}.")
    if min_nodes > max_nodes:
        raise ValueError(f"min_nodes ({min_nodes}) exceeds max_nodes ({max_nodes}).")
    graphs, s = [], int(seed)
    tries = 0
    while len(graphs) < n_graphs:
        g = _random_lobster(mean_nodes, p1, p2, seed=s)
        if min_nodes <= g.number_of_nodes() <= max_nodes:
            graphs.append(_clean(g))
        s += 1
        tries += 1
        if tries > 1000 * n_graphs:
            raise ValueError("lobster parameters rarely give graphs in [min_nodes, max_nodes].")
    return graphs


def grid_graphs(lower: int = 10, upper: int = 19) -> list[nx.Graph]:
    """2-D grids ``nx.grid_2d_graph(i, j)`` for ``i, j`` in ``lower..upper`` (inclusive).

    The default 10..19 gives the 100 grids of GRAN / GGM-metrics. Deterministic.
    """
    if lower < 1 or upper < lower:
        raise ValueError(f"need 1 <= lower <= upper; got lower={lower}, upper={upper}.")
    return [_clean(nx.grid_2d_graph(i, j))
            for i in range(lower, upper + 1) for j in range(lower, upper + 1)]


def community_graphs(
    n_graphs: int = 500,
    *,
    min_size: int = 30,
    max_size: int = 79,
    p_intra: float = 0.3,
    p_inter: float = 0.05,
    seed: int = 0,
) -> list[nx.Graph]:
    """Two-community graphs as in GGM-metrics' ``make_community_graphs``, seeded.

    Each graph: a community size ``c`` uniform in ``min_size..max_size``; two independent
    G(c, p_intra) graphs; ``int(2c · p_inter)`` inter-community edges between uniformly drawn
    endpoints (repeated pairs collapse, as in the original).

    Returns
    -------
    graphs : list of ``n_graphs`` networkx graphs on 2c nodes each
    """
    if n_graphs < 1:
        raise ValueError(f"n_graphs must be >= 1; got {n_graphs}.")
    if not 1 <= min_size <= max_size:
        raise ValueError(f"need 1 <= min_size <= max_size; got {min_size}, {max_size}.")
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(n_graphs):
        c = int(rng.integers(min_size, max_size + 1))
        parts = [nx.fast_gnp_random_graph(c, p_intra, seed=int(rng.integers(2**31 - 1)))
                 for _ in range(2)]
        g = nx.disjoint_union_all(parts)
        n_inter = int(2 * c * p_inter)
        a = rng.integers(0, c, size=n_inter)
        b = rng.integers(c, 2 * c, size=n_inter)
        g.add_edges_from(zip(a.tolist(), b.tolist(), strict=True))
        graphs.append(_clean(g))
    return graphs


def read_tu_graphs(
    folder,
    name: str,
    *,
    min_nodes: int | None = None,
    max_nodes: int | None = None,
    drop_isolates: bool = False,
) -> list[nx.Graph]:
    """Read a TU Dortmund text-format dataset (``<name>_A.txt``, ``<name>_graph_indicator.txt``).

    Only the structure is read (labels and attributes are not needed: the GIN sees degrees).
    Self-loops are removed; with ``drop_isolates`` isolated nodes are removed too (GRAN and
    GGM-metrics do so for DD). Graphs are kept if their node count lies in [min_nodes, max_nodes].

    Returns
    -------
    graphs : list of networkx graphs on nodes 0..n-1, in the file's graph order
    """
    folder = Path(folder)
    a_file = folder / f"{name}_A.txt"
    ind_file = folder / f"{name}_graph_indicator.txt"
    for f in (a_file, ind_file):
        if not f.is_file():
            raise ValueError(f"TU dataset file missing: {f}")
    indicator = np.loadtxt(ind_file, dtype=np.int64, ndmin=1)
    edges = np.loadtxt(a_file, delimiter=",", dtype=np.int64, ndmin=2)
    n_nodes = indicator.shape[0]
    if edges.size and (edges.min() < 1 or edges.max() > n_nodes):
        raise ValueError(f"{a_file.name} refers to nodes outside 1..{n_nodes}.")
    graph_ids = np.unique(indicator)
    # Node ids are 1-based and contiguous per graph in the TU format.
    graphs = []
    edge_graph = indicator[edges[:, 0] - 1] if edges.size else np.empty(0, dtype=np.int64)
    order = np.argsort(edge_graph, kind="stable")
    edges, edge_graph = edges[order], edge_graph[order]
    bounds = np.searchsorted(edge_graph, graph_ids, side="left")
    ends = np.searchsorted(edge_graph, graph_ids, side="right")
    for gid, lo, hi in zip(graph_ids, bounds, ends, strict=True):
        nodes = np.flatnonzero(indicator == gid) + 1
        g = nx.Graph()
        g.add_nodes_from(nodes.tolist())
        g.add_edges_from(edges[lo:hi].tolist())
        g.remove_edges_from(list(nx.selfloop_edges(g)))
        if drop_isolates:
            g.remove_nodes_from(list(nx.isolates(g)))
        n = g.number_of_nodes()
        if (min_nodes is not None and n < min_nodes) or (max_nodes is not None and n > max_nodes):
            continue
        graphs.append(_clean(g))
    return graphs


def grakel_tu_folder(name: str) -> Path:
    """The folder of a TU dataset that ships with ``grakel`` (``MUTAG``, ``Cuneiform``)."""
    import grakel

    folder = Path(grakel.__file__).resolve().parent / "tests" / "data" / name
    if not (folder / f"{name}_A.txt").is_file():
        raise ValueError(f"grakel {grakel.__version__} does not ship the TU dataset {name!r} "
                         f"(looked in {folder}).")
    return folder


class _AdjacencyUnpickler(pickle.Unpickler):
    """Unpickler that only builds dicts/lists/ints (the Planetoid ``ind.*.graph`` file)."""

    # Python 2 pickles (the Planetoid files) name builtins ``__builtin__``; find_class sees the
    # name before fix_imports maps it.
    _ALLOWED = {("collections", "defaultdict")} | {
        (module, name) for module in ("builtins", "__builtin__")
        for name in ("dict", "list", "int", "set")
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a graph pickle")


def citeseer_ego_graphs(
    graph_file,
    *,
    radius: int = 3,
    min_nodes: int = 50,
    max_nodes: int = 400,
) -> list[nx.Graph]:
    """Ego networks of the Citeseer citation graph (GraphRNN / GGM-metrics "Ego").

    The largest connected component of Citeseer (from Planetoid's ``ind.citeseer.graph``, an
    adjacency dict) is relabelled 0..n-1; every node's radius-``radius`` ego graph with a node count
    in [min_nodes, max_nodes] is kept, in node order.
    """
    with open(graph_file, "rb") as f:
        adjacency = _AdjacencyUnpickler(f, encoding="latin1").load()
    if not isinstance(adjacency, dict):
        raise ValueError(f"{graph_file} does not hold an adjacency dict.")
    G = nx.from_dict_of_lists(adjacency)
    G.remove_edges_from(list(nx.selfloop_edges(G)))
    G = G.subgraph(max(nx.connected_components(G), key=len))
    G = nx.convert_node_labels_to_integers(G, ordering="sorted")
    graphs = []
    for i in range(G.number_of_nodes()):
        ego = nx.ego_graph(G, i, radius=radius)
        if min_nodes <= ego.number_of_nodes() <= max_nodes:
            graphs.append(_clean(ego))
    return graphs


# ----------------------------------------------------------------------------------------------
# Downloads
# ----------------------------------------------------------------------------------------------

def fetch_dd(folder, *, url: str = DD_URL, sha256: str | None = None) -> Path:
    """Download TU DD (``DD.zip``) into ``folder`` and unpack its adjacency and indicator files.

    Returns the folder that holds ``DD_A.txt`` and ``DD_graph_indicator.txt``.
    """
    folder = Path(folder)
    out = folder / "DD"
    wanted = ("DD_A.txt", "DD_graph_indicator.txt")
    if all((out / w).is_file() for w in wanted):
        return out
    archive = folder / "DD.zip"
    download(url, archive, checksum=sha256)
    with zipfile.ZipFile(archive) as zf:
        members = {Path(m).name: m for m in zf.namelist()}
        missing = [w for w in wanted if w not in members]
        if missing:
            raise ValueError(f"{archive} lacks {missing}; is it the TU DD archive?")
        out.mkdir(parents=True, exist_ok=True)
        for w in wanted:  # extract by base name only: no path from the archive is trusted
            data = zf.read(members[w])
            tmp = out / f".{w}.part"
            tmp.write_bytes(data)
            os.replace(tmp, out / w)
    return out


def fetch_citeseer_graph(folder, *, url: str = CITESEER_GRAPH_URL,
                         sha256: str | None = CITESEER_GRAPH_SHA256) -> Path:
    """Download Planetoid's ``ind.citeseer.graph`` into ``folder``; returns its path."""
    dest = Path(folder) / "ind.citeseer.graph"
    download(url, dest, checksum=sha256)
    return dest


def load_dataset(name: str, options: dict | None = None, *, seed: int = 0,
                 resources_dir=None) -> list[nx.Graph]:
    """Graphs of one dataset of the experiment.

    Parameters
    ----------
    name : one of :data:`DATASETS`
    options : keyword arguments of the dataset's generator or reader (the config's section for the
        dataset); ``url`` and ``sha256`` are used by the downloads
    seed : seed of the random generators (lobster, community)
    resources_dir : folder for downloaded data (proteins, ego); missing files are downloaded
    """
    opts = dict(options or {})
    if name not in DATASETS:
        raise ValueError(f"unknown graph dataset {name!r}; choose one of {', '.join(DATASETS)}.")
    if name == "lobster":
        return lobster_graphs(seed=seed, **opts)
    if name == "grid":
        return grid_graphs(**opts)
    if name == "community":
        return community_graphs(seed=seed, **opts)
    if name == "mutag":
        return read_tu_graphs(grakel_tu_folder("MUTAG"), "MUTAG", **opts)
    if name == "cuneiform":
        return read_tu_graphs(grakel_tu_folder("Cuneiform"), "Cuneiform", **opts)
    if resources_dir is None:
        raise ValueError(f"dataset {name!r} is downloaded: pass resources_dir.")
    url, sha256 = opts.pop("url", None), opts.pop("sha256", None)
    if name == "proteins":
        folder = fetch_dd(Path(resources_dir), url=url or DD_URL, sha256=sha256)
        return read_tu_graphs(folder, "DD", drop_isolates=True, **opts)
    graph_file = fetch_citeseer_graph(Path(resources_dir), url=url or CITESEER_GRAPH_URL,
                                      sha256=sha256)
    return citeseer_ego_graphs(graph_file, **opts)


# ----------------------------------------------------------------------------------------------
# Graph storage (an .npz of edge lists; no pickles)
# ----------------------------------------------------------------------------------------------

def graphs_to_arrays(graphs: Sequence[nx.Graph]) -> dict[str, np.ndarray]:
    """Pack graphs on nodes 0..n-1 into arrays.

    Returns ``{"n_nodes": (G,), "edge_ptr": (G+1,), "edges": (E, 2)}`` (int64).
    """
    n_nodes = np.array([g.number_of_nodes() for g in graphs], dtype=np.int64)
    edge_lists = [np.asarray(list(g.edges()), dtype=np.int64).reshape(-1, 2) for g in graphs]
    ptr = np.concatenate([[0], np.cumsum([len(e) for e in edge_lists])]).astype(np.int64)
    edges = np.concatenate(edge_lists) if edge_lists else np.empty((0, 2), dtype=np.int64)
    return {"n_nodes": n_nodes, "edge_ptr": ptr, "edges": edges}


def graphs_from_arrays(n_nodes, edge_ptr, edges) -> list[nx.Graph]:
    """Inverse of :func:`graphs_to_arrays`."""
    graphs = []
    for i, n in enumerate(n_nodes):
        g = nx.Graph()
        g.add_nodes_from(range(int(n)))
        g.add_edges_from(edges[edge_ptr[i]:edge_ptr[i + 1]].tolist())
        graphs.append(g)
    return graphs


# ----------------------------------------------------------------------------------------------
# Protocol: split, clusters, perturbations
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


# ----------------------------------------------------------------------------------------------
# GIN embeddings
# ----------------------------------------------------------------------------------------------

def draw_architectures(
    n_architectures: int,
    layers: Sequence[int],
    hidden: Sequence[int],
    seed: int,
) -> list[dict]:
    """Draw distinct (layers, hidden) pairs from ``layers × hidden``, each with its own init seed.

    If more architectures are asked for than there are pairs, pairs repeat with new seeds.

    Returns
    -------
    list of dicts ``{"setting", "layers", "hidden", "init_seed"}`` (``setting`` e.g. "L3-H35-s0")
    """
    if n_architectures < 1:
        raise ValueError(f"n_architectures must be >= 1; got {n_architectures}.")
    if not layers or not hidden or min(layers) < 2 or min(hidden) < 1:
        raise ValueError("layers must be >= 2 (one GIN layer at least) and hidden >= 1.")
    rng = np.random.default_rng(seed)
    combos = [(int(l), int(h)) for l in layers for h in hidden]
    picks = []
    while len(picks) < n_architectures:
        take = min(len(combos), n_architectures - len(picks))
        picks.extend(combos[i] for i in rng.permutation(len(combos))[:take])
    seeds = rng.integers(0, 2**31 - 1, size=n_architectures)
    return [{"setting": f"L{l}-H{h}-s{i}", "layers": l, "hidden": h, "init_seed": int(s)}
            for i, ((l, h), s) in enumerate(zip(picks, seeds, strict=True))]


def gin_embeddings(
    graphs: Sequence[nx.Graph],
    *,
    layers: int = 3,
    hidden: int = 35,
    seed: int = 0,
    mlp_layers: int = 2,
) -> np.ndarray:
    """Graph embeddings of a randomly initialised GIN (torch-geometric), as in GGM-metrics.

    Architecture (GGM-metrics' ``GIN`` with ``num_layers=layers``): ``layers - 1`` GIN convolutions
    with sum aggregation and ε = 0, each an MLP of ``mlp_layers`` linear layers (BatchNorm + ReLU
    between them) followed by BatchNorm + ReLU, then another BatchNorm + ReLU. Linear weights get
    orthogonal initialisation, biases PyTorch's default; BatchNorm runs in eval mode with fresh
    statistics (the network is never trained). Node feature: the degree (see the module docstring).
    Graph embedding: the sum-pools of every convolution's output, concatenated. Computed in float64
    and rounded to 10 significant digits of each embedding dimension's scale (see below).

    Returns
    -------
    E : float64 array of shape (n_graphs, (layers - 1) * hidden)
    """
    import torch
    from torch import nn
    from torch_geometric.nn import GINConv, global_add_pool

    if layers < 2:
        raise ValueError(f"layers must be >= 2 (one GIN convolution at least); got {layers}.")
    if hidden < 1 or mlp_layers < 1:
        raise ValueError(f"hidden and mlp_layers must be >= 1; got {hidden}, {mlp_layers}.")
    if len(graphs) == 0:
        raise ValueError("no graphs to embed.")

    def mlp(d_in):
        mods, d = [], d_in
        for _ in range(mlp_layers - 1):
            mods += [nn.Linear(d, hidden), nn.BatchNorm1d(hidden), nn.ReLU()]
            d = hidden
        mods += [nn.Linear(d, hidden), nn.BatchNorm1d(hidden), nn.ReLU()]  # + ApplyNodeFunc
        return nn.Sequential(*mods)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        convs = nn.ModuleList()
        norms = nn.ModuleList()
        for i in range(layers - 1):
            net = mlp(1 if i == 0 else hidden)
            for mod in net:
                if isinstance(mod, nn.Linear):
                    nn.init.orthogonal_(mod.weight)
            convs.append(GINConv(net, eps=0.0, train_eps=False))
            norms.append(nn.BatchNorm1d(hidden))
    convs.double().eval()
    norms.double().eval()

    sizes = np.array([g.number_of_nodes() for g in graphs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    src, dst, deg = [], [], []
    for g, off in zip(graphs, offsets, strict=True):
        e = np.asarray(list(g.edges()), dtype=np.int64).reshape(-1, 2) + off
        src += [e[:, 0], e[:, 1]]
        dst += [e[:, 1], e[:, 0]]
        d = np.zeros(g.number_of_nodes())
        for node, k in g.degree():
            d[node] = k
        deg.append(d)
    edge_index = torch.from_numpy(np.stack([np.concatenate(src), np.concatenate(dst)]))
    x = torch.from_numpy(np.concatenate(deg)).unsqueeze(1)
    batch = torch.from_numpy(np.repeat(np.arange(len(graphs)), sizes))
    pooled = []
    with torch.no_grad():
        h = x
        for conv, bn in zip(convs, norms, strict=True):
            h = torch.relu(bn(conv(h, edge_index)))
            pooled.append(global_add_pool(h, batch, size=len(graphs)))
    E = torch.cat(pooled, dim=1).numpy()
    # Graphs the network cannot tell apart (WL-equivalent ones) get equal embeddings up to the
    # rounding of sums taken in different node orders (~1e-16 relative in float64, ~1e-7 in
    # float32, which GGM-metrics uses). Rounding to 10 significant digits of each column's scale
    # makes them exact duplicates, which magnitude then merges (twin property), instead of
    # near-duplicates that push the convergence scale towards infinity.
    scale = np.abs(E).max(axis=0, keepdims=True)
    scale[scale == 0] = 1.0
    return np.round(E / scale, 10) * scale


# ----------------------------------------------------------------------------------------------
# Measures
# ----------------------------------------------------------------------------------------------

def graph_measures(
    reference: np.ndarray,
    generated: np.ndarray,
    *,
    t_cut: float,
    reference_area: float,
    nearest_k: int = 5,
    magnitude: dict | None = None,
) -> dict[str, float]:
    """All measures of one perturbed set against the reference.

    ``magdiff`` is the *loss* of diversity relative to the reference,
    ``-(MagArea_gen - MagArea_ref) / MagArea_ref`` on [0, t_cut] with Euclidean distances (signed:
    0 for an equally diverse set, positive when diversity is lost), so that, like MMD, it rises with
    the perturbation. Precision, recall, density and coverage (k = ``nearest_k``) are returned as
    they are (they fall with the perturbation; :func:`spearman_per_setting` flips them).

    Parameters
    ----------
    reference : array (n_ref, d); generated : array (n_gen, d), both already standardised
    t_cut, reference_area : the reference's convergence scale and its MagArea on [0, t_cut]
    magnitude : keyword arguments of :func:`diversity_core.mag_area` (``method``, ``rtol``,
        ``n_ts``); the package defaults if None
    """
    from diversity_core import mag_area, mmd_linear, mmd_rbf, pairwise_distances, prdc

    area = mag_area(pairwise_distances(generated), t_cut, **(magnitude or {}))
    out = {"magdiff": float((reference_area - area) / reference_area)}
    out.update({k: float(v) for k, v in prdc(reference, generated, nearest_k).items()
                if k in ("precision", "recall", "density", "coverage")})
    out["mmd_rbf"] = float(mmd_rbf(generated, reference))
    out["mmd_linear"] = float(mmd_linear(generated, reference))
    return out


def reference_t_cut(reference: np.ndarray, target: float = 0.95) -> float:
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
    from diversity_core import pairwise_distances, reference_based_t_cut

    return reference_based_t_cut(pairwise_distances(reference), target)


def evaluate_architecture(
    graphs: Sequence[nx.Graph],
    reference_idx: np.ndarray,
    perturbed_idx: np.ndarray,
    sweeps: dict,
    architecture: dict,
    *,
    mlp_layers: int = 2,
    nearest_k: int = 5,
    target: float = 0.95,
    magnitude: dict | None = None,
) -> list[dict]:
    """Every measure at every step of every sweep, for one GIN architecture.

    All graphs are embedded once; the embeddings are standardised with a scaler fit on the reference
    half (as GGM-metrics does). MagDiff integrates up to the reference's convergence scale
    (:func:`reference_t_cut` with ``target``) and is relative to the reference's MagArea (see
    :func:`graph_measures`; ``magnitude`` holds the keyword arguments of ``mag_area``).

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

    E = gin_embeddings(graphs, layers=architecture["layers"], hidden=architecture["hidden"],
                       seed=architecture["init_seed"], mlp_layers=mlp_layers)
    scaler = StandardScaler().fit(E[reference_idx])
    R = scaler.transform(E[reference_idx])
    P = scaler.transform(E[perturbed_idx])
    # One prepared space: the area's grid reuses Mag(t_cut) from the convergence-scale search.
    reference_space = MagnitudeSpace(pairwise_distances(R))
    t_cut = reference_space.convergence_scale(target)
    ref_area = reference_space.mag_area(t_cut, **(magnitude or {}))
    base = {k: architecture[k] for k in ("setting", "layers", "hidden", "init_seed")}
    rows = []
    for experiment, (ps, index_sets) in sweeps.items():
        for step, (p, idx) in enumerate(zip(ps, index_sets, strict=True)):
            values = graph_measures(R, P[idx], t_cut=t_cut, reference_area=ref_area,
                                    nearest_k=nearest_k, magnitude=magnitude)
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
