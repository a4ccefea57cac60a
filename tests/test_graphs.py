"""The graph mode-collapse / mode-dropping experiment (diversity_core.experiments.graphs)."""

from __future__ import annotations

import hashlib
import io
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

REPO = Path(__file__).resolve().parents[1]


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


def test_graph_arrays_round_trip():
    graphs = data_graphs.lobster_graphs(5, seed=1) + [nx.empty_graph(3)]
    back = data_graphs.graphs_from_arrays(**data_graphs.graphs_to_arrays(graphs))
    assert [g.number_of_nodes() for g in back] == [g.number_of_nodes() for g in graphs]
    assert _edge_sets(back) == _edge_sets(graphs)


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
                            p_step=0.01, wl_iterations=1, ap_damping=[0.5, 0.7, 0.9],
                            ap_max_iter=1000, resources_dir=str(tmp_path / "resources"))
        outs.append(np.load(setup))
    for key in outs[0].files:
        np.testing.assert_array_equal(outs[0][key], outs[1][key])
    assert (tmp_path / "c0.json").read_text() == (tmp_path / "c1.json").read_text()
