"""The convergence-scale search from its two first scales, on the same space.

    python benchmarks/bench_first_scale.py --points 10000 --path numpy
    python benchmarks/bench_first_scale.py --points 10000 --path torch      # CPU torch
    python benchmarks/bench_first_scale.py --points 50000 --path large

For ``bench_gpu.py``'s clustered cloud of N points × 64 (Euclidean; ``--dims``, ``--metric``,
``--uniform`` and ``--target`` vary it), the search is run twice on
fresh spaces of one path, each in a process of its own: from the first-order bound's root
(``bound``: what the engine does from ``_search.FIRST_ORDER_FROM`` points on) and from 5 /
median nearest-neighbour distance (``former``: below that). Each line: the solves the search
took, the passes over the distances for the bound, the search's seconds (passes included; the
space's preparation not), t_conv, and where each first scale lay relative to the former run's
t_conv. ``large`` also gives the float32 products and float64 refinement passes of its scales.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import bench_gpu
import numpy as np

from diversity_core.magnitude import LargeMagnitudeSpace, MagnitudeSpace, _search

PATHS = ("numpy", "torch", "large")
# The first scale as the engine chooses it from this many points on: never, always.
STARTS = {"former": 2**62, "bound": 2}


def points(n: int, dims: int, uniform: bool, seed: int = 0) -> np.ndarray:
    """``bench_gpu.py``'s clustered cloud, or points uniform in the unit cube."""
    if uniform:
        return np.random.default_rng(seed).uniform(size=(n, dims))
    return bench_gpu.cloud(n, dims, seed)


def _space(X, path: str, metric: str):
    if path == "numpy":
        from diversity_core import pairwise_distances

        return MagnitudeSpace(pairwise_distances(X, metric))
    if path == "torch":
        from diversity_core.magnitude import TorchMagnitudeSpace

        return TorchMagnitudeSpace.from_points(X, metric, device="cpu")
    return LargeMagnitudeSpace(X, metric)


def run(X, path: str, metric: str, start_from: int, target: float) -> dict:
    """One search on a fresh space, its first scale chosen as from ``start_from`` points on."""
    space = _space(X, path, metric)
    asked: dict[str, list[float]] = {"solves": [], "passes": []}
    for method, name in (("magnitude_and_derivative", "solves"), ("pair_sums", "passes")):
        inner = getattr(space, method)

        def counted(t, inner=inner, name=name):
            asked[name].append(t)
            return inner(t)

        setattr(space, method, counted)
    previous = _search.FIRST_ORDER_FROM
    _search.FIRST_ORDER_FROM = start_from
    try:
        started = time.perf_counter()
        t_conv = space.convergence_scale(target)
        seconds = time.perf_counter() - started
    finally:
        _search.FIRST_ORDER_FROM = previous
    row = {"solves": len(asked["solves"]), "passes": len(asked["passes"]), "seconds": seconds,
           "t_conv": t_conv, "first": asked["solves"][0]}
    if path == "large":
        row["float32_products"] = sum(r["iterations"] for r in space.records)
        row["float64_passes"] = sum(r["refinements"] for r in space.records)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--path", choices=PATHS, default="numpy")
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--dims", type=int, default=64)
    parser.add_argument("--metric", choices=("euclidean", "cityblock", "cosine"),
                        default="euclidean")
    parser.add_argument("--uniform", action="store_true",
                        help="points uniform in the unit cube instead of the clustered cloud")
    parser.add_argument("--_one", choices=STARTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._one:  # one run in this fresh process, its row as JSON
        X = points(args.points, args.dims, args.uniform)
        row = run(X, args.path, args.metric, STARTS[args._one], args.target)
        print(json.dumps(row))
        return 0
    # Each run in a process of its own: both then pay alike for the fresh memory of their
    # space's buffers (first touches cost more than the solves at 10,000 points here).
    given = sys.argv[1:] if argv is None else list(argv)
    rows = {}
    for name in STARTS:
        done = subprocess.run([sys.executable, __file__, *given, "--_one", name],
                              capture_output=True, text=True, check=True)
        rows[name] = json.loads(done.stdout.strip().splitlines()[-1])
    former = rows["former"]
    cloud = (f" ({'uniform' if args.uniform else 'clustered'}, d = {args.dims}, {args.metric}, "
             f"target {args.target})")
    for name, row in rows.items():
        extra = "".join(f", {key} {row[key]}" for key in ("float32_products", "float64_passes")
                        if key in row)
        print(f"{args.path} {args.points:,} points{cloud}, {name}: {row['solves']} solves, "
              f"{row['passes']} passes, search {row['seconds']:.2f} s, t_conv {row['t_conv']!r}"
              f", first scale {row['first'] / former['t_conv'] - 1:+.2%} of t_conv{extra}")
    print(f"t_conv relative difference {rows['bound']['t_conv'] / former['t_conv'] - 1:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
