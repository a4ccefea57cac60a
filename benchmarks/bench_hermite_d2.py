"""``hermite_d2`` against ``hermite_log`` and ``cc25`` through the engine: solves, true error and
time.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_hermite_d2.py   # writes the CSVs below
    python benchmarks/bench_hermite_d2.py --max-n 300 --batches 20x30 --out other.csv

For the clouds of ``bench_quadrature_rule.py`` up to 2,000 points (the same points and seeds),
at each target, each rule on a fresh dense space after its own convergence-scale search
(t_cut = t_conv): MagArea's solves (the distinct scales inside (0, t_conv) solved after the
search), its true relative error against ``chebyshev`` at rtol 1e-10, and its time, the
rules back to back, best of two; ``cc25`` (Clenshaw–Curtis on 13, then 25 scales) is the
rule the Hermite rules replace, and each one's time is also given as a ratio to its time.
``path`` says what solved the scales: ``cholesky`` below the conjugate-gradient size
(``_solver._CG_MIN_POINTS`` distinct points), where a solve is a factorisation and the second
derivative costs two triangular solves; ``cg`` from there on, where a solve is a
conjugate-gradient run whose iterations depend on its start (a scale between solved ones
starts from their solutions) and the second derivative costs a second one.

Then the batch, as ``bench_magnitude.py``'s batches run it (the reference-free protocol):
``convergence_scales`` of m sets of n points, their median as the shared t_cut, and
``mag_areas`` by each rule (``--batches``, default 200x300, 1000x10, 100x100; normal points in
384 dimensions, cosine distances), new data each repetition, the rules back to back, best of
three; on as many threads as BLAS may use (one under the command above).

Solves and errors are deterministic; times depend on the machine and its load (recorded in the
header). Output: ``benchmarks/results/hermite_d2.csv``, ``hermite_d2_batch.csv`` and
``hermite_d2_summary.csv`` (per path: cases, the most solves, the cases within rtol 1e-6 and
the worst true error of each rule, the median time ratios d2 / log, log / cc25 and
d2 / cc25).
"""

from __future__ import annotations

import time

import bench_quadrature_rule as study
import numpy as np
from record import load_average, write_csv

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, clear_cache, convergence_scales, mag_areas
from diversity_core.magnitude._solver import _CG_MIN_POINTS

RULES = ("cc25", "hermite_log", "hermite_d2")
# Time ratios: (column, numerator rule, denominator rule); the summary gives each one's median.
RATIOS = (("time_ratio", "hermite_d2", "hermite_log"),
          ("hermite_log_vs_cc25", "hermite_log", "cc25"),
          ("hermite_d2_vs_cc25", "hermite_d2", "cc25"))
RTOL = study.RTOL
OUT = study.OUT.with_name("hermite_d2.csv")
DEFAULT_MAX_N = 2000
BATCHES = "200x300,1000x10,100x100"
REPEATS = 2
BATCH_REPEATS = 3
COLUMNS = ["metric", "n", "d", "kind", "target", "path", "t_conv"] + [
    f"{rule}_{what}" for rule in RULES for what in ("solves", "rel_error", "seconds")] + [
    column for column, _, _ in RATIOS]


def time_ratios(best: dict) -> dict:
    """The :data:`RATIOS` of the rules' best times ``best`` (rule -> seconds)."""
    return {column: float(f"{best[top] / best[bottom]:.3g}") for column, top, bottom in RATIOS}


def one_rule(D: np.ndarray, target: float, rule: str) -> tuple[int, float, float]:
    """(MagArea's solves inside (0, t_conv) after the search, the area, its seconds) on a
    fresh space."""
    space = MagnitudeSpace(D)
    t_conv = space.convergence_scale(target)
    before = study.solved_scales(space)
    start = time.perf_counter()
    area = space.mag_area(t_conv, method=rule, rtol=RTOL)
    return (len(study.solved_scales(space) - before - {t_conv}), area,
            time.perf_counter() - start)


def measure(D: np.ndarray, target: float) -> dict:
    space = MagnitudeSpace(D)
    t_conv = space.convergence_scale(target)
    reference = space.mag_area(t_conv, method="chebyshev", rtol=study.REFERENCE_RTOL)
    row = {"t_conv": t_conv, "path": "cg" if space.n_unique >= _CG_MIN_POINTS else "cholesky"}
    best = {}
    for _ in range(REPEATS):
        for rule in RULES:
            solved, area, seconds = one_rule(D, target, rule)
            row[f"{rule}_solves"] = solved
            row[f"{rule}_rel_error"] = float(f"{abs(area - reference) / reference:.3g}")
            best[rule] = min(best.get(rule, np.inf), seconds)
    for rule in RULES:
        row[f"{rule}_seconds"] = float(f"{best[rule]:.3g}")
    return row | time_ratios(best)


def batch_times(batches: str) -> list[dict]:
    """t_conv of each set of each batch ``MxN`` of ``batches`` (comma-separated), their median
    as t_cut, and every set's MagArea by each rule (best of three, new data)."""
    rows = []
    for m, n in (map(int, b.split("x")) for b in batches.split(",")):
        best = dict.fromkeys(RULES, np.inf)
        for repeat in range(BATCH_REPEATS):
            rng = np.random.default_rng(repeat)
            sets = [dc.pairwise_distances(rng.normal(size=(n, 384)), "cosine")
                    for _ in range(m)]
            for rule in RULES:
                clear_cache()  # each rule prepares its batch itself
                start = time.perf_counter()
                t_cut = float(np.median(convergence_scales(sets)))
                mag_areas(sets, t_cut, method=rule, rtol=RTOL)
                best[rule] = min(best[rule], time.perf_counter() - start)
        rows.append({"sets": m, "points": n, **{f"{r}_seconds": float(f"{best[r]:.3g}")
                                                for r in RULES}, **time_ratios(best)})
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for path in ("cholesky", "cg"):
        mine = [r for r in rows if r["path"] == path]
        if not mine:
            continue
        line = {"path": path, "cases": len(mine)}
        for rule in RULES:
            line[f"{rule}_max_solves"] = max(r[f"{rule}_solves"] for r in mine)
            line[f"{rule}_within_rtol"] = sum(r[f"{rule}_rel_error"] <= RTOL for r in mine)
            line[f"{rule}_worst_rel_error"] = max(r[f"{rule}_rel_error"] for r in mine)
        for column, _, _ in RATIOS:
            line[f"median_{column}"] = float(f"{np.median([r[column] for r in mine]):.3g}")
        out.append(line)
    return out


def main(argv=None) -> None:
    batch_option = ("--batches", {
        "default": BATCHES, "help": f"MxN batches of m sets of n points (default {BATCHES})"})
    args, out, command = study.cloud_arguments(
        argv, __doc__.split("\n")[0], "bench_hermite_d2.py",
        (OUT, OUT.with_name("hermite_d2_holdout.csv")), max_n=DEFAULT_MAX_N,
        more=(batch_option,))
    chosen = study.clouds(args.max_n, args.holdout)
    extra = (("rtol", f"{RTOL:g}; reference: chebyshev at rtol {study.REFERENCE_RTOL:g}"),)
    before = load_average()
    rows = study.cloud_rows(chosen, measure, COLUMNS)
    batches = batch_times(args.batches)
    load = (before, load_average())
    write_csv(out, COLUMNS, rows, command=command, load=load, extra=extra)
    write_csv(out.with_name(out.stem + "_batch.csv"),
              ["sets", "points", *(f"{r}_seconds" for r in RULES),
               *(column for column, _, _ in RATIOS)], batches,
              command=command, load=load, extra=extra)
    lines = summary(rows)
    write_csv(out.with_name(out.stem + "_summary.csv"), list(lines[0]), lines, command=command,
              load=load, extra=extra)


if __name__ == "__main__":
    main()
