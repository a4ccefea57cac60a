"""The large-n path on 1 and 2 cores: wall time, CPU time, utilisation, evaluations.

    .venv/bin/python benchmarks/bench_large.py --sizes 10000,30000,50000 --cores 1,2
    .venv/bin/python benchmarks/bench_large.py --sizes 12000 --points gaussian --json out.json

Each case runs in a fresh process whose CPU affinity is limited to the first ``cores`` cores
(``os.sched_setaffinity``); the space is made without ``threads``, so its threads follow that
affinity (``allowed_threads()``), as ``compare`` and ``score`` give them. Points in ``--dim``
dimensions (default 32) in float32, as embeddings come: ``--points clustered`` (default: five
Gaussian clusters, ``tests/support/point_clouds.clustered``, the shape of the 30,000-point case)
or ``gaussian`` (one Gaussian); Euclidean; convergence scale and MagArea at the package's
defaults. Reported per case: the build, the convergence scale and MagArea, each with its wall
time, its CPU time (user + system of the process) and their ratio (the utilisation: 2.0 is two
busy cores), the evaluations of Mag(t) per phase and the float32 CG products, and the load
average at the start and the end (on a shared machine the utilisation is bounded by what the
other processes leave: say the load with every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def points(kind: str, n: int, d: int, seed: int):
    """The benchmark's points, float32."""
    import numpy as np

    if kind == "gaussian":
        return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    sys.path.insert(0, str(SUPPORT))
    from point_clouds import clustered

    return clustered(n, d, seed).astype(np.float32)


def case(n: int, d: int, cores: int, seed: int, kind: str = "clustered") -> dict:
    """One case, in this process (its affinity set first)."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    from diversity_core.magnitude import LargeMagnitudeSpace

    X = points(kind, n, d, seed)
    out = {"n": n, "d": d, "points": kind, "cores": cores, "load_start": os.getloadavg()[0]}
    wall, cpu = time.perf_counter(), _cpu()

    def lap(name):
        nonlocal wall, cpu
        w, c = time.perf_counter(), _cpu()
        out[name] = {"wall_s": round(w - wall, 2), "cpu_s": round(c - cpu, 2),
                     "utilisation": round((c - cpu) / max(w - wall, 1e-9), 2)}
        wall, cpu = w, c

    space = LargeMagnitudeSpace(X, "euclidean")
    out["threads"] = space._thread_count()
    lap("build")
    t_conv = space.convergence_scale()
    lap("search_time")
    area = space.mag_area(t_conv)
    lap("area_time")
    out.update(t_conv=t_conv, area=area, evaluations=space.evaluations,
               cg_products=sum(r["iterations"] for r in space.records),
               area_error=space.area_error, load_end=os.getloadavg()[0])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,30000,50000")
    ap.add_argument("--cores", default="1,2")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--points", choices=("clustered", "gaussian"), default="clustered")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--_case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._case:
        print(json.dumps(case(*json.loads(args._case))))
        return
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for cores in (int(c) for c in args.cores.split(",")):
            proc = subprocess.run([sys.executable, __file__, "--_case",
                                   json.dumps([n, args.dim, cores, args.seed, args.points])],
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                raise RuntimeError(f"case n={n} cores={cores} failed:\n{proc.stderr[-3000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"n={n} d={args.dim} {args.points} cores={cores} threads={row['threads']} "
                  f"load {row['load_start']:.1f}->{row['load_end']:.1f}: "
                  + ", ".join(f"{k} {row[k]['wall_s']} s wall, {row[k]['cpu_s']} s CPU "
                              f"(x{row[k]['utilisation']})"
                              for k in ("build", "search_time", "area_time"))
                  + f"; evaluations {row['evaluations']}, CG products {row['cg_products']}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
