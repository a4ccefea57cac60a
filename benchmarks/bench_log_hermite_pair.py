"""``hermite_log``'s second stage: which two of the points 1, 5, ..., 25 to solve first.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_log_hermite_pair.py   # writes the CSV below
    python benchmarks/bench_log_hermite_pair.py --max-n 300 --out other.csv

Where the 15 points' error estimate exceeds rtol (1e-6), ``hermite_log`` goes on to more points
of the 29-point grid of s. The points 1, 5, ..., 25 (one in every other gap) cost 7 solves;
two of them first (its second stage) cost 2, and end the rule there where their estimate meets
rtol. For the clouds of ``bench_quadrature_rule.py`` up to 2,000 points, the study's and the
holdout's, each at its targets (t_cut = t_conv): g and g' at all 29 points to full accuracy
(``magnitude_and_derivative``), a reference (``chebyshev`` at rtol 1e-10), and for each of the
21 pairs the 17-point rule's estimate and its estimated error (``_quadrature._hermite_rule``,
counted four times as the engine counts it, ``_LOG_HERMITE_ERROR_FACTORS``).

Per pair and set of clouds: the cases, those past the 15 points, those the pair ends at 17
points, the worst true error among all cases whose estimate meets rtol at 17 points, and the
least ratio of estimate to true error over all cases (below 1: an estimate that undershot).
The engine's pair is the one with the most cases ended among those whose ratio stays at 1 or
more on the study's clouds; the holdout's columns are its out-of-sample check. Deterministic
(no times). Output: ``benchmarks/results/log_hermite_pair.csv``.
"""

from __future__ import annotations

import itertools

import bench_quadrature_rule as study
import numpy as np
from record import load_average, write_csv

from diversity_core.magnitude import MagnitudeSpace, _chebyshev, _quadrature

OUT = study.OUT.with_name("log_hermite_pair.csv")
MAX_N = 2000
FACTOR = 4.0
LEVEL = _quadrature._LOG_HERMITE_LEVELS[1]  # the 29-point grid of s
CANDIDATES = tuple(range(1, LEVEL, 4))  # 1, 5, ..., 25: the second and third stages' points
COLUMNS = ["pair"] + [f"{which}_{what}" for which in ("study", "holdout")
                      for what in ("cases", "past_15", "ended_at_17", "worst_rel_error_ended",
                                   "least_estimate_over_error")]


def values(D: np.ndarray, target: float) -> dict:
    """t_cut, the reference area and g / t_cut, its s-derivative at the 29 points of s
    (``_quadrature._stretched_data``, as the rule forms them)."""
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(target)
    reference = space.mag_area(t_cut, method="chebyshev", rtol=study.REFERENCE_RTOL)
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    unit, dunit, s = study.stretched_grid(space, t_cut, alpha, LEVEL)
    return {"t_cut": t_cut, "reference": reference, "unit": unit, "dunit": dunit, "s": s}


def rule(case: dict, known: list[int], factor: float) -> tuple[float, float]:
    """(true relative error, estimated relative error) of the Hermite rule on ``known``."""
    estimate, error = _quadrature._stretched_rule(case["unit"], case["dunit"], case["s"], known)
    estimate, error = case["t_cut"] * float(estimate), factor * case["t_cut"] * float(error)
    return abs(estimate - case["reference"]) / case["reference"], error / abs(estimate)


def pair_columns(cases: list[dict], pair: tuple[int, int], which: str) -> dict:
    first = [0, *_quadrature._LOG_HERMITE_STAGES[0]]
    past = [rule(c, first, 1.0)[1] > study.RTOL for c in cases]
    results = [rule(c, sorted(first + list(pair)), FACTOR) for c in cases]
    ended = [estimate <= study.RTOL for (_, estimate), on in zip(results, past, strict=True) if on]
    worst = max((true for true, estimate in results if estimate <= study.RTOL), default=0.0)
    least = min((estimate / max(true, 1e-300) for true, estimate in results), default=np.nan)
    return {f"{which}_cases": len(cases), f"{which}_past_15": sum(past),
            f"{which}_ended_at_17": sum(ended),
            f"{which}_worst_rel_error_ended": float(f"{worst:.3g}"),
            f"{which}_least_estimate_over_error": float(f"{least:.3g}")}


def main(argv=None) -> None:
    args, command = study.both_sets_arguments(argv, __doc__.split("\n")[0],
                                              "bench_log_hermite_pair.py", OUT, MAX_N)
    before = load_average()
    sets = {"study": [], "holdout": []}
    for which, cloud, D, targets in study.both_sets(args.max_n):
        sets[which].extend(values(D, target) for target in targets)
        print(f"{which}: {cloud['metric']} {cloud['kind']} {cloud['n']} x {cloud['d']} done",
              flush=True)
    rows = [{"pair": f"{a} {b}", **pair_columns(sets["study"], (a, b), "study"),
             **pair_columns(sets["holdout"], (a, b), "holdout")}
            for a, b in itertools.combinations(CANDIDATES, 2)]
    write_csv(args.out, COLUMNS, rows, command=command, load=(before, load_average()),
              extra=(("rtol", f"{study.RTOL:g}; reference: chebyshev at rtol "
                      f"{study.REFERENCE_RTOL:g}; estimates counted {FACTOR:g} times"),
                     ("clouds", f"CLOUDS and HOLDOUT of bench_quadrature_rule.py up to "
                                f"{args.max_n} points")))


if __name__ == "__main__":
    main()
