"""Image mode dropping (paper §4.4, Figure 5): the resampling protocol and its scores.

The paper embeds 100 CIFAR-10 images per class with Inception V3 (2048-d pool features), then
builds perturbed sets of the same size that draw more and more points from one *preferred* class,
either dropping the other classes one after another (``sequential``) or thinning all of them at
once (``simultaneous``). Each class is preferred twice (20 resamples per scenario). The measures
compare every perturbed set with the reference: recall/coverage (k = 10), precision/density,
Mag(0.5·t_ref) as a relative change, MagDiff relative to the reference's MagArea, and the Vendi
Score as an extra.

Data readers live in :mod:`diversity_core.data.images`, the network in
:mod:`diversity_core.embed.inception`; this module holds the protocol: :func:`class_counts`,
:func:`resample_plan`, :func:`mode_dropping_scores` and the summaries.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..magnitude.settings import MagnitudeSettings
from ..measures.registry import (
    ScaleView,
    evaluate,
    get_measure,
    measure_values,
    select_measures,
)

__all__ = [
    "SCENARIOS",
    "MEASURES",
    "select_reference_and_pool",
    "class_counts",
    "resample_plan",
    "perturbed_indices",
    "mode_dropping_scores",
    "summarise_scores",
    "scenario_agreement",
    "configured_measures",
]

SCENARIOS = ("sequential", "simultaneous")
# The measures of Figure 5, in its order (the default of the configuration's images.metrics):
# names of the registry of measures (each checked there: ValueError for an unknown name).
MEASURES = tuple(get_measure(name).name for name in (
    "magdiff", "mag_half_tconv", "recall", "coverage", "precision", "density", "vendi"))


def select_reference_and_pool(labels, n_reference_per_class: int, n_pool_per_class: int,
                              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw disjoint per-class index sets: the reference and the pool perturbed sets draw from.

    Each class c gets its own random order of its images (a generator spawned from ``seed`` for
    class c); the reference is the first ``n_reference_per_class`` images of that order and the
    pool the next ``n_pool_per_class``. Selections are therefore nested: a smaller reference or
    pool is a prefix of a larger one, and embeddings cached for a large configuration serve every
    smaller one.

    Returns
    -------
    reference : (n_classes, n_reference_per_class) int64 indices into ``labels``
    pool : (n_classes, n_pool_per_class) int64 indices, disjoint from ``reference``
    Row c holds class c, in draw order.
    """
    labels = np.asarray(labels)
    classes = np.unique(labels)
    need = n_reference_per_class + n_pool_per_class
    generators = np.random.SeedSequence(seed).spawn(len(classes))
    reference, pool = [], []
    for c, child in zip(classes, generators, strict=True):
        members = np.flatnonzero(labels == c)
        if len(members) < need:
            raise ValueError(
                f"class {c} has {len(members)} images; reference + pool need {need}."
            )
        order = members[np.random.default_rng(child).permutation(len(members))]
        reference.append(order[:n_reference_per_class])
        pool.append(order[n_reference_per_class:need])
    return np.asarray(reference, dtype=np.int64), np.asarray(pool, dtype=np.int64)


def class_counts(scenario: str, fraction: float, *, n_per_class: int, n_classes: int,
                 preferred: int, order: Sequence[int]) -> np.ndarray:
    """How many points each class contributes to a perturbed set.

    A set of ``n_per_class * n_classes`` points starts balanced; ``moved = round(fraction * N)``
    points are taken from the other classes and given to the ``preferred`` class.

    * ``sequential``: the other classes, in ``order``, are emptied one after another;
    * ``simultaneous``: every other class loses ``moved / (n_classes - 1)`` points (the first
      classes in ``order`` absorb the remainder).

    ``fraction`` runs from 0 (balanced) to ``(n_classes - 1) / n_classes`` (0.9 for ten classes:
    every point in the preferred class).

    Returns
    -------
    counts : (n_classes,) int64, summing to ``n_per_class * n_classes``
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}; got {scenario!r}.")
    total = n_per_class * n_classes
    max_fraction = (n_classes - 1) / n_classes
    if not 0.0 <= fraction <= max_fraction + 1e-12:
        raise ValueError(f"fraction must lie in [0, {max_fraction:g}]; got {fraction}.")
    others = [int(c) for c in order]
    if sorted(others) != sorted(set(range(n_classes)) - {preferred}):
        raise ValueError("order must list every class except the preferred one exactly once.")
    moved = min(int(round(fraction * total)), n_per_class * (n_classes - 1))
    counts = np.full(n_classes, n_per_class, dtype=np.int64)
    counts[preferred] += moved
    if scenario == "sequential":
        left = moved
        for c in others:
            take = min(left, n_per_class)
            counts[c] -= take
            left -= take
    else:
        base, remainder = divmod(moved, n_classes - 1)
        for i, c in enumerate(others):
            counts[c] -= base + (1 if i < remainder else 0)
    return counts


def resample_plan(n_classes: int, repeats_per_class: int, pool_sizes: Sequence[int],
                  seed: int) -> list[dict]:
    """The random draws of every resample: each class preferred ``repeats_per_class`` times.

    For resample (preferred class c, repeat r) the plan fixes an order of the other classes (the
    order of sequential dropping) and one permutation of each class's pool. A perturbed set takes
    the first ``counts[k]`` points of class k's permutation, so the sets of one resample are
    nested across fractions and equal across scenarios at fraction 0 (common random numbers:
    differences between scenarios are not sampling noise).
    """
    root = np.random.SeedSequence(seed)
    plan = []
    children = root.spawn(n_classes * repeats_per_class)
    for i, child in enumerate(children):
        rng = np.random.default_rng(child)
        preferred, repeat = divmod(i, repeats_per_class)
        others = [c for c in range(n_classes) if c != preferred]
        order = [int(c) for c in rng.permutation(others)]
        perms = [rng.permutation(int(size)) for size in pool_sizes]
        plan.append({"resample": i, "preferred": preferred, "repeat": repeat, "order": order,
                     "permutations": perms})
    return plan


def perturbed_indices(counts: Sequence[int], permutations: Sequence[np.ndarray],
                      pool_rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Row indices of a perturbed set: the first ``counts[k]`` pool points of class k.

    ``pool_rows[k]`` are the rows (into the feature matrix) of class k's pool.
    """
    parts = []
    for k, n in enumerate(counts):
        if n > len(pool_rows[k]):
            raise ValueError(
                f"class {k} must supply {n} points but its pool holds {len(pool_rows[k])}; "
                "raise images.n_pool_per_class."
            )
        parts.append(np.asarray(pool_rows[k])[permutations[k][:n]])
    return np.concatenate(parts)


def mode_dropping_scores(reference, pools: Sequence[np.ndarray], *, scenario: str,
                         fractions: Iterable[float], k: int, repeats_per_class: int = 2,
                         seed: int = 0, settings: MagnitudeSettings | None = None,
                         metrics: Sequence[str] | None = None, progress: bool = True):
    """Score every perturbed set of one scenario against the reference.

    Parameters
    ----------
    reference : (n_classes, n_per_class, d) features of the reference, class by class
    pools : n_classes arrays (n_pool_k, d): the features perturbed sets draw from
    scenario : ``sequential`` or ``simultaneous``
    fractions : shares of the set moved to the preferred class (see :func:`class_counts`)
    k : nearest neighbours of precision/recall/density/coverage (no default here: the
        configuration's ``images.k`` is the one place it is set; the paper's is 10)
    settings : magnitude conventions (convergence target, MagArea integration); the package
        defaults if None
    metrics : subset of :data:`MEASURES` (all if None)

    Returns
    -------
    pandas.DataFrame, one row per (fraction, resample, metric): columns ``scenario, fraction,
    resample, preferred, repeat, metric, value``; and a dict with the reference's t_conv
    (``t_ref``), MagArea, Mag(0.5 t_ref) and Vendi Score.

    Measures (Euclidean distances; X a perturbed set, R the reference, t_ref = t_conv(R)):

    * ``magdiff`` = ∫_0^t_ref (Mag_X − Mag_R) dt / MagArea_R (signed; 0 = as diverse as R);
    * ``mag_half_tconv`` = (Mag_X(t_ref/2) − Mag_R(t_ref/2)) / Mag_R(t_ref/2);
    * ``recall``, ``coverage``, ``precision``, ``density``: :func:`diversity_core.prdc` with
      real = R, fake = X;
    * ``vendi``: the Vendi Score of X (cosine kernel, q = 1), a reference-free extra.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from ..measures import pairwise_distances

    settings = settings or MagnitudeSettings()
    # Every measure that fits the protocol (against the reference, its scale t_ref, or of the
    # set alone); the plugins join the named ones.
    chosen = select_measures(reference=True, scale_rules=("reference",),
                             named=MEASURES if metrics is None else metrics)
    reference = np.asarray(reference, dtype=np.float64)
    if reference.ndim != 3:
        raise ValueError(f"reference must be (n_classes, n_per_class, d); got {reference.shape}.")
    n_classes, n_per_class, dim = reference.shape
    if len(pools) != n_classes:
        raise ValueError(f"{len(pools)} pools for {n_classes} reference classes.")
    fractions = [float(f) for f in fractions]
    ref = reference.reshape(-1, dim)
    features = np.concatenate([np.asarray(p, dtype=np.float64) for p in pools])
    bounds = np.cumsum([0] + [len(p) for p in pools])
    pool_rows = [np.arange(bounds[i], bounds[i + 1]) for i in range(n_classes)]

    # One prepared space per set (validated and de-duplicated once, evaluations shared).
    space_ref = settings.space(pairwise_distances(ref, algorithm="gram"))
    t_ref = settings.convergence_scale(space_ref)
    area_ref = settings.mag_area(space_ref, t_ref)
    mag_half_ref = space_ref.magnitude(0.5 * t_ref)
    info = {"t_ref": t_ref, "mag_area_ref": area_ref, "mag_half_tconv_ref": mag_half_ref,
            "n_reference": len(ref)}
    info.update({f"{m.name}_ref": float(evaluate(m, ref, where="the reference"))
                 for m in chosen if not m.needs_reference})
    scaled = any(m.multi_scale for m in chosen)

    plan = resample_plan(n_classes, repeats_per_class, [len(p) for p in pools], seed)
    rows = []
    bar = tqdm(total=len(plan) * len(fractions), desc=scenario, disable=not progress,
               file=sys.stderr, mininterval=5.0)
    with bar:
        for draw in plan:
            for fraction in fractions:
                counts = class_counts(scenario, fraction, n_per_class=n_per_class,
                                      n_classes=n_classes, preferred=draw["preferred"],
                                      order=draw["order"])
                X = features[perturbed_indices(counts, draw["permutations"], pool_rows)]
                view = None
                if scaled:
                    space_x = settings.space(pairwise_distances(X, algorithm="gram"))
                    view = ScaleView(t_ref, diff=settings.mag_diff(
                        space_x, space_ref, t_ref, normalise="reference_area",
                        reference_area=area_ref), magnitude=space_x.magnitude,
                        reference_magnitude=lambda t: mag_half_ref if t == 0.5 * t_ref
                        else space_ref.magnitude(t))
                values = measure_values(
                    chosen, X, ref, where=f"{scenario} resample {draw['resample']} at "
                    f"fraction {fraction}", k=k, engine=view)
                for name in values:
                    rows.append({"scenario": scenario, "fraction": fraction,
                                 "resample": draw["resample"], "preferred": draw["preferred"],
                                 "repeat": draw["repeat"], "metric": name,
                                 "value": float(values[name])})
                bar.update()
    return pd.DataFrame(rows), info


def summarise_scores(scores):
    """Mean and standard deviation (ddof=1) over resamples: ``scenario, fraction, metric, mean,
    std``, sorted by scenario, metric, fraction."""
    grouped = scores.groupby(["scenario", "fraction", "metric"], sort=True)["value"]
    out = grouped.agg(mean="mean", std=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
    out = out.reset_index()
    return out.sort_values(["scenario", "metric", "fraction"]).reset_index(drop=True)


def _crossing(fractions: np.ndarray, drop: np.ndarray, level: float) -> float:
    """First fraction at which ``drop`` reaches ``level`` (linear interpolation); NaN if never."""
    above = np.flatnonzero(drop >= level)
    if len(above) == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(fractions[0])
    f0, f1, d0, d1 = fractions[i - 1], fractions[i], drop[i - 1], drop[i]
    return float(f0 + (level - d0) * (f1 - f0) / (d1 - d0))


def scenario_agreement(summary):
    """How alike each measure's curves are under sequential and simultaneous dropping.

    For every metric, from the mean curves m_seq(f) and m_sim(f) of :func:`summarise_scores`:

    * ``drop_sequential``, ``drop_simultaneous``: m(f_min) − m(f_max), the total fall;
    * ``max_gap``: max_f |m_seq(f) − m_sim(f)| divided by the mean of the two total falls
      (0 = identical curves; 0.5 = the curves are half a total fall apart somewhere);
    * ``mean_gap``: the mean over fractions of (m_seq − m_sim) / mean fall (negative: the
      sequential curve lies lower, i.e. the measure sees diversity fall faster there);
    * ``onset_*``: the fraction at which the curve has fallen by 10% of its total fall;
    * ``half_*``: the fraction at which it has fallen by half.

    Returns
    -------
    pandas.DataFrame, one row per metric.
    """
    import pandas as pd

    rows = []
    for metric, group in summary.groupby("metric", sort=True):
        curves = {sc: g.sort_values("fraction") for sc, g in group.groupby("scenario")}
        if set(curves) != set(SCENARIOS):
            continue
        seq, sim = curves["sequential"], curves["simultaneous"]
        if not np.array_equal(seq.fraction.to_numpy(), sim.fraction.to_numpy()):
            raise ValueError(f"{metric}: the scenarios were scored at different fractions.")
        fractions = seq.fraction.to_numpy(dtype=float)
        m_seq, m_sim = seq["mean"].to_numpy(float), sim["mean"].to_numpy(float)
        drops = {"sequential": m_seq[0] - m_seq[-1], "simultaneous": m_sim[0] - m_sim[-1]}
        scale = 0.5 * (abs(drops["sequential"]) + abs(drops["simultaneous"]))
        row = {"metric": metric,
               "drop_sequential": drops["sequential"], "drop_simultaneous": drops["simultaneous"],
               "max_gap": float(np.max(np.abs(m_seq - m_sim)) / scale) if scale else float("nan"),
               "mean_gap": float(np.mean(m_seq - m_sim) / scale) if scale else float("nan")}
        for name, m in (("sequential", m_seq), ("simultaneous", m_sim)):
            fall = (m[0] - m) * np.sign(drops[name]) if drops[name] else np.zeros_like(m)
            total = abs(drops[name])
            row[f"onset_{name}"] = _crossing(fractions, fall, 0.1 * total) if total else np.nan
            row[f"half_{name}"] = _crossing(fractions, fall, 0.5 * total) if total else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


# Images per class in each data set's splits (the pool and reference are drawn within a class).
IMAGES_PER_CLASS = {"fashion_mnist": {"train": 6000, "test": 1000},
                    "cifar10": {"train": 5000, "test": 1000}}
IMAGE_CLASSES = 10


def configured_measures(section: Mapping) -> list[str]:
    """The images section's ``metrics`` (checked against the registry: measures against the
    reference or of a set alone) and after them every measure plugin that fits."""
    return [m.name for m in select_measures(reference=True, scale_rules=("reference",),
                                            named=section["metrics"])]


def config_problems(section: Mapping) -> list[str]:
    """The constraints between keys of the images section that the configuration schema cannot
    express, as sentences naming the keys (empty if there are none). The workflow checks them
    before any job runs (workflow/rules/common.smk: check_config)."""
    img = section
    problems = []
    set_size = img["n_reference_per_class"] * IMAGE_CLASSES
    if img["k"] >= set_size:
        problems.append(
            f"images.k ({img['k']}) must be smaller than the number of images in a set, "
            f"{set_size} (images.n_reference_per_class = {img['n_reference_per_class']} x "
            f"{IMAGE_CLASSES} classes): PRDC needs a k-th neighbour besides the point itself.")
    moved = min(round(max(img["fractions"]) * set_size),
                img["n_reference_per_class"] * (IMAGE_CLASSES - 1))
    need = img["n_reference_per_class"] + moved
    if img["n_pool_per_class"] < need:
        problems.append(
            f"images.n_pool_per_class ({img['n_pool_per_class']}) must be at least {need}: at "
            f"the largest of images.fractions ({max(img['fractions'])}) the preferred class "
            f"supplies {need} images of a set of {set_size}.")
    available = IMAGES_PER_CLASS[img["dataset"]][img["split"]]
    if img["n_reference_per_class"] + img["n_pool_per_class"] > available:
        problems.append(
            f"images.n_reference_per_class + images.n_pool_per_class "
            f"({img['n_reference_per_class']} + {img['n_pool_per_class']}) exceeds the "
            f"{available} images per class of {img['dataset']} (images.split = {img['split']}).")

    return problems
