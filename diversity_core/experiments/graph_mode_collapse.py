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
:mod:`diversity_core.embed.gin`; the protocol in three rooms, every public name importable from
here:

* :mod:`.graph_sweep`: the halves, the clusters (WL kernel, affinity propagation), the
  whole-cluster and graded perturbations, one dataset prepared (:func:`prepare_sweeps`);
* this module: :func:`graph_measures`, :func:`reference_t_cut`, :func:`evaluate_architecture`
  (every measure at every step, for one GIN architecture) and the configuration's checks;
* :mod:`.graph_analysis`: Spearman's ρ with p, its bootstrap intervals (architectures and steps
  resampled) and the summary tables (:func:`spearman_tables`).

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

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..embed.gin import gin_embeddings
from ..magnitude.settings import MagnitudeSettings
from .graph_analysis import (
    MEASURES,
    SUMMARY_COLUMNS,
    bootstrap_mean_rho,
    flipped_measures,
    measure_names,
    rho_intervals,
    spearman_per_setting,
    spearman_tables,
    summarise,
    versus_magdiff,
)
from .graph_sweep import (
    EXPERIMENTS,
    MIN_STEPS,
    SWEEPS,
    cluster_graphs,
    collapse_sets,
    dataset_seeds,
    dropping_sets,
    graded_collapse_sets,
    graded_dropping_sets,
    identical_to_exemplar,
    perturbation_steps,
    prepare_sweeps,
    split_halves,
    sweep_sets,
    wl_kernel,
)

# networkx (0.2 CPU s to import) only names the graphs' type here; the functions that build or
# read graphs import it themselves.
if TYPE_CHECKING:
    import networkx as nx


__all__ = [
    "EXPERIMENTS",
    "MEASURES",
    "MIN_STEPS",
    "flipped_measures",
    "SUMMARY_COLUMNS",
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
    "dataset_seeds",
    "prepare_sweeps",
    "graph_measures",
    "reference_t_cut",
    "evaluate_architecture",
    "spearman_per_setting",
    "bootstrap_mean_rho",
    "rho_intervals",
    "summarise",
    "versus_magdiff",
    "spearman_tables",
    "config_problems",
]


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
    where: str = "a perturbed set",
) -> dict[str, float]:
    """All measures of one perturbed set against the reference (``where``: the set, as a
    plugin's failure names it).

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
    from ..measures import pairwise_distances
    from ..measures.registry import ScaleView, get_measure, measure_values

    settings = settings or MagnitudeSettings()
    chosen = [get_measure(name) for name in measure_names()]
    view = None
    if any(m.multi_scale for m in chosen):
        area = settings.mag_area(pairwise_distances(generated), t_cut)
        view = ScaleView(t_cut, area=area, diff=float((reference_area - area) / reference_area))
    return measure_values(chosen, generated, reference, where=where, k=k, engine=view)


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
    from ..measures import pairwise_distances

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

    from ..measures import pairwise_distances

    settings = settings or MagnitudeSettings()
    E = gin_embeddings(graphs, layers=architecture["layers"], hidden=architecture["hidden"],
                       seed=architecture["init_seed"], mlp_layers=mlp_layers)
    scaler = StandardScaler().fit(E[reference_idx])
    R = scaler.transform(E[reference_idx])
    P = scaler.transform(E[perturbed_idx])
    # One prepared space: the area's grid reuses Mag(t_cut) from the convergence-scale search.
    reference_space = settings.space(pairwise_distances(R))
    t_cut = settings.convergence_scale(reference_space)
    ref_area = settings.mag_area(reference_space, t_cut)
    base = {k: architecture[k] for k in ("setting", "layers", "hidden", "init_seed")}
    rows = []
    for experiment, (ps, index_sets) in sweeps.items():
        for step, (p, idx) in enumerate(zip(ps, index_sets, strict=True)):
            values = graph_measures(R, P[idx], t_cut=t_cut, reference_area=ref_area, k=k,
                                    settings=settings,
                                    where=f"{experiment} step {step} of setting "
                                          f"{architecture['setting']}")
            for metric in values:
                rows.append({"experiment": experiment, **base, "step": step, "p": float(p),
                             "metric": metric, "value": values[metric], "t_cut": t_cut})
    return rows


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
