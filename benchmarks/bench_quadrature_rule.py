"""MagArea's quadrature rules compared: factorisations and true error (``method="chebyshev"``,
alias ``cc25``, ``method="hermite"`` and the default, ``method="hermite_log"``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_quadrature_rule.py   # writes the CSV below
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_quadrature_rule.py --holdout
    python benchmarks/bench_quadrature_rule.py --max-n 3000 --out other.csv

For Euclidean, cosine and cityblock clouds of 50 to 10,000 points (clustered: ``bench_gpu.py``'s
ten Gaussian clusters; uniform: the unit cube, or standard normal points for cosine), each at
several convergence targets, on the dense NumPy engine:

* the convergence-scale search (t_cut = t_conv, as in the default protocol), its solves;
* the same search started from the first-order bound's root (``_search.first_order_scale``,
  which the engine uses from ``_search.FIRST_ORDER_FROM`` distinct points on), its solves;
* ``cc25`` (Clenshaw–Curtis, 13 then 25 scales: ``chebyshev``), ``hermite`` (values and
  derivatives on the 13 scales, ``chebyshev`` where its estimate exceeds rtol) and
  ``hermite_log`` (values and derivatives on 15 scales stretched towards 0, then 17, 22 and
  29 where the estimate exceeds rtol, then Clenshaw–Curtis in the stretched variable), each on a
  fresh space after its own
  search: the scales each solved (a solve is one factorisation or one conjugate-gradient solve;
  t_cut, the search's answer, is solved once, by the search where it ended on a solve there,
  else by the rule), and with the search's (``*_total_solves``: t_conv + MagArea);
* the fixed rules alone from the same values: Clenshaw–Curtis and Hermite on 13 scales,
  ``hermite_log`` on its 15 and on the 17 and 22 of its next two stages, with their estimated
  errors;
* the true relative errors against a reference: ``chebyshev`` at rtol 1e-10 (49 scales and
  bisection where needed) on the first space.

``hermite_log``'s stretch rate α (``_chebyshev._stretch_rate``) was chosen on the clouds of
:data:`CLOUDS` up to 1,500 points. ``--holdout`` runs :data:`HOLDOUT` instead, clouds that
took no part in that choice (other seeds, sizes, dimensions, cluster counts and spreads): the
out-of-sample check for α. (The points 1, 5, ..., 25 of the rule's second and third stages and
the factor on their error estimates are chosen from both sets' values; the study's alone pick
the same points. The second stage's pair, 1 and 17, was chosen on :data:`CLOUDS` up to 2,000
points (``bench_log_hermite_pair.py``): ``--holdout`` is its out-of-sample check.)

Counts and errors are deterministic; no times are recorded (the machine is shared). Output:
``benchmarks/results/quadrature_rule.csv`` (``--holdout``: ``quadrature_rule_holdout.csv``),
its header naming machine, versions, command, date, and beside it ``*_summary.csv``: per rule,
the most solves for MagArea and for t_conv + MagArea, the cases in at most 13 solves, the
worst true error (from the rows above).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
from pathlib import Path

import bench_gpu
import numpy as np
import scipy
from record import write_aside

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _chebyshev, _quadrature, _search
from diversity_core.magnitude._common import DEFAULT_MAX_ITER, DEFAULT_T_CONV_RTOL

RTOL = 1e-6  # the default MagArea tolerance
REFERENCE_RTOL = 1e-10
OUT = Path(__file__).parent / "results" / "quadrature_rule.csv"
HOLDOUT_OUT = OUT.with_name("quadrature_rule_holdout.csv")
# (metric, kind, n, d, targets). Kinds: ``clustered``, bench_gpu's ten Gaussian clusters
# (centres of standard deviation 3); ``clustered_k<K>_c<C>``, K clusters, centres of standard
# deviation C, unit-variance points about them; ``uniform``, see :func:`points`.
CLOUDS = [
    ("euclidean", "clustered", 50, 10, (0.5, 0.95, 0.99)),
    ("euclidean", "clustered", 300, 10, (0.5, 0.95, 0.99)),
    ("euclidean", "clustered", 800, 384, (0.5, 0.95, 0.99)),
    ("euclidean", "clustered", 1500, 10, (0.95, 0.99)),
    ("euclidean", "clustered", 3000, 64, (0.95,)),
    ("euclidean", "uniform", 50, 2, (0.5, 0.95, 0.99)),
    ("euclidean", "uniform", 300, 3, (0.5, 0.95, 0.99)),
    ("euclidean", "uniform", 1500, 16, (0.95, 0.99)),
    ("cosine", "clustered", 300, 32, (0.5, 0.95, 0.99)),
    ("cosine", "clustered", 1500, 384, (0.95, 0.99)),
    ("cosine", "uniform", 50, 16, (0.5, 0.95, 0.99)),
    ("cosine", "uniform", 1000, 8, (0.5, 0.95, 0.99)),
    ("cityblock", "clustered", 50, 5, (0.5, 0.95, 0.99)),
    ("cityblock", "clustered", 1000, 20, (0.5, 0.95, 0.99)),
    ("cityblock", "uniform", 300, 5, (0.5, 0.95, 0.99)),
    ("cityblock", "uniform", 1500, 8, (0.95, 0.99)),
    ("euclidean", "clustered", 10_000, 64, (0.95,)),
    # More clouds and targets, drawn after the rule's error estimate was chosen on the above.
    ("euclidean", "clustered", 200, 5, (0.5, 0.9, 0.95, 0.99)),
    ("euclidean", "uniform", 400, 6, (0.7, 0.95, 0.99)),
    ("cosine", "clustered", 400, 64, (0.5, 0.9, 0.95)),
    ("cosine", "uniform", 300, 4, (0.5, 0.95, 0.99)),
    ("cityblock", "clustered", 500, 10, (0.5, 0.95, 0.99)),
    ("cityblock", "uniform", 200, 3, (0.5, 0.95, 0.99)),
    ("euclidean", "clustered", 700, 128, (0.6, 0.95, 0.98)),
]
# The out-of-sample clouds (seeds from HOLDOUT_SEED on).
HOLDOUT = [
    ("euclidean", "clustered_k3_c2", 120, 7, (0.5, 0.9, 0.95, 0.99)),
    ("euclidean", "clustered_k25_c4", 650, 24, (0.5, 0.9, 0.95, 0.99)),
    ("euclidean", "uniform", 2000, 12, (0.9, 0.95, 0.99)),
    ("euclidean", "clustered_k6_c1.5", 5000, 48, (0.95,)),
    ("cosine", "clustered_k4_c2.5", 120, 20, (0.5, 0.9, 0.95, 0.99)),
    ("cosine", "uniform", 650, 12, (0.5, 0.9, 0.95, 0.99)),
    ("cosine", "clustered_k15_c1", 2000, 96, (0.9, 0.95, 0.99)),
    ("cityblock", "uniform", 120, 9, (0.5, 0.9, 0.95, 0.99)),
    ("cityblock", "clustered_k8_c5", 650, 16, (0.5, 0.9, 0.95, 0.99)),
    ("cityblock", "clustered_k20_c2", 2000, 30, (0.9, 0.95, 0.99)),
    ("euclidean", "clustered", 2000, 200, (0.5, 0.99)),
    ("cosine", "clustered_k6_c3", 5000, 32, (0.95,)),
]
HOLDOUT_SEED = 1000
COLUMNS = ["metric", "n", "d", "kind", "target", "t_conv", "search_solves",
           "search_solves_first_order",
           "cc25_solves", "cc25_total_solves", "cc25_rel_error", "cc25_rel_estimate",
           "hermite_solves", "hermite_total_solves", "hermite_rel_error", "hermite_fell_back",
           "hermite_log_alpha", "hermite_log_solves", "hermite_log_total_solves",
           "hermite_log_rel_error", "hermite_log_fell_back",
           "cc13_rel_error", "cc13_rel_estimate", "hermite13_rel_error",
           "hermite13_rel_estimate", "hermite_log15_rel_error", "hermite_log15_rel_estimate",
           "hermite_log17_rel_error", "hermite_log17_rel_estimate",
           "hermite_log22_rel_error", "hermite_log22_rel_estimate"]
RULES = ("cc25", "hermite", "hermite_log")
GOAL_SOLVES = 13  # MagArea's budget of solves after the convergence-scale search


def points(kind: str, metric: str, n: int, d: int, seed: int) -> np.ndarray:
    if kind == "clustered":
        return bench_gpu.cloud(n, d, seed)
    rng = np.random.default_rng(seed)
    if kind.startswith("clustered_k"):
        k, spread = kind.removeprefix("clustered_k").split("_c")
        centres = rng.normal(scale=float(spread), size=(int(k), d))
        return centres[rng.integers(int(k), size=n)] + rng.normal(size=(n, d))
    return rng.normal(size=(n, d)) if metric == "cosine" else rng.uniform(size=(n, d))


def solved_scales(space: MagnitudeSpace) -> set[float]:
    """The distinct positive scales the space has solved (each is remembered once solved)."""
    return set(space._cache) - {0.0}  # Mag(0) = 1 is known


def solves(space: MagnitudeSpace) -> int:
    """How many distinct positive scales the space has solved."""
    return len(solved_scales(space))


def first_order_search(D: np.ndarray, target: float) -> int:
    """Solves of the convergence-scale search started from the first-order bound's root at
    any size (the engine does so from ``FIRST_ORDER_FROM`` distinct points on)."""
    space = MagnitudeSpace(D)
    goal = target * space.n_unique
    t0 = _search.first_order_scale(space.pair_sums, space.n_unique - goal, space.initial_scale())
    search = _search._ScaleSearch(space.n_unique, goal, t0, rtol=DEFAULT_T_CONV_RTOL,
                                  max_iter=DEFAULT_MAX_ITER)
    while search.step(*space.magnitude_and_derivative(search.t)) is None:
        pass
    return solves(space)


def measure(D: np.ndarray, target: float) -> dict:
    row = {"search_solves_first_order": first_order_search(D, target)}
    spaces = {}
    for rule in RULES:
        space = spaces[rule] = MagnitudeSpace(D)
        t_conv = space.convergence_scale(target)
        search = solves(space)
        assert row.setdefault("t_conv", t_conv) == t_conv
        row["search_solves"] = search
        row[rule] = space.mag_area(t_conv, method=rule, rtol=RTOL)  # the engine's own path
        row[f"{rule}_solves"] = solves(space) - search
        row[f"{rule}_total_solves"] = solves(space)
    first, second, third = (spaces[rule] for rule in RULES)
    # cc25's error estimate: the same rule again, on the same (distinct) scales.
    _, cc25_error = _quadrature._integrate(
        first.magnitude, t_conv, method="cc25", rtol=RTOL, n_ts=2, return_error=True)
    # The fixed rules from the values the Hermite rules used (all known: nothing solved).
    before = solves(second), solves(third)
    h13, h13_error = _quadrature._hermite_panel(second._known_slope, 1.0, t_conv)
    ts = _chebyshev._cc_nodes(0.0, t_conv, _quadrature._HERMITE_LEVEL)
    c13, c13_error = _chebyshev._cc_rule(second.magnitude_function(ts), 0.0, t_conv)
    alpha = _chebyshev._stretch_rate(t_conv * third.diameter)
    h15, h15_error = _quadrature._log_hermite(third.magnitude, third._known_slope, t_conv,
                                              math.inf, alpha)
    assert (solves(second), solves(third)) == before
    # hermite_log's second and third stages alone (their 2 and 5 scales solved now where the
    # rule stopped before them).
    stages = _quadrature._log_hermite_stages(third.magnitude, third._known_slope, t_conv, alpha,
                                             np.full(_quadrature._LOG_HERMITE_LEVELS[1] + 1,
                                                     np.nan))
    next(stages)
    h17, h17_error = next(stages)
    h22, h22_error = next(stages)

    reference = first.mag_area(t_conv, method="chebyshev", rtol=REFERENCE_RTOL)

    def rel(x):
        return abs(float(x) - reference) / reference

    return {**row, "cc25_rel_error": rel(row["cc25"]),
            "cc25_rel_estimate": cc25_error / reference,
            "hermite_rel_error": rel(row["hermite"]),
            "hermite_fell_back": int(h13_error > RTOL * abs(h13)),
            "hermite_log_alpha": alpha, "hermite_log_rel_error": rel(row["hermite_log"]),
            "hermite_log_fell_back": int(h15_error > RTOL * abs(h15)),
            "cc13_rel_error": rel(c13), "cc13_rel_estimate": float(c13_error) / reference,
            "hermite13_rel_error": rel(h13), "hermite13_rel_estimate": h13_error / reference,
            "hermite_log15_rel_error": rel(h15),
            "hermite_log15_rel_estimate": h15_error / reference,
            "hermite_log17_rel_error": rel(h17),
            "hermite_log17_rel_estimate": h17_error / reference,
            "hermite_log22_rel_error": rel(h22),
            "hermite_log22_rel_estimate": h22_error / reference}


def header(command: str, max_n: int | None, holdout: bool) -> list[str]:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return [f"# machine: {cpu}, {os.cpu_count()} cores; {platform.platform()}",
            f"# versions: python {platform.python_version()}, numpy {np.__version__}, "
            f"scipy {scipy.__version__}",
            f"# command: {command}",
            f"# date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"# rtol {RTOL:g}; reference: chebyshev at rtol {REFERENCE_RTOL:g}; solves: distinct "
            "scales solved (factorisations or conjugate-gradient solves)",
            ("# clouds: HOLDOUT, seeds from 1000 (out of sample: alpha chosen on CLOUDS)"
             if holdout else "# clouds: CLOUDS, seed = place in the list"),
            "# sizes run: " + ", ".join(str(n) for n in
                                         sorted({c[2] for _, c in clouds(max_n, holdout)}))
            + (f" (--max-n {max_n}; larger clouds left out)" if max_n else "")]


def clouds(max_n: int | None, holdout: bool = False):
    """(seed, cloud) of the study (``holdout``: of the holdout) up to ``max_n`` points; the
    seed is the cloud's place in :data:`CLOUDS` (in :data:`HOLDOUT`, plus
    :data:`HOLDOUT_SEED`), whichever are run."""
    first, listed = (HOLDOUT_SEED, HOLDOUT) if holdout else (0, CLOUDS)
    return [(first + i, c) for i, c in enumerate(listed) if max_n is None or c[2] <= max_n]


def reproducing_command(script: str, *options: str) -> str:
    """The line that reproduces a run of ``benchmarks/<script>``: the BLAS thread count where
    one is set, then the script and ``options`` (each empty or starting with a space)."""
    threads = os.environ.get("OPENBLAS_NUM_THREADS")
    return ((f"OPENBLAS_NUM_THREADS={threads} " if threads else "")
            + f"python benchmarks/{script}" + "".join(options))


def cloud_arguments(argv, description: str, script: str, outputs: tuple[Path, Path],
                    max_n: int | None = None, more: tuple[tuple[str, dict], ...] = ()):
    """The command line of a study over :data:`CLOUDS` (``--holdout``: :data:`HOLDOUT`):
    ``(args, out, command)``, ``outputs`` the default files of the two, ``max_n`` the default
    of ``--max-n``, ``command`` the line that reproduces the run (with the BLAS thread count
    where one is set); ``more``: further options, each ``(flag, add_argument's keywords)``,
    in the command where given another value than their default."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=None,
                        help=f"default: {outputs[0].name} (--holdout: {outputs[1].name}) in "
                             f"{outputs[0].parent}")
    parser.add_argument("--max-n", type=int, default=max_n,
                        help="run only the clouds of at most this many points"
                             + (f" (default {max_n})" if max_n else ""))
    parser.add_argument("--holdout", action="store_true",
                        help="run the holdout clouds (HOLDOUT) instead of the study's")
    for flag, options in more:
        parser.add_argument(flag, **options)
    args = parser.parse_args(argv)
    default = outputs[1] if args.holdout else outputs[0]
    out = args.out or default
    command = reproducing_command(script, " --holdout" if args.holdout else "",
                                  f" --max-n {args.max_n}" if args.max_n != max_n else "",
                                  f" --out {out}" if out != default else "")
    for flag, options in more:
        value = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if value != options.get("default"):
            command += f" {flag} {value}"
    return args, out, command


def stretched_grid(space: MagnitudeSpace, t_cut: float, alpha: float, level: int):
    """``(unit, dunit, s)``: g / t_cut and its s-derivative (``_quadrature._stretched_data``, as
    ``hermite_log`` forms them) at the ``level`` + 1 Chebyshev–Lobatto points ``s`` of [0, 1]
    under the stretch of rate ``alpha``, from Mag and dMag/dt solved by ``space`` to full
    accuracy at their scales (t_cut last; Mag(0) = 1, whose slope the rule does not use)."""
    s = _chebyshev._cc_nodes(0.0, 1.0, level)
    t = _chebyshev._log_stretch(s, t_cut, alpha)[0]
    _, du, ddu = _chebyshev._log_stretch(s, 1.0, alpha)
    mag, dmag = np.ones(level + 1), np.zeros(level + 1)
    for j in range(1, level + 1):
        mag[j], dmag[j] = space.magnitude_and_derivative(t_cut if j == level else float(t[j]))
    return (*_quadrature._stretched_data(mag, dmag, t_cut, du, ddu), s)


def both_sets_arguments(argv, description: str, script: str, out: Path,
                        max_n: int) -> tuple[argparse.Namespace, str]:
    """The command line of a study over both :data:`CLOUDS` and :data:`HOLDOUT` (``--max-n``,
    default ``max_n``; ``--out``, default ``out``): ``(args, command)``, ``command`` the line
    that reproduces the run (with the BLAS thread count where one is set)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--max-n", type=int, default=max_n,
                        help=f"run only the clouds of at most this many points (default {max_n})")
    parser.add_argument("--out", type=Path, default=out, help=f"default: {out.name} in "
                                                              f"{out.parent}")
    args = parser.parse_args(argv)
    return args, reproducing_command(script,
                                     f" --max-n {args.max_n}" if args.max_n != max_n else "",
                                     f" --out {args.out}" if args.out != out else "")


def both_sets(max_n: int):
    """``(set, cloud, D, targets)`` for every cloud of :data:`CLOUDS` (set ``"study"``), then
    of :data:`HOLDOUT` (``"holdout"``), up to ``max_n`` points: ``cloud`` its description
    (metric, n, d, kind), ``D`` its distance matrix."""
    for which, holdout in (("study", False), ("holdout", True)):
        for seed, (metric, kind, n, d, targets) in clouds(max_n, holdout):
            D = dc.pairwise_distances(points(kind, metric, n, d, seed), metric)
            yield which, {"metric": metric, "n": n, "d": d, "kind": kind}, D, targets


def cloud_rows(chosen, measure, columns: list[str]) -> list[dict]:
    """One row per cloud of ``chosen`` (:func:`clouds`) and target: the cloud's description
    and ``measure(D, target)``'s columns, each row printed as it is made (``columns``)."""
    rows = []
    for seed, (metric, kind, n, d, targets) in chosen:
        D = dc.pairwise_distances(points(kind, metric, n, d, seed), metric)
        for target in targets:
            rows.append({"metric": metric, "n": n, "d": d, "kind": kind, "target": target,
                         **measure(D, target)})
            print(",".join(str(rows[-1][c]) for c in columns), flush=True)
    return rows


def main(argv=None) -> None:
    args, out, command = cloud_arguments(argv, __doc__.split("\n")[0],
                                         "bench_quadrature_rule.py", (OUT, HOLDOUT_OUT))
    lines = header(command, args.max_n, args.holdout)
    lines.append(",".join(COLUMNS))
    rows = []
    for seed, (metric, kind, n, d, targets) in clouds(args.max_n, args.holdout):
        D = dc.pairwise_distances(points(kind, metric, n, d, seed), metric)
        for target in targets:
            row = {"metric": metric, "n": n, "d": d, "kind": kind, "target": target,
                   **measure(D, target)}
            rows.append(row)
            lines.append(",".join(f"{row[c]:.3g}" if isinstance(row[c], float)
                                  and c not in ("target", "t_conv", "hermite_log_alpha")
                                  else str(row[c])
                                  for c in COLUMNS))
            print(lines[-1], flush=True)
    write_aside(out, "\n".join(lines) + "\n")
    write_aside(out.with_name(out.stem + "_summary.csv"),
                "\n".join(lines[:-len(rows) - 1] + summary(rows)) + "\n")


def summary(rows: list[dict]) -> list[str]:
    """Per rule: cases, the most solves for MagArea and for t_conv + MagArea, the cases whose
    MagArea took at most ``GOAL_SOLVES``, and the worst true relative error."""
    out = ["rule,cases,max_solves,max_total_solves,cases_within_13,worst_rel_error"]
    for rule in RULES:
        solved = [r[f"{rule}_solves"] for r in rows]
        out.append(f"{rule},{len(rows)},{max(solved)},"
                   f"{max(r[f'{rule}_total_solves'] for r in rows)},"
                   f"{sum(k <= GOAL_SOLVES for k in solved)},"
                   f"{max(r[f'{rule}_rel_error'] for r in rows):.3g}")
    return out


if __name__ == "__main__":
    main()
