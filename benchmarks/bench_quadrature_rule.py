"""MagArea's quadrature rules compared: factorisations and true error (``method="hermite"``
beside the default ``method="chebyshev"``).

    python benchmarks/bench_quadrature_rule.py                 # writes the CSV below
    python benchmarks/bench_quadrature_rule.py --out other.csv

For Euclidean, cosine and cityblock clouds of 50 to 10,000 points (clustered: ``bench_gpu.py``'s
ten Gaussian clusters; uniform: the unit cube, or standard normal points for cosine), each at
several convergence targets, on the dense NumPy engine:

* the convergence-scale search (t_cut = t_conv, as in the default protocol), its solves;
* ``chebyshev`` (Clenshaw–Curtis, 13 then 25 scales: ``cc25``) and ``hermite`` (values and
  derivatives on the 13 scales, ``chebyshev`` where its estimate exceeds rtol), each on a fresh
  space after its own search: the scales each solved (a solve is one factorisation or one
  conjugate-gradient solve; the search's last scale is t_cut, solved once for both);
* the 13-scale rules alone from the same values: Clenshaw–Curtis (values only) and Hermite
  (values and derivatives), with their estimated errors;
* the true relative errors against a reference: ``chebyshev`` at rtol 1e-10 (49 scales and
  bisection where needed) on the first space.

Counts and errors are deterministic; no times are recorded (the machine is shared). Output:
``benchmarks/results/quadrature_rule.csv``, its header naming machine, versions, command, date.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from pathlib import Path

import bench_gpu
import numpy as np
import scipy

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _quadrature

RTOL = 1e-6  # the default MagArea tolerance
REFERENCE_RTOL = 1e-10
OUT = Path(__file__).parent / "results" / "quadrature_rule.csv"
# (metric, kind, n, d, targets)
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
COLUMNS = ["metric", "n", "d", "kind", "target", "t_conv", "search_solves",
           "cc25_solves", "cc25_rel_error", "cc25_rel_estimate",
           "hermite_solves", "hermite_rel_error", "hermite_fell_back",
           "cc13_rel_error", "cc13_rel_estimate", "hermite13_rel_error",
           "hermite13_rel_estimate"]


def points(kind: str, metric: str, n: int, d: int, seed: int) -> np.ndarray:
    if kind == "clustered":
        return bench_gpu.cloud(n, d, seed)
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) if metric == "cosine" else rng.uniform(size=(n, d))


def solves(space: MagnitudeSpace) -> int:
    """The distinct positive scales the space has solved (each is remembered once solved)."""
    return len(space._cache) - 1  # Mag(0) = 1 is known


def measure(D: np.ndarray, target: float) -> dict:
    first = MagnitudeSpace(D)
    t_conv = first.convergence_scale(target)
    search = solves(first)
    cc25 = first.mag_area(t_conv, method="chebyshev", rtol=RTOL)  # the engine's own path
    cc25_solves = solves(first) - search
    # Its error estimate: the same rule again, on the same (distinct) scales.
    _, cc25_error = _quadrature._integrate(
        first.magnitude, t_conv, method="chebyshev", rtol=RTOL, n_ts=2, return_error=True)

    second = MagnitudeSpace(D)
    assert second.convergence_scale(target) == t_conv
    hermite = second.mag_area(t_conv, method="hermite", rtol=RTOL)
    hermite_solves = solves(second) - search
    # The 13-scale rules from the values the Hermite rule used (all known: nothing solved).
    before = solves(second)
    h13, h13_error = _quadrature._hermite_panel(second._known_slope, 1.0, t_conv)
    ts = _quadrature._cc_nodes(0.0, t_conv, _quadrature._HERMITE_LEVEL)
    c13, c13_error = _quadrature._cc_rule(second.magnitude_function(ts), 0.0, t_conv)
    assert solves(second) == before

    reference = first.mag_area(t_conv, method="chebyshev", rtol=REFERENCE_RTOL)

    def rel(x):
        return abs(float(x) - reference) / reference

    return {"t_conv": t_conv, "search_solves": search, "cc25_solves": cc25_solves,
            "cc25_rel_error": rel(cc25), "cc25_rel_estimate": cc25_error / reference,
            "hermite_solves": hermite_solves, "hermite_rel_error": rel(hermite),
            "hermite_fell_back": int(h13_error > RTOL * abs(h13)),
            "cc13_rel_error": rel(c13), "cc13_rel_estimate": float(c13_error) / reference,
            "hermite13_rel_error": rel(h13), "hermite13_rel_estimate": h13_error / reference}


def header(command: str) -> list[str]:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return [f"# machine: {cpu}, {os.cpu_count()} cores; {platform.platform()}",
            f"# versions: python {platform.python_version()}, numpy {np.__version__}, "
            f"scipy {scipy.__version__}",
            f"# command: {command}",
            f"# date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"# rtol {RTOL:g}; reference: chebyshev at rtol {REFERENCE_RTOL:g}; solves: distinct "
            "scales solved (factorisations or conjugate-gradient solves)"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    lines = header("python benchmarks/bench_quadrature_rule.py"
                   + (f" --out {args.out}" if args.out != OUT else ""))
    lines.append(",".join(COLUMNS))
    for seed, (metric, kind, n, d, targets) in enumerate(CLOUDS):
        D = dc.pairwise_distances(points(kind, metric, n, d, seed), metric)
        for target in targets:
            row = {"metric": metric, "n": n, "d": d, "kind": kind, "target": target,
                   **measure(D, target)}
            lines.append(",".join(f"{row[c]:.3g}" if isinstance(row[c], float)
                                  and c not in ("target", "t_conv") else str(row[c])
                                  for c in COLUMNS))
            print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".csv.partial")
    partial.write_text("\n".join(lines) + "\n")
    os.replace(partial, args.out)


if __name__ == "__main__":
    main()
