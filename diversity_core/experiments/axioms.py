"""Checks of the diversity axioms of the magnitude paper (§3.1) on concrete point sets.

The paper (Limbeck et al., §3.1 and its Appendix C) asks a diversity measure for

* **effective size**: a set of fixed size is more diverse when its points are spread out than when
  they cluster; diversity is smallest when all points are identical;
* **monotonicity in observations**: including a new observation does not decrease diversity;
* **twin property**: including a duplicate observation does not change diversity;
* **multi-scale**: diversity is summarised across multiple scales of (dis)similarity,

and claims that only magnitude satisfies them all. Each check below evaluates every measure on a
fixed, seeded list of point sets and reports ``holds`` (no counterexample among the cases tried)
or ``fails`` with the first counterexample found. "Holds" is evidence, not a proof.

Measures are oriented so that higher means more diverse (AvgSim enters as ``-AvgSim``). Magnitude
enters as MagArea with the paper's reference-free convention: the sets compared in one case share
``t_cut``, the median of their convergence scales (sets whose convergence scale is undefined, such
as sets with duplicates, are left out of the median). The baselines use the kernels they are used
with on embeddings: cosine for the Vendi Score, AvgSim and DCScore (τ = 1).

Multi-scale is a property of a measure's definition rather than of its values; its check shows a
pair of sets whose magnitude functions cross (one set is more diverse at coarse scales, the other
at fine scales) and records whether the measure summarises a range of scales (MagArea integrates
over ``[0, t_cut]``, which contains the crossing) or returns one number at one fixed resolution.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..magnitude import magnitude_function, measure_sets
from ..measures.distances import pairwise_distances
from ..measures.registry import Measure, ScaleView, get_measure, select_measures

__all__ = ["AXIOMS", "MEASURES", "AxiomMeasure", "AxiomResult", "check_axioms", "default_measures"]

AXIOMS = ("effective size", "monotonicity", "twin property", "multi-scale")

# Relative tolerance under which two scores count as equal.
RTOL = 1e-9


@dataclass(frozen=True)
class AxiomMeasure:
    """A measure of the registry as the axiom checks evaluate it: jointly on the sets compared in
    one case.

    ``score(sets)`` returns one float per set, higher = more diverse. ``multi_scale`` says whether
    the measure summarises diversity over a range of scales (by its definition).
    """

    name: str
    score: Callable[[Sequence[np.ndarray]], list[float]]
    multi_scale: bool
    scale_note: str


@dataclass
class AxiomResult:
    measure: str
    axiom: str
    holds: bool
    counterexample: str
    cases_tried: int = 0
    values: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "holds" if self.holds else "fails"


def _each(name: str, *, negated: bool = False) -> Callable[[Sequence[np.ndarray]], list[float]]:
    """The registry's measure ``name`` of each set on its own (negated: a similarity)."""
    measure = get_measure(name)

    def score(sets):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # IsoScore's rank warning
            values = [float(measure(X)) for X in sets]
        return [-v for v in values] if negated else values
    return score


def _mag_area_score(metric: str, measure: Measure | None = None
                    ) -> Callable[[Sequence[np.ndarray]], list[float]]:
    """The sets' values of a measure that needs a scale (default: MagArea) under ``metric``."""
    measure = measure or get_measure("magarea")

    def score(sets):
        # Identical directions give cosine distances of ~1e-16, not 0; MagnitudeSpace merges
        # points that close as duplicates (twin property).
        Ds = [pairwise_distances(X, metric=metric) for X in sets]
        # The reference-free protocol: t_cut the median of the convergence scales of the sets
        # that have one (duplicates: 0.95 n may exceed the number of distinct points); mag_area
        # bisects adaptively where a set's magnitude rises at scales far below t_cut (tiny
        # cosine distances give a t_cut 10^4 - 10^7 times those scales).
        mag = measure_sets(Ds)
        if mag.t_cut is None:
            raise ValueError("no set of this case has a convergence scale")
        failed = [why for why in mag.area_failures if why]
        if failed:
            raise ValueError(failed[0])
        return [float(measure(X, engine=ScaleView(mag.t_cut, area=area)))
                for X, area in zip(sets, mag.areas, strict=True)]
    return score


def default_measures() -> list[AxiomMeasure]:
    """Every measure of a set alone in the registry (plugins included): one that needs a scale
    under the Euclidean and the cosine distance; a similarity negated."""
    out = []
    for m in select_measures(reference=False, scale_rules=("median",)):
        if m.multi_scale:
            out += [AxiomMeasure(f"{m.label} ({shown})", _mag_area_score(metric, m), True,
                                 m.scale_note)
                    for metric, shown in (("euclidean", "Euclidean"), ("cosine", "cosine"))]
        else:
            negated = m.higher_is_more_diverse is False
            out.append(AxiomMeasure(("-" if negated else "") + m.description,
                                    _each(m.name, negated=negated), False, m.scale_note))
    return out


MEASURES = tuple(m.name for m in default_measures())


# --- point sets --------------------------------------------------------------------------------

def _circle(angles) -> np.ndarray:
    angles = np.asarray(angles, dtype=float)
    return np.c_[np.cos(angles), np.sin(angles)]


def _even_circle(n: int) -> np.ndarray:
    return _circle(2 * np.pi * np.arange(n) / n)


def _clustered_circle(centres, per_cluster: int, spread: float) -> np.ndarray:
    # Symmetric offsets around each centre keep the clusters' mean direction on the centre.
    offsets = spread * (np.arange(per_cluster) - (per_cluster - 1) / 2)
    return _circle([c + o for c in centres for o in offsets])


def _effective_size_cases(rng) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(description, less diverse set, more diverse set): the first must score strictly lower."""
    identical = np.tile([[0.6, 0.8, 0.3]], (8, 1))
    equator = np.c_[_even_circle(8), np.zeros(8)]
    gauss8 = rng.normal(size=(8, 3))
    centres = rng.normal(size=(4, 5)) * 3
    clusters = np.repeat(centres, 10, axis=0) + 0.05 * rng.normal(size=(40, 5))
    spread = rng.normal(size=(40, 5)) * 3
    return [
        ("8 identical points vs 8 distinct unit vectors on the equator of S^2 (third coordinate "
         "constant)", identical, equator),
        ("8 identical points vs 8 distinct Gaussian points in R^3", identical, gauss8),
        ("8 evenly spaced unit vectors in R^2 vs 4 tight pairs (+-0.025 rad) at 45, 135, 225, "
         "315 degrees: clustered must score lower", _clustered_circle(
             np.deg2rad([45, 135, 225, 315]), 2, 0.05), _even_circle(8)),
        ("8 evenly spaced unit vectors in R^2 vs 2 antipodal clusters of 4 (spacing 0.05 rad): "
         "clustered must score lower", _clustered_circle([0.0, np.pi], 4, 0.05), _even_circle(8)),
        ("40 Gaussian points (sd 3) in R^5 vs 4 clusters of 10 (sd 0.05): clustered must score "
         "lower", clusters, spread),
        *(_contracted_case(rng, i) for i in range(10)),
    ]


def _contracted_case(rng, i: int) -> tuple[str, np.ndarray, np.ndarray]:
    """12 Gaussian points (sd 3) in R^4, and the same points pulled 90% of the way to the nearest
    of 3 of them: the same points, clustered."""
    X = 3 * rng.normal(size=(12, 4))
    centres = X[rng.choice(12, size=3, replace=False)]
    nearest = centres[np.argmin(((X[:, None] - centres[None]) ** 2).sum(-1), axis=1)]
    return (f"random set {i}: 12 Gaussian points (sd 3) in R^4 vs the same points pulled 90% of "
            "the way to the nearest of 3 of them: clustered must score lower",
            nearest + 0.1 * (X - nearest), X)


def _base_sets(rng) -> list[tuple[str, np.ndarray]]:
    return [
        ("8 evenly spaced unit vectors in R^2", _even_circle(8)),
        ("20 Gaussian points in R^3", rng.normal(size=(20, 3))),
        ("6 uniform points in [0, 1]^2 + (1, 1)", rng.uniform(size=(6, 2)) + 1.0),
        ("30 Gaussian points in R^8", rng.normal(size=(30, 8))),
        ("12 points of 3 tight clusters in R^4", np.repeat(3 * rng.normal(size=(3, 4)), 4, axis=0)
         + 0.05 * rng.normal(size=(12, 4))),
    ]


def _additions(X: np.ndarray, rng) -> list[tuple[str, np.ndarray]]:
    mid = 0.5 * (X[0] + X[1])
    return [
        ("a duplicate of point 0", X[0]),
        ("a point 1e-3 from point 0", X[0] + 1e-3 * rng.normal(size=X.shape[1])),
        ("the midpoint of points 0 and 1", mid),
        ("the centroid plus 1e-2 (a typical, central point)", X.mean(axis=0) + 1e-2),
        ("a far point (10 x a random direction)", 10 * rng.normal(size=X.shape[1])),
    ]


def _crossing_pair() -> tuple[str, np.ndarray, np.ndarray]:
    # A: two tight clusters far apart (diverse at coarse scales); B: a spread-out segment.
    zigzag = 0.02 * (-1.0) ** np.arange(10)
    cluster = np.c_[np.linspace(-0.05, 0.05, 5), zigzag[:5]]
    A = np.r_[cluster + [1.0, 1.0], cluster + [11.0, 1.0]]
    B = np.c_[np.linspace(4.5, 7.5, 10), 1.0 + zigzag]
    return ("A = 2 clusters of 5 points (width 0.1) 10 apart, B = 10 points spaced 1/3 along a "
            "segment of length 3 (in R^2, y zigzag +-0.02)", A, B)


# --- checks -------------------------------------------------------------------------------------

def _fmt(values) -> str:
    return ", ".join(f"{v:.6g}" for v in values)


def _less(a: float, b: float) -> bool:
    return a < b - RTOL * max(abs(a), abs(b), 1.0)


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(a), abs(b), 1.0)


def _evaluate(measure: AxiomMeasure, sets):
    try:
        return measure.score(sets), None
    except (ValueError, RuntimeError) as err:
        return None, str(err)


def check_effective_size(measure: AxiomMeasure, seed: int = 0) -> AxiomResult:
    cases = _effective_size_cases(np.random.default_rng(seed))
    for i, (text, low, high) in enumerate(cases, 1):
        values, err = _evaluate(measure, [low, high])
        if err is not None:
            return AxiomResult(measure.name, "effective size", False,
                               f"{text}: undefined ({err})", i)
        if not _less(values[0], values[1]):
            return AxiomResult(measure.name, "effective size", False,
                               f"{text}: scores {_fmt(values)} (first not lower)", i,
                               {"values": values})
    return AxiomResult(measure.name, "effective size", True,
                       f"no counterexample in {len(cases)} cases", len(cases))


def check_monotonicity(measure: AxiomMeasure, seed: int = 0) -> AxiomResult:
    rng = np.random.default_rng(seed + 1)
    tried = 0
    for text, X in _base_sets(rng):
        for add_text, x in _additions(X, rng):
            tried += 1
            values, err = _evaluate(measure, [X, np.vstack([X, x])])
            if err is not None:
                return AxiomResult(measure.name, "monotonicity", False,
                                   f"{text} plus {add_text}: undefined ({err})", tried)
            if _less(values[1], values[0]):
                return AxiomResult(measure.name, "monotonicity", False,
                                   f"{text} plus {add_text}: score drops {_fmt(values)}", tried,
                                   {"values": values})
    return AxiomResult(measure.name, "monotonicity", True,
                       f"no counterexample in {tried} additions", tried)


def check_twin_property(measure: AxiomMeasure, seed: int = 0) -> AxiomResult:
    rng = np.random.default_rng(seed + 2)
    tried = 0
    for text, X in _base_sets(rng):
        for j in (0, len(X) - 1):
            tried += 1
            values, err = _evaluate(measure, [X, np.vstack([X, X[j]])])
            if err is not None:
                return AxiomResult(measure.name, "twin property", False,
                                   f"{text} plus a copy of point {j}: undefined ({err})", tried)
            if not _equal(values[0], values[1]):
                return AxiomResult(measure.name, "twin property", False,
                                   f"{text} plus a copy of point {j}: score changes "
                                   f"{_fmt(values)}", tried, {"values": values})
    return AxiomResult(measure.name, "twin property", True,
                       f"no counterexample in {tried} duplications", tried)


def magnitude_crossing(A: np.ndarray, B: np.ndarray, t_cut: float, n_ts: int = 400):
    """Scales in (0, t_cut] where Mag_A − Mag_B changes sign (Euclidean distances)."""
    ts = np.linspace(t_cut / n_ts, t_cut, n_ts)
    diff = (magnitude_function(pairwise_distances(A), ts)
            - magnitude_function(pairwise_distances(B), ts))
    change = np.nonzero(np.sign(diff[:-1]) * np.sign(diff[1:]) < 0)[0]
    return ts[change], diff


def check_multi_scale(measure: AxiomMeasure, seed: int = 0) -> AxiomResult:
    text, A, B = _crossing_pair()
    D_A, D_B = pairwise_distances(A), pairwise_distances(B)
    t_cut = measure_sets([D_A, D_B], areas=False).t_cut  # the median of the two scales
    crossings, diff = magnitude_crossing(A, B, t_cut)
    if crossings.size == 0:
        raise RuntimeError("the crossing pair does not cross: fix _crossing_pair")
    regime = (f"Mag_A > Mag_B for t < {crossings[0]:.3g}, Mag_A < Mag_B after (t_cut = "
              f"{t_cut:.3g})" if diff[0] > 0 else
              f"Mag_A < Mag_B for t < {crossings[0]:.3g}, Mag_A > Mag_B after")
    values, err = _evaluate(measure, [A, B])
    shown = f"scores A, B: {_fmt(values)}" if values is not None else f"undefined ({err})"
    if measure.multi_scale:
        return AxiomResult(measure.name, "multi-scale", True,
                           f"by definition: {measure.scale_note}; {text}: {regime}, both "
                           f"regimes lie in the integration range; {shown}", 1)
    return AxiomResult(measure.name, "multi-scale", False,
                       f"{text}: {regime}; the measure has {measure.scale_note} and ranks the "
                       f"pair one way only ({shown})", 1)


CHECKS = {
    "effective size": check_effective_size,
    "monotonicity": check_monotonicity,
    "twin property": check_twin_property,
    "multi-scale": check_multi_scale,
}


def check_axioms(measures: Sequence[AxiomMeasure] | None = None, seed: int = 0,
                 progress: Callable | None = None) -> list[AxiomResult]:
    """Every axiom for every measure, in the order of ``AXIOMS`` within each measure.

    ``progress`` (optional) wraps the list of (measure, axiom) pairs, e.g. ``tqdm``.
    """
    measures = default_measures() if measures is None else list(measures)
    pairs = [(m, a) for m in measures for a in AXIOMS]
    if progress is not None:
        pairs = progress(pairs)
    return [CHECKS[a](m, seed) for m, a in pairs]


def results_table(results: Sequence[AxiomResult]):
    """A pandas DataFrame with columns measure, axiom, result, cases_tried, counterexample."""
    import pandas as pd

    return pd.DataFrame([
        {"measure": r.measure, "axiom": r.axiom, "result": r.verdict,
         "cases_tried": r.cases_tried, "counterexample": r.counterexample}
        for r in results
    ])


def summary_table(results: Sequence[AxiomResult]):
    """Measures x axioms with holds / fails, as a pandas DataFrame."""
    table = results_table(results)
    wide = table.pivot(index="measure", columns="axiom", values="result")
    order = list(dict.fromkeys(table["measure"]))
    return wide.loc[order, list(AXIOMS)]
