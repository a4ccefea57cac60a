"""``hermite_log``'s first stage against its stretch rate α: how far a better α could go.

    OPENBLAS_NUM_THREADS=2 python benchmarks/bench_log_hermite_alpha.py   # writes the CSVs below
    python benchmarks/bench_log_hermite_alpha.py --max-n 300 --out other.csv

``hermite_log`` ends after 13 solves where the error estimate of its first stage (values and
derivatives at the 15 Chebyshev–Lobatto points of s, t = t_cut (e^{αs} − 1) / (e^α − 1)) meets
rtol (1e-6), and goes on to 15, 20 or more solves where it does not. Whether a case can end at
13 solves depends on α (``_chebyshev._stretch_rate``) and on how far the estimate exceeds the
true error. For the clouds of ``bench_quadrature_rule.py`` (the study's and the holdout's) up to
``--max-n`` points, each at its targets (t_cut = t_conv): a reference (``chebyshev`` at rtol
1e-10), and the first stage at the engine's α and at every α of :data:`ALPHAS`, each from Mag and
dMag/dt solved by a Cholesky factor at its 13 scales (exact to round-off, on every path), its
true relative error and its estimated one (``_quadrature._stretched_rule``, as the engine forms
it). ``path`` is the path the engine takes for the cloud (``cg``: conjugate gradients, from
``_solver._CG_MIN_POINTS`` distinct points on).

Per case (``log_hermite_alpha.csv``): the engine's α, its error and estimate, and their ratio;
the α of the grid with the least true error, its error and estimate; the least estimate over the
grid; the grid's α whose estimate meets rtol. Per set and path (``*_summary.csv``): the cases,
those the engine's α ends at 13 solves, those some α of the grid ends there (no rule for α with
this estimate ends more), those whose least true error over the grid exceeds rtol (no α of the
grid and no estimate ends them at 13 solves within rtol), and the least and median ratio of
estimate to true error at the engine's α. Deterministic (no times).
"""

from __future__ import annotations

import bench_quadrature_rule as study
import numpy as np
from record import load_average, write_csv

from diversity_core.magnitude import MagnitudeSpace, _chebyshev, _quadrature, _solver

OUT = study.OUT.with_name("log_hermite_alpha.csv")
MAX_N = 5000
ALPHAS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0)
LEVEL = _quadrature._LOG_HERMITE_LEVELS[0]  # the first stage's 15 points of s
COLUMNS = ["set", "metric", "n", "d", "kind", "target", "path", "t_cut", "engine_alpha",
           "engine_rel_error", "engine_rel_estimate", "engine_estimate_over_error",
           "best_alpha", "best_rel_error", "best_rel_estimate", "least_rel_estimate",
           "alphas_within_rtol"]
SUMMARY = ["set", "path", "cases", "engine_ends_at_13", "some_alpha_ends_at_13",
           "beyond_rtol_at_every_alpha", "least_estimate_over_error",
           "median_estimate_over_error"]


def first_stage(space: MagnitudeSpace, t_cut: float, alpha: float,
                reference: float) -> tuple[float, float]:
    """(true relative error, estimated relative error) of ``hermite_log``'s first stage at
    ``alpha``, from exact Mag and dMag/dt at its scales."""
    unit, dunit, s = study.stretched_grid(space, t_cut, alpha, LEVEL)
    estimate, error = _quadrature._stretched_rule(unit, dunit, s, list(range(LEVEL + 1)))
    estimate, error = t_cut * float(estimate), t_cut * float(error)
    return abs(estimate - reference) / reference, error / abs(estimate)


def measure(D: np.ndarray, target: float) -> dict:
    """One case's columns (see the module docstring)."""
    space = MagnitudeSpace(D, solver="direct")
    path = "cg" if space.n_unique >= _solver._CG_MIN_POINTS else "cholesky"
    t_cut = space.convergence_scale(target)
    reference = space.mag_area(t_cut, method="chebyshev", rtol=study.REFERENCE_RTOL)
    engine_alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    grid = {alpha: first_stage(space, t_cut, alpha, reference) for alpha in ALPHAS}
    # The engine's α is a grid point where it is clamped to [0.25, 3]: solved once.
    true, estimate = grid.get(engine_alpha) or first_stage(space, t_cut, engine_alpha,
                                                           reference)
    best = min(grid, key=lambda alpha: grid[alpha][0])
    return {"path": path, "t_cut": t_cut, "engine_alpha": round(engine_alpha, 3),
            "engine_rel_error": digits(true), "engine_rel_estimate": digits(estimate),
            "engine_estimate_over_error": digits(estimate / max(true, 1e-300)),
            "best_alpha": best, "best_rel_error": digits(grid[best][0]),
            "best_rel_estimate": digits(grid[best][1]),
            "least_rel_estimate": digits(min(e for _, e in grid.values())),
            "alphas_within_rtol": " ".join(f"{a:g}" for a, (_, e) in grid.items()
                                           if e <= study.RTOL)}


def digits(x: float) -> float:
    """``x`` to the three significant digits the table records (its summary counts those)."""
    return float(f"{x:.3g}")


def summary(rows: list[dict]) -> list[dict]:
    """Per set and path: the counts and ratios of :data:`SUMMARY`."""
    out = []
    for which in ("study", "holdout"):
        for path in ("cholesky", "cg"):
            mine = [r for r in rows if r["set"] == which and r["path"] == path]
            if not mine:
                continue
            ratios = [r["engine_estimate_over_error"] for r in mine]
            out.append({
                "set": which, "path": path, "cases": len(mine),
                "engine_ends_at_13": sum(r["engine_rel_estimate"] <= study.RTOL for r in mine),
                "some_alpha_ends_at_13": sum(bool(r["alphas_within_rtol"]) for r in mine),
                "beyond_rtol_at_every_alpha": sum(r["best_rel_error"] > study.RTOL
                                                  for r in mine),
                "least_estimate_over_error": f"{min(ratios):.3g}",
                "median_estimate_over_error": f"{float(np.median(ratios)):.3g}"})
    return out


def main(argv=None) -> None:
    args, command = study.both_sets_arguments(argv, __doc__.split("\n")[0],
                                              "bench_log_hermite_alpha.py", OUT, MAX_N)
    before = load_average()
    rows = []
    for which, cloud, D, targets in study.both_sets(args.max_n):
        for target in targets:
            rows.append({"set": which, **cloud, "target": target, **measure(D, target)})
            print(",".join(str(v) for v in rows[-1].values()), flush=True)
    load = (before, load_average())
    extra = (("rtol", f"{study.RTOL:g}; reference: chebyshev at rtol {study.REFERENCE_RTOL:g}"),
             ("alphas", " ".join(f"{a:g}" for a in ALPHAS)),
             ("clouds", f"CLOUDS and HOLDOUT of bench_quadrature_rule.py up to {args.max_n} "
                        "points"))
    write_csv(args.out, COLUMNS, rows, command=command, load=load, extra=extra)
    write_csv(args.out.with_name(args.out.stem + "_summary.csv"), SUMMARY, summary(rows),
              command=command, load=load, extra=extra)


if __name__ == "__main__":
    main()
