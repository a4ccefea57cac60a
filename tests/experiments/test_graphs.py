"""The graph mode-collapse / mode-dropping experiment: its protocol
(diversity_core.experiments.graph_mode_collapse) and datasets (diversity_core.data.graphs)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import yaml

from diversity_core import convergence_scale, mag_area, pairwise_distances
from diversity_core.data import graphs as data_graphs
from diversity_core.embed import gin
from diversity_core.experiments import graph_mode_collapse as protocol

pytest.importorskip("torch_geometric")
pytest.importorskip("grakel")

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# datasets
# --------------------------------------------------------------------------------------------

def _edge_sets(graphs):
    return [sorted(map(tuple, map(sorted, g.edges()))) for g in graphs]


def test_grid_graphs_are_the_100_grids():
    graphs = data_graphs.grid_graphs()
    assert len(graphs) == 100
    sizes = sorted(g.number_of_nodes() for g in graphs)
    assert sizes == sorted(i * j for i in range(10, 20) for j in range(10, 20))
    g = graphs[0]  # 10 x 10 grid
    assert g.number_of_edges() == 2 * 10 * 9
    assert set(g.nodes()) == set(range(100))


def test_lobster_graphs_seeded_trees_within_bounds():
    a = data_graphs.lobster_graphs(20, seed=7)
    b = data_graphs.lobster_graphs(20, seed=7)
    c = data_graphs.lobster_graphs(20, seed=1007)  # consecutive seeds overlap (GGM-metrics' scheme)
    assert _edge_sets(a) == _edge_sets(b)
    assert _edge_sets(a) != _edge_sets(c)
    for g in a:
        assert 10 <= g.number_of_nodes() <= 100
        assert nx.is_tree(g)


def test_community_graphs_two_dense_communities():
    graphs = data_graphs.community_graphs(30, seed=3)
    assert _edge_sets(graphs) == _edge_sets(data_graphs.community_graphs(30, seed=3))
    for g in graphs:
        n = g.number_of_nodes()
        assert n % 2 == 0 and 60 <= n <= 158
        c = n // 2
        inter = sum(1 for u, v in g.edges() if (u < c) != (v < c))
        assert 1 <= inter <= int(2 * c * 0.05)
        intra_density = (g.number_of_edges() - inter) / (2 * c * (c - 1) / 2)
        assert 0.2 < intra_density < 0.4


def test_mutag_from_grakel_matches_tu_statistics():
    graphs = data_graphs.load_dataset("mutag")
    assert len(graphs) == 188
    assert sum(g.number_of_nodes() for g in graphs) == 3371  # TU MUTAG: 17.93 nodes on average
    assert sum(g.number_of_edges() for g in graphs) == 3721  # 19.79 edges on average
    assert len(data_graphs.load_dataset("cuneiform")) == 267


def _write_tu(folder: Path, name: str, graphs_edges, n_nodes):
    """Write graphs in the TU format (1-based node ids, both edge directions)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines, indicator, offset = [], [], 0
    for gid, (edges, n) in enumerate(zip(graphs_edges, n_nodes, strict=True), start=1):
        for u, v in edges:
            lines += [f"{u + offset + 1}, {v + offset + 1}", f"{v + offset + 1}, {u + offset + 1}"]
        indicator += [str(gid)] * n
        offset += n
    (folder / f"{name}_A.txt").write_text("\n".join(lines) + "\n")
    (folder / f"{name}_graph_indicator.txt").write_text("\n".join(indicator) + "\n")


def test_read_tu_graphs_filters_self_loops_isolates_and_sizes(tmp_path):
    edges = [[(0, 1), (1, 2), (2, 2)], [(0, 1)], [(0, 1), (1, 2), (2, 3), (3, 0)]]
    _write_tu(tmp_path, "TOY", edges, [4, 2, 4])  # graph 1 has an isolated node 3
    graphs = data_graphs.read_tu_graphs(tmp_path, "TOY")
    assert [g.number_of_nodes() for g in graphs] == [4, 2, 4]
    assert graphs[0].number_of_edges() == 2  # the self-loop is gone
    dropped = data_graphs.read_tu_graphs(tmp_path, "TOY", drop_isolates=True, min_nodes=3)
    assert [g.number_of_nodes() for g in dropped] == [3, 4]
    assert nx.is_isomorphic(dropped[1], nx.cycle_graph(4))
    with pytest.raises(ValueError, match="missing"):
        data_graphs.read_tu_graphs(tmp_path, "NOPE")


def test_citeseer_ego_graphs_and_safe_unpickling(tmp_path):
    # A path 0-1-...-59 plus a separate edge: the largest component is the path.
    adjacency = defaultdict(list)
    for i in range(59):
        adjacency[i].append(i + 1)
        adjacency[i + 1].append(i)
    adjacency[100].append(101)
    path = tmp_path / "ind.toy.graph"
    path.write_bytes(pickle.dumps(adjacency, protocol=2))
    graphs = data_graphs.citeseer_ego_graphs(path, radius=3, min_nodes=7, max_nodes=7)
    assert len(graphs) == 60 - 6  # every node at distance >= 3 from both ends
    assert all(nx.is_isomorphic(g, nx.path_graph(7)) for g in graphs)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    bad = tmp_path / "ind.evil.graph"
    bad.write_bytes(pickle.dumps({0: [Evil()]}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        data_graphs.citeseer_ego_graphs(bad)


def test_a_graph_pickle_asking_for_more_than_its_size_is_refused_before_any_graph(tmp_path,
                                                                                 monkeypatch):
    """A 23 kB pickle of ``{i: the same 3,000-item list}`` (9 million edges by reference) is
    refused from the entries it asks for, before a graph is built."""
    shared = list(range(3000))
    bad = tmp_path / "ind.citeseer.graph"
    bad.write_bytes(pickle.dumps({i: shared for i in range(3000)}, protocol=2))
    assert bad.stat().st_size < 30_000
    built = []
    monkeypatch.setattr(data_graphs.nx, "from_dict_of_lists",
                        lambda *a, **k: built.append(1) or nx.Graph())
    with pytest.raises(ValueError, match=r"ind\.citeseer\.graph asks for more than .* entries"):
        data_graphs.citeseer_ego_graphs(bad)
    assert not built
    for wrong in ({0: 1}, {0: ["a"]}, {"a": [1]}, [1, 2]):
        bad.write_bytes(pickle.dumps(wrong, protocol=2))
        with pytest.raises(ValueError, match="ind.citeseer.graph"):
            data_graphs.citeseer_ego_graphs(bad)


def test_ego_graphs_of_a_dense_graph_are_counted_before_they_are_built(tmp_path, monkeypatch):
    """A complete graph within the size bound: every ball is the whole graph, larger than
    max_nodes; none is built (the ball is counted, stopping past max_nodes)."""
    clique = {i: [j for j in range(60) if j != i] for i in range(60)}
    path = tmp_path / "ind.clique.graph"
    path.write_bytes(pickle.dumps(clique, protocol=2))
    built, ego_graph = [], nx.ego_graph
    monkeypatch.setattr(data_graphs.nx, "ego_graph",
                        lambda *a, **k: built.append(1) or ego_graph(*a, **k))
    assert data_graphs.citeseer_ego_graphs(path, min_nodes=10, max_nodes=50) == []
    assert not built
    kept = data_graphs.citeseer_ego_graphs(path, min_nodes=60, max_nodes=60)
    assert len(kept) == len(built) == 60
    assert all(g.number_of_edges() == 60 * 59 // 2 for g in kept)


def test_graph_arrays_round_trip():
    graphs = data_graphs.lobster_graphs(5, seed=1) + [nx.empty_graph(3)]
    back = data_graphs.graphs_from_arrays(**data_graphs.graphs_to_arrays(graphs))
    assert [g.number_of_nodes() for g in back] == [g.number_of_nodes() for g in graphs]
    assert _edge_sets(back) == _edge_sets(graphs)


def _smiles_folder(folder: Path, smiles: list[str], header: str = "SMILES") -> Path:
    """A gzipped SMILES file with the .pins.json a fetch would write (pinned to its digest)."""
    from diversity_core.assets import write_manifest

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "test.csv.gz"
    path.write_bytes(gzip.compress(("\n".join([header, *smiles]) + "\n").encode()))
    write_manifest(folder, asset="zinc", config_key="graphs.zinc", source="test",
                   pinned={path.name: hashlib.sha256(path.read_bytes()).hexdigest()})
    return path


def test_read_smiles_graphs_builds_heavy_atom_graphs_and_checks_the_manifest(tmp_path):
    pytest.importorskip("rdkit")
    smiles = ["c1ccccc1", "CCO", "CC(=O)Nc1ccc(O)cc1", "C1CC1C(N)=O"]
    path = _smiles_folder(tmp_path / "zinc", smiles)
    graphs = data_graphs.read_smiles_graphs(path, n_graphs=4, seed=0)
    assert nx.is_isomorphic(graphs[0], nx.cycle_graph(6))  # benzene: hydrogens implicit
    assert nx.is_isomorphic(graphs[1], nx.path_graph(3))   # ethanol
    assert [g.number_of_nodes() for g in graphs] == [6, 3, 11, 6]
    drawn = data_graphs.read_smiles_graphs(path, n_graphs=2, seed=1)
    assert _edge_sets(drawn) == _edge_sets(data_graphs.read_smiles_graphs(path, n_graphs=2,
                                                                          seed=1))
    with pytest.raises(ValueError, match="holds 4 molecules"):
        data_graphs.read_smiles_graphs(path, n_graphs=5, seed=0)
    # A file changed after its fetch is refused before it is read.
    path.write_bytes(gzip.compress(b"SMILES\nCCCC\n"))
    with pytest.raises(ValueError, match="changed since it was fetched"):
        data_graphs.read_smiles_graphs(path, n_graphs=1, seed=0)
    (tmp_path / "zinc" / ".pins.json").unlink()
    with pytest.raises(ValueError, match="nothing vouches"):
        data_graphs.read_smiles_graphs(path, n_graphs=1, seed=0)
    bad = _smiles_folder(tmp_path / "bad", ["CCO"], header="smiles,logP")
    with pytest.raises(ValueError, match="header 'SMILES'"):
        data_graphs.read_smiles_graphs(bad, n_graphs=1, seed=0)
    broken = _smiles_folder(tmp_path / "broken", ["CCO", "C1CC(", "CC"])
    with pytest.raises(ValueError, match=r"line 3: 'C1CC\(' is not a SMILES"):
        data_graphs.read_smiles_graphs(broken, n_graphs=3, seed=0)


def test_fetch_moses_smiles_refuses_a_file_that_does_not_match_its_pin(tmp_path):
    folder = tmp_path / "zinc"
    folder.mkdir()
    placed = folder / "test.csv.gz"
    placed.write_bytes(gzip.compress(b"SMILES\nCCO\n"))  # placed by hand: checked, no download
    pins = yaml.safe_load((REPO / "config.yaml").read_text())["graphs"]["zinc"]
    fetch = {k: pins[k] for k in ("requirement", "wheel_sha256", "member", "sha256")}
    with pytest.raises(ValueError, match="checksum mismatch"):
        data_graphs.fetch_moses_smiles(folder, **fetch)
    assert not (folder / ".pins.json").exists()
    # Pinned to what lies there, it is accepted and recorded in the folder's manifest.
    digest = hashlib.sha256(placed.read_bytes()).hexdigest()
    assert data_graphs.fetch_moses_smiles(folder, **{**fetch, "sha256": digest}) == placed
    manifest = json.loads((folder / ".pins.json").read_text())
    assert manifest["files"]["test.csv.gz"] == {"sha256": digest, "pinned": True}
    assert manifest["source"] == "wheel:molsets==0.3.1 (moses/dataset/data/test.csv.gz)"
    with pytest.raises(ValueError, match="need requirement"):
        data_graphs.fetch_graph_asset("zinc", tmp_path, {"n_graphs": 3})
    with pytest.raises(ValueError, match="not fetched"):
        data_graphs.fetch_graph_asset("mutag", tmp_path, {})



def test_strict_mode_names_an_unpinned_zinc_wheel():
    from diversity_core.experiments.unpinned import unpinned_assets

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert unpinned_assets(config) == []  # the default configuration is pinned
    config["graphs"]["zinc"]["wheel_sha256"] = None
    assert unpinned_assets(config) == [("the ZINC molecules of MOSES", "graphs.zinc",
                                        "the wheel of molsets==0.3.1 has no pinned sha256")]
    config["graphs"]["datasets"] = ["lobster"]  # not selected: not asked for
    assert unpinned_assets(config) == []

# --------------------------------------------------------------------------------------------
# downloads (against a local HTTP server)
# --------------------------------------------------------------------------------------------

def test_fetch_dd_and_load_proteins_from_local_server(http_root, tmp_path):
    root, url = http_root
    staging = tmp_path / "staging"
    sizes = [120, 99, 130]  # the middle graph is below Proteins' 100-node minimum
    edges = [[(i, i + 1) for i in range(n - 1)] for n in sizes]
    _write_tu(staging, "DD", edges, sizes)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in sorted(staging.iterdir()):
            zf.write(f, f"DD/{f.name}")
        zf.writestr("DD/README.txt", "toy")
    (root / "DD.zip").write_bytes(buffer.getvalue())
    sha = hashlib.sha256(buffer.getvalue()).hexdigest()
    res = tmp_path / "resources"
    graphs = data_graphs.load_dataset("proteins", {"url": f"{url}/DD.zip", "sha256": sha,
                                         "min_nodes": 100, "max_nodes": 500}, resources_dir=res)
    assert [g.number_of_nodes() for g in graphs] == [120, 130]
    assert (res / "DD" / "DD_A.txt").is_file()
    with pytest.raises(ValueError, match="checksum mismatch"):
        data_graphs.fetch_dd(tmp_path / "other", url=f"{url}/DD.zip", sha256="0" * 64)
    assert not (tmp_path / "other" / "DD.zip").exists()


def test_fetch_citeseer_graph_checks_the_published_checksum(http_root, tmp_path):
    root, url = http_root
    (root / "ind.citeseer.graph").write_bytes(pickle.dumps({0: [1], 1: [0]}, protocol=2))
    dest = tmp_path / "resources"
    published = yaml.safe_load((REPO / "config.yaml").read_text())["graphs"]["ego"]["sha256"]
    with pytest.raises(ValueError, match="checksum mismatch"):
        data_graphs.fetch_citeseer_graph(dest, url=f"{url}/ind.citeseer.graph", sha256=published)
    assert not any(dest.iterdir())


# --------------------------------------------------------------------------------------------
# clusters and perturbations
# --------------------------------------------------------------------------------------------

def test_wl_kernel_normalised_and_isomorphism_invariant():
    graphs = [nx.path_graph(5), nx.relabel_nodes(nx.path_graph(5), {i: 4 - i for i in range(5)}),
              nx.star_graph(4), nx.cycle_graph(6)]
    K = protocol.wl_kernel(graphs)
    np.testing.assert_allclose(np.diag(K), 1.0)
    np.testing.assert_allclose(K, K.T)
    assert K[0, 1] == pytest.approx(1.0)
    assert K[0, 2] < 1.0 and K[2, 3] < 1.0


def test_cluster_graphs_uses_the_kernel_as_affinity():
    # Two blocks of near-identical graphs: a precomputed affinity must find exactly the blocks.
    rng = np.random.default_rng(0)
    K = np.full((12, 12), 0.1)
    K[:6, :6] = K[6:, 6:] = 0.9
    K += 0.01 * rng.random((12, 12))
    K = 0.5 * (K + K.T)
    np.fill_diagonal(K, 1.0)
    labels, exemplars = protocol.cluster_graphs(K, seed=0)
    assert len(exemplars) == 2
    assert len(set(labels[:6])) == 1 and len(set(labels[6:])) == 1 and labels[0] != labels[6]
    np.testing.assert_array_equal(labels[exemplars], [0, 1])  # an exemplar is in its cluster


@pytest.mark.filterwarnings("ignore:All samples have mutually equal similarities")
def test_cluster_graphs_reports_failure():
    K = np.ones((5, 5))  # every graph identical: one cluster only
    with pytest.raises(RuntimeError, match="no usable clustering"):
        protocol.cluster_graphs(K, seed=0)


def test_perturbation_steps():
    ms, ps = protocol.perturbation_steps(5, 0.01, "collapse")
    np.testing.assert_array_equal(ms, np.arange(6))
    np.testing.assert_allclose(ps, np.arange(6) / 5)
    ms, ps = protocol.perturbation_steps(5, 0.01, "dropping")
    np.testing.assert_array_equal(ms, np.arange(5))  # one cluster must remain
    assert ps[-1] == 1.0
    ms, _ = protocol.perturbation_steps(10, 0.5, "collapse")
    np.testing.assert_array_equal(ms, [0, 5, 10])
    ms, _ = protocol.perturbation_steps(200, 0.01, "collapse")
    assert len(ms) == 101 and ms[-1] == 200
    with pytest.raises(ValueError, match="at least 2 clusters"):
        protocol.perturbation_steps(1, 0.1, "dropping")
    with pytest.raises(ValueError, match="experiment"):
        protocol.perturbation_steps(3, 0.1, "swap")


def test_collapse_reaches_every_cluster_including_the_last():
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 3])
    exemplars = np.array([1, 4, 5, 7])
    order = np.array([2, 0, 3, 1])
    ms = np.arange(5)
    sets = protocol.collapse_sets(labels, exemplars, order, ms)
    np.testing.assert_array_equal(sets[0], np.arange(8))
    np.testing.assert_array_equal(sets[1], [0, 1, 2, 3, 4, 5, 5, 7])
    # All clusters collapsed (GGM-metrics never collapses the last one): one graph per cluster.
    np.testing.assert_array_equal(sets[4], exemplars[labels])
    n_distinct = [len(np.unique(s)) for s in sets]
    assert n_distinct == sorted(n_distinct, reverse=True)


def test_dropping_removes_clusters_and_keeps_the_size():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 6, 60)
    labels[:6] = np.arange(6)  # every cluster present
    order = rng.permutation(6)
    ms = np.arange(6)
    sets = protocol.dropping_sets(labels, order, ms, seed=4)
    again = protocol.dropping_sets(labels, order, ms, seed=4)
    for a, b in zip(sets, again, strict=True):
        np.testing.assert_array_equal(a, b)
    for m, idx in zip(ms, sets, strict=True):
        assert idx.shape == labels.shape
        present = set(labels[idx])
        assert present.isdisjoint(order[:m])
        assert present == set(order[m:]) or m == 0
    survivors = labels == order[-1]
    np.testing.assert_array_equal(sets[-1][survivors], np.flatnonzero(survivors))
    assert set(labels[sets[-1]]) == {order[-1]}
    with pytest.raises(ValueError, match="one must remain"):
        protocol.dropping_sets(labels, order, [6], seed=0)


# The graded sweeps (default): one graph at a time, on the 1% grid of p.

def _toy_clusters():
    # 4 clusters of the perturbed half: sizes 3, 4, 1 (a singleton), 2; exemplars 0, 3, 7, 8.
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 3, 3])
    exemplars = np.array([0, 3, 7, 8])
    order = np.array([3, 1, 2, 0])  # the singleton third, cluster 0 last
    return labels, exemplars, order


def test_graded_collapse_moves_one_graph_at_a_time_onto_its_exemplar():
    labels, exemplars, order = _toy_clusters()
    identical = np.zeros(10, dtype=bool)
    identical[5] = True  # isomorphic to exemplar 3: already collapsed, never a step
    ps, sets = protocol.graded_collapse_sets(labels, exemplars, order, 0.01, seed=3,
                                             identical=identical)
    # Movable: 9 (cluster 3), 4, 6 (cluster 1; 5 is identical), 1, 2 (cluster 0): 5 graphs,
    # so 6 states (the 1% grid keeps every one); 3 active clusters (the singleton has nothing).
    assert len(sets) == 6
    np.testing.assert_array_equal(sets[0], np.arange(10))
    np.testing.assert_allclose(ps, [0, 1 / 3, 1 / 3 + 1 / 6, 2 / 3, 2 / 3 + 1 / 6, 1])
    assert np.all(np.diff(ps) > 0)
    moved_clusters = []
    for before, after in zip(sets[:-1], sets[1:], strict=True):
        changed = np.flatnonzero(before != after)
        assert len(changed) == 1  # exactly one graph per step ...
        g = changed[0]
        assert after[g] == exemplars[labels[g]]  # ... onto its own exemplar
        assert not identical[g] and g not in exemplars
        moved_clusters.append(labels[g])
    # Clusters in the seeded order, each finished before the next; the last one too.
    assert moved_clusters == [3, 1, 1, 0, 0]
    np.testing.assert_array_equal(sets[-1][labels != 1], exemplars[labels][labels != 1])
    assert sets[-1][5] == 5  # the identical graph stays itself
    # At a cluster boundary p = k / n_active and the set is whole-cluster collapse's.
    whole = protocol.collapse_sets(labels, exemplars, order, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(sets[1], whole[1])
    np.testing.assert_array_equal(sets[-1][labels != 1], whole[4][labels != 1])
    # Seeded: the order of the graphs within a cluster.
    again = protocol.graded_collapse_sets(labels, exemplars, order, 0.01, seed=3,
                                          identical=identical)
    for a, b in zip(sets, again[1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_graded_dropping_replaces_one_graph_at_a_time_and_keeps_the_last_cluster():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 40)
    labels[:5] = np.arange(5)
    order = rng.permutation(5)
    ps, sets = protocol.graded_dropping_sets(labels, order, 0.001, seed=4)
    assert ps[0] == 0 and ps[-1] == 1 and np.all(np.diff(ps) > 0)
    # Every graph of the four dropped clusters is replaced once, copies placed meanwhile too.
    assert len(sets) - 1 >= int((labels != order[-1]).sum())
    for before, after in zip(sets[:-1], sets[1:], strict=True):
        changed = np.flatnonzero(before != after)
        assert len(changed) == 1  # one graph per step, replaced by one of another cluster
        assert after.shape == labels.shape
    # p = k / 4 at the end of the k-th cluster: by then none of its graphs is left.
    for k in range(1, 5):
        i = int(np.argmin(np.abs(ps - k / 4)))
        assert ps[i] == pytest.approx(k / 4)
        assert set(labels[sets[i]]).isdisjoint(order[:k])
    survivors = labels == order[-1]
    np.testing.assert_array_equal(sets[-1][survivors], np.flatnonzero(survivors))
    assert set(labels[sets[-1]]) == {order[-1]}
    again = protocol.graded_dropping_sets(labels, order, 0.001, seed=4)
    for a, b in zip(sets, again[1], strict=True):
        np.testing.assert_array_equal(a, b)
    other = protocol.graded_dropping_sets(labels, order, 0.001, seed=5)[1]
    assert any(not np.array_equal(a, b) for a, b in zip(sets, other, strict=False))


def test_graded_sweeps_follow_the_grid_of_p():
    labels = np.repeat(np.arange(4), 50)  # 4 clusters of 50: 196 movable graphs
    exemplars = np.arange(4) * 50
    order = np.arange(4)
    ps, sets = protocol.graded_collapse_sets(labels, exemplars, order, 0.01, seed=0)
    assert len(ps) == 101  # the 1% grid, each state nearest to a grid value
    np.testing.assert_allclose(ps, np.linspace(0, 1, 101), atol=0.5 / (4 * 49))
    ps, _ = protocol.graded_collapse_sets(labels, exemplars, order, 0.25, seed=0)
    np.testing.assert_allclose(ps, [0, 0.25, 0.5, 0.75, 1])  # the cluster boundaries
    with pytest.raises(ValueError, match="step"):
        protocol.graded_collapse_sets(labels, exemplars, order, 0, seed=0)
    with pytest.raises(ValueError, match="nothing to collapse"):
        protocol.graded_collapse_sets(np.arange(3), np.arange(3), np.arange(3), 0.1, seed=0)


def test_sweep_sets_graded_and_clusters_designs():
    labels, exemplars, order = _toy_clusters()
    ps, sets = protocol.sweep_sets("clusters", "collapse", labels, exemplars, order, 0.01, seed=0)
    np.testing.assert_allclose(ps, np.arange(5) / 4)  # one whole cluster per step
    expected = protocol.collapse_sets(labels, exemplars, order, np.arange(5))
    for a, b in zip(sets, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    ps, _ = protocol.sweep_sets("clusters", "dropping", labels, exemplars, order, 0.01, seed=0)
    assert len(ps) == 4
    ps, _ = protocol.sweep_sets("graded", "dropping", labels, exemplars, order, 0.01, seed=0)
    assert len(ps) > 4
    with pytest.raises(ValueError, match="sweep"):
        protocol.sweep_sets("steps", "collapse", labels, exemplars, order, 0.01, seed=0)


def test_identical_to_exemplar_finds_isomorphic_members():
    graphs = [nx.grid_2d_graph(3, 4), nx.grid_2d_graph(4, 3), nx.grid_2d_graph(2, 6),
              nx.path_graph(5), nx.star_graph(4)]
    graphs = [nx.convert_node_labels_to_integers(g) for g in graphs]
    labels = np.array([0, 0, 0, 1, 1])
    exemplars = np.array([0, 3])
    np.testing.assert_array_equal(protocol.identical_to_exemplar(graphs, labels, exemplars),
                                  [True, True, False, True, False])


def test_graded_sweeps_of_the_default_lobster_have_at_least_min_steps():
    graphs = data_graphs.lobster_graphs(100, seed=11)
    ref, pert = protocol.split_halves(len(graphs), 1)
    labels, exemplars = protocol.cluster_graphs(
        protocol.wl_kernel([graphs[i] for i in pert]), seed=2)
    order = np.random.default_rng(3).permutation(len(exemplars))
    for experiment in protocol.EXPERIMENTS:
        graded, _ = protocol.sweep_sets("graded", experiment, labels, exemplars, order, 0.01,
                                        seed=4)
        clusters, _ = protocol.sweep_sets("clusters", experiment, labels, exemplars, order,
                                          0.01, seed=4)
        assert len(graded) >= protocol.MIN_STEPS > len(clusters)


def test_split_halves():
    ref, pert = protocol.split_halves(11, 3)
    assert len(ref) == 5 and len(pert) == 6
    assert sorted(np.concatenate([ref, pert])) == list(range(11))
    r2, _ = protocol.split_halves(11, 3)
    np.testing.assert_array_equal(ref, r2)


# --------------------------------------------------------------------------------------------
# GIN embeddings
# --------------------------------------------------------------------------------------------

def test_draw_architectures_distinct_and_seeded():
    archs = gin.draw_architectures(20, [2, 3, 4, 5, 6, 7], [5, 10, 15, 20, 25, 30, 35, 40], 9)
    assert archs == gin.draw_architectures(20, [2, 3, 4, 5, 6, 7],
                                         [5, 10, 15, 20, 25, 30, 35, 40], 9)
    pairs = {(a["layers"], a["hidden"]) for a in archs}
    assert len(pairs) == 20
    assert all(2 <= a["layers"] <= 7 and 5 <= a["hidden"] <= 40 for a in archs)
    assert len(gin.draw_architectures(5, [2], [5], 0)) == 5  # repeats with new seeds
    with pytest.raises(ValueError):
        gin.draw_architectures(3, [1], [5], 0)


def test_gin_embeddings_invariances_and_sum_pooling():
    g = nx.convert_node_labels_to_integers(data_graphs._random_lobster(20, 0.7, 0.7, seed=3))
    perm = np.random.default_rng(0).permutation(g.number_of_nodes())
    relabelled = nx.relabel_nodes(g, dict(enumerate(perm.tolist())))
    relabelled = nx.convert_node_labels_to_integers(relabelled, ordering="sorted")
    double = nx.disjoint_union(g, g)
    E = gin.gin_embeddings([g, relabelled, double, nx.cycle_graph(7)], layers=4, hidden=6, seed=5)
    assert E.shape == (4, 3 * 6)
    np.testing.assert_array_equal(E[0], E[1])  # permutation invariant (exactly, after rounding)
    np.testing.assert_allclose(E[2], 2 * E[0], rtol=1e-8, atol=1e-8)  # sum pooling
    assert not np.allclose(E[3], E[0])
    np.testing.assert_array_equal(
        E, gin.gin_embeddings([g, relabelled, double, nx.cycle_graph(7)], layers=4, hidden=6,
                              seed=5))
    other = gin.gin_embeddings([g], layers=4, hidden=6, seed=6)
    assert not np.allclose(other[0], E[0])
    with pytest.raises(ValueError, match="layers"):
        gin.gin_embeddings([g], layers=1, hidden=6)


def test_gin_embeddings_leave_the_global_torch_seed_alone():
    import torch

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    gin.gin_embeddings([nx.path_graph(4)], layers=2, hidden=3, seed=0)
    np.testing.assert_array_equal(torch.rand(3).numpy(), expected.numpy())


# --------------------------------------------------------------------------------------------
# measures
# --------------------------------------------------------------------------------------------

def test_graph_measures_closed_forms():
    rng = np.random.default_rng(0)
    R = rng.normal(size=(40, 3))
    t_cut = convergence_scale(pairwise_distances(R))
    area = mag_area(pairwise_distances(R), t_cut)
    same = protocol.graph_measures(R, R.copy(), t_cut=t_cut, reference_area=area)
    assert same["magdiff"] == pytest.approx(0.0, abs=1e-7)
    assert same["mmd_linear"] == pytest.approx(0.0, abs=1e-12)
    assert same["recall"] == 1.0 and same["coverage"] == 1.0
    # Full collapse onto one point: Mag = 1 for every t > 0, so MagArea = t_cut.
    collapsed = np.repeat(R[:1], 40, axis=0)
    out = protocol.graph_measures(R, collapsed, t_cut=t_cut, reference_area=area)
    assert out["magdiff"] == pytest.approx((area - t_cut) / area, rel=1e-6)
    assert out["mmd_rbf"] > same["mmd_rbf"]
    assert set(out) == set(protocol.MEASURES)


def test_reference_t_cut_counts_distinct_points():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(15, 2))
    with_duplicates = np.vstack([X, X[:10]])
    assert protocol.reference_t_cut(with_duplicates) == pytest.approx(
        convergence_scale(pairwise_distances(X)), rel=1e-9)
    with pytest.raises(ValueError, match="single distinct point"):
        protocol.reference_t_cut(np.zeros((4, 2)))


def test_spearman_flips_falling_measures_and_marks_constant_ones():
    p = np.linspace(0, 1, 6)
    rows = []
    for metric, values in (("recall", 1 - p), ("mmd_rbf", p ** 2), ("magdiff", -p),
                           ("precision", np.ones(6))):
        rows += [{"dataset": "d", "experiment": "collapse", "setting": "a", "p": pi,
                  "metric": metric, "value": v} for pi, v in zip(p, values, strict=True)]
    rho = protocol.spearman_per_setting(pd.DataFrame(rows)).set_index("metric")["spearman"]
    assert rho["recall"] == pytest.approx(1.0)
    assert rho["mmd_rbf"] == pytest.approx(1.0)
    assert rho["magdiff"] == pytest.approx(-1.0)
    assert np.isnan(rho["precision"])


def test_evaluate_architecture_on_a_small_sweep():
    graphs = data_graphs.lobster_graphs(24, seed=2)
    ref, pert = protocol.split_halves(len(graphs), 0)
    K = protocol.wl_kernel([graphs[i] for i in pert])
    labels, exemplars = protocol.cluster_graphs(K, seed=0)
    order = np.random.default_rng(0).permutation(len(exemplars))
    ms, ps = protocol.perturbation_steps(len(exemplars), 0.01, "collapse")
    sweeps = {"collapse": (ps, protocol.collapse_sets(labels, exemplars, order, ms))}
    arch = gin.draw_architectures(1, [3], [8], 0)[0]
    rows = pd.DataFrame(protocol.evaluate_architecture(graphs, ref, pert, sweeps, arch))
    assert set(rows["metric"]) == set(protocol.MEASURES)
    assert len(rows) == len(ps) * len(protocol.MEASURES)
    mag = rows[rows["metric"] == "magdiff"].sort_values("p")["value"].to_numpy()
    assert mag[-1] > mag[0]  # full collapse loses diversity


# --------------------------------------------------------------------------------------------
# bootstrap intervals of the mean rho
# --------------------------------------------------------------------------------------------

def _sweep_table(values, p, metrics=protocol.MEASURES, dataset="d", experiment="collapse"):
    """Long measure table from values[setting, step, metric]."""
    rows = []
    for a in range(values.shape[0]):
        for s, pi in enumerate(p):
            for m, metric in enumerate(metrics):
                rows.append({"dataset": dataset, "experiment": experiment, "setting": f"a{a}",
                             "step": s, "p": pi, "metric": metric, "value": values[a, s, m]})
    return pd.DataFrame(rows)


def test_spearman_along_steps_matches_scipy():
    from scipy.stats import spearmanr

    from diversity_core.experiments.graph_analysis import _spearman_along_steps

    rng = np.random.default_rng(0)
    p = np.linspace(0, 1, 25)
    values = rng.normal(size=(3, 25, 2))
    values[1, :, 0] = np.round(values[1, :, 0])  # ties
    rho = _spearman_along_steps(p[None, :], values)
    for a in range(3):
        for m in range(2):
            assert rho[a, m] == pytest.approx(spearmanr(p, values[a, :, m]).statistic, abs=1e-12)
    values[2, :, 1] = 1.0
    assert np.isnan(_spearman_along_steps(p[None, :], values)[2, 1])


def test_a_tie_at_one_is_reported_as_a_tie():
    p = np.linspace(0, 1, 30)
    rng = np.random.default_rng(1)
    n = len(protocol.MEASURES)
    values = rng.normal(size=(6, 30, n))
    magdiff, mmd, recall = (protocol.MEASURES.index(m) for m in ("magdiff", "mmd_rbf", "recall"))
    values[:, :, magdiff] = p ** 2 + np.arange(6)[:, None]  # monotone in every architecture
    values[:, :, mmd] = np.exp(p)                              # monotone too: a tie at 1
    values[:, :, recall] = 1 - p + 0.3 * rng.normal(size=(6, 30))  # falls, noisily
    values[:, :, protocol.MEASURES.index("density")] = 0.5  # constant: rho undefined
    table = protocol.rho_intervals(_sweep_table(values, p), n_boot=300, seed=0)
    rows = table.set_index("metric")
    assert rows.loc["density", ["ci_low", "ci_high", "gap_low", "gap_high"]].isna().all()
    for metric in ("magdiff", "mmd_rbf"):
        assert (rows.loc[metric, "ci_low"], rows.loc[metric, "ci_high"]) == (1.0, 1.0)
    assert (rows.loc["mmd_rbf", "gap"], rows.loc["mmd_rbf", "gap_low"],
            rows.loc["mmd_rbf", "gap_high"]) == (0.0, 0.0, 0.0)
    assert 0 < rows.loc["recall", "ci_low"] < rows.loc["recall", "ci_high"] < 1  # flipped
    assert rows.loc["recall", "gap_low"] > 0  # MagDiff ahead beyond the interval
    versus_magdiff = protocol.versus_magdiff
    assert versus_magdiff("mmd_rbf", 0.0, 0.0) == "tied"
    assert versus_magdiff("recall", rows.loc["recall", "gap_low"], 1.0) == "behind"
    assert versus_magdiff("x", -0.2, -0.1) == "ahead"
    assert versus_magdiff("magdiff", 0.0, 0.0) == "magdiff"
    assert versus_magdiff("density", np.nan, np.nan) == "undefined"


def test_bootstrap_intervals_contain_the_point_estimate_and_are_seeded():
    rng = np.random.default_rng(2)
    p = np.linspace(0, 1, 40)
    values = p[None, :, None] + rng.normal(scale=0.4, size=(8, 40, len(protocol.MEASURES)))
    measures = _sweep_table(values, p)
    table = protocol.rho_intervals(measures, n_boot=400, seed=5)
    mean = (protocol.spearman_per_setting(measures).groupby("metric")["spearman"].mean()
            .reindex(table["metric"]).to_numpy())
    assert np.all(table["ci_low"].to_numpy() < mean)
    assert np.all(mean < table["ci_high"].to_numpy())
    assert np.all(table["gap_low"] <= table["gap"]) and np.all(table["gap"] <= table["gap_high"])
    signs = np.where(np.isin(protocol.MEASURES, list(protocol.flipped_measures())), -1, 1)
    np.testing.assert_allclose(np.sign(mean), signs)  # flipped measures: max - x falls
    pd.testing.assert_frame_equal(table, protocol.rho_intervals(measures, n_boot=400, seed=5))
    other = protocol.rho_intervals(measures, n_boot=400, seed=6)
    assert not np.allclose(table["ci_low"], other["ci_low"])
    reps = protocol.bootstrap_mean_rho(p, values, n_boot=50, seed=1)
    assert reps.shape == (50, len(protocol.MEASURES))
    with pytest.raises(ValueError, match="same steps"):
        protocol.rho_intervals(measures[~((measures["setting"] == "a0")
                                          & (measures["step"] == 3))], n_boot=10, seed=0)
    with pytest.raises(ValueError, match="level"):
        protocol.rho_intervals(measures, n_boot=10, seed=0, level=1.5)


# --------------------------------------------------------------------------------------------
# the prepare script is deterministic
# --------------------------------------------------------------------------------------------

def test_prepare_script_is_reproducible(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import graphs_prepare
    finally:
        sys.path.pop(0)
    outs = []
    for i in range(2):
        setup, clusters = tmp_path / f"s{i}.npz", tmp_path / f"c{i}.json"
        graphs_prepare.main([], setup, clusters, "lobster", {"n_graphs": 30}, seed=5,
                            sweep="graded", p_step=0.01, wl_iterations=1,
                            ap_damping=[0.5, 0.7, 0.9],
                            ap_max_iter=1000, resources_dir=str(tmp_path / "resources"))
        outs.append(np.load(setup))
    for key in outs[0].files:
        np.testing.assert_array_equal(outs[0][key], outs[1][key])
    assert (tmp_path / "c0.json").read_text() == (tmp_path / "c1.json").read_text()


# --------------------------------------------------------------------------------------------
# the protocol the rule scripts call: one dataset prepared, the two tables of the analysis
# --------------------------------------------------------------------------------------------

def test_dataset_seeds_are_distinct_per_dataset_and_choice():
    a, b = protocol.dataset_seeds(5, "lobster"), protocol.dataset_seeds(5, "grid")
    assert list(a) == ["generate", "split", "cluster", "order", "dropping", "collapse"]
    assert len(set(a.values())) == len(a) and a != b
    assert a == protocol.dataset_seeds(5, "lobster") != protocol.dataset_seeds(6, "lobster")
    with pytest.raises(ValueError):
        protocol.dataset_seeds(5, "no such dataset")


def test_prepare_sweeps_indexes_the_perturbed_half():
    seeds = protocol.dataset_seeds(5, "lobster")
    graphs = data_graphs.load_dataset("lobster", {"n_graphs": 30}, seed=seeds["generate"])
    arrays, summary = protocol.prepare_sweeps(
        graphs, "lobster", seeds=seeds, sweep="graded", p_step=0.05, wl_iterations=1,
        ap_damping=[0.5, 0.7, 0.9], ap_max_iter=1000)
    ref, pert = arrays["reference_idx"], arrays["perturbed_idx"]
    assert len(ref) == 15 and len(pert) == 15 and not set(ref) & set(pert)
    assert summary["n_graphs"] == 30 and summary["n_clusters"] == len(arrays["exemplars"])
    assert summary["cluster_sizes"] == np.bincount(arrays["labels"]).tolist()
    for experiment in protocol.EXPERIMENTS:
        ps, sets = arrays[f"{experiment}_p"], arrays[f"{experiment}_sets"]
        assert summary[f"{experiment}_steps"] == len(ps) == len(sets)
        assert ps[0] == 0 and ps[-1] == 1 and np.all(np.diff(ps) > 0)
        assert sets.shape[1] == len(pert) and sets.min() >= 0 and sets.max() < len(pert)
        np.testing.assert_array_equal(sets[0], np.arange(len(pert)))  # p = 0: unperturbed
    assert summary["seeds"] == seeds


def test_spearman_tables_summarise_every_panel():
    rng = np.random.default_rng(3)
    p = np.linspace(0, 1, 21)
    values = p[None, :, None] + rng.normal(scale=0.3, size=(4, 21, len(protocol.MEASURES)))
    measures = pd.concat([_sweep_table(values, p, dataset=d, experiment=e)
                          for d in ("x", "y") for e in protocol.EXPERIMENTS], ignore_index=True)
    clusters = {"x": {"n_clusters": 7, "collapse_steps": 21, "dropping_steps": 20},
                "y": {"n_clusters": 9, "collapse_steps": 21, "dropping_steps": 19}}
    rho, summary = protocol.spearman_tables(measures, clusters, n_boot=50, seed=0, level=0.9)
    assert len(rho) == 2 * 2 * len(protocol.MEASURES) * 4
    first = rho[(rho["dataset"] == "x") & (rho["experiment"] == "collapse")]
    assert list(dict.fromkeys(first["metric"])) == list(protocol.MEASURES)
    assert list(summary.columns) == protocol.SUMMARY_COLUMNS
    assert len(summary) == 2 * 2 * len(protocol.MEASURES)
    assert set(summary.loc[summary["dataset"] == "y", "n_clusters"]) == {9}
    steps = summary.set_index(["dataset", "experiment"])["n_steps"]
    assert set(steps.loc[("y", "dropping")]) == {19}
    for _, panel in summary.groupby(["dataset", "experiment"]):
        assert panel["rank"].min() == 1 and (panel["n_settings"] == 4).all()
        assert panel.loc[panel["metric"] == "magdiff", "vs_magdiff"].item() == "magdiff"
        mean = rho.merge(panel[["dataset", "experiment", "metric"]]).groupby(
            "metric", sort=False)["spearman"].mean()
        np.testing.assert_allclose(panel.set_index("metric")["mean"], mean.reindex(
            panel["metric"]))


def test_graph_measures_are_registered():
    from diversity_core.measures.registry import MEASURES as REGISTRY

    assert set(protocol.MEASURES) <= set(REGISTRY)
    assert protocol.flipped_measures() == {"precision", "recall", "density", "coverage"}
