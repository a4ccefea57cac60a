"""Randomly initialised GIN networks: graph embeddings of the mode-collapse experiment.

As in GGM-metrics (Thompson et al. 2022): orthogonal initialisation, sum aggregation, the node
degree as the only node feature, and the concatenated sum-pools of every layer as the graph
embedding. Two deliberate differences from GGM-metrics (see
:mod:`diversity_core.experiments.graph_mode_collapse`): the feature is the degree (not twice it),
and the network runs in float64 with its output rounded to 10 significant digits, so that graphs
it cannot tell apart are exact duplicates. torch and torch-geometric are imported inside the
functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

# networkx (0.2 CPU s to import) only names the graphs' type here; the functions that build or
# read graphs import it themselves.
if TYPE_CHECKING:
    import networkx as nx

__all__ = ["draw_architectures", "gin_embeddings"]

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
