"""Speed of ``diversity_core.compare`` on many sets, beside magnipy's ``Diversipy`` on them.

The target: 20 sets × 1,000 points × 384 dimensions (the size of sentence embeddings) in at
most 30 s on 2 cores. Run from the repository root with our venv's python (magnipy runs in its
own venv through tests/support/magnipy_bridge.py; set MAGNIPY_PYTHON to reuse one)::

    nice -n 10 .venv/bin/python benchmarks/bench_compare.py            # 20 x 1000 x 384
    nice -n 10 .venv/bin/python benchmarks/bench_compare.py --sets 5 --points 300 --skip-magnipy
    nice -n 10 .venv/bin/python benchmarks/bench_compare.py --sets 1000 --points 10 --one-by-one

The second shape, many small sets (the text experiment scores thousands of sets of 10
responses), shows the engine's batch path that ``_magnitude_of_sets`` runs on; ``--one-by-one``
also times the same magnitude work one :class:`MagnitudeSpace` at a time (the single-space
functions, as the seam did before it took the batch path), on the same distance matrices.

The sets: seeded Gaussian mixtures (10 modes) in 384 dimensions whose spread grows from set to
set, so that their convergence scales differ and the median is a real choice. Cosine distance,
the package's defaults (target 0.95, MagArea to rtol 1e-6, 30 scales on [0, t_cut]).

* **ours**: ``compare(sets)`` end to end: cosine distances, every convergence scale, the median
  t_cut, the magnitude functions on the shared grid (45 scales: 30 up to t_cut, 15 beyond), each
  MagArea, the MagDiff matrix and every reference-free baseline (Vendi, AvgSim, GMStds, IsoScore,
  DCScore); the time spent in the magnitude seam (``_magnitude_of_sets``) is shown apart.
* **magnipy**: ``Diversipy(Xs, metric="cosine")`` then ``MagAreas()`` and
  ``get_magnitude_functions()``: its convergence scales (toms748), the median, 30-scale
  functions and the trapezoid rule — magnitude only, no baselines. Timed inside its worker
  (torch's import left out), right after ours, on the same arrays.

Printed: wall times, the ratio, t_cut of both, and the load average (``os.getloadavg``) before and
after each run, since the machine may be shared. ``--threads N`` limits BLAS threads of both.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from record import add_record_options, recording

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "tests" / "support"):  # the package (also from elsewhere), the bridge
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import diversity_core  # noqa: E402
from diversity_core.comparison import protocol as comparison  # noqa: E402  # noqa: E402


def make_sets(n_sets: int, n_points: int, dims: int, seed: int = 0) -> list[np.ndarray]:
    """Gaussian mixtures of 10 modes; the within-mode spread grows with the set's index."""
    rng = np.random.default_rng(seed)
    sets = []
    for i in range(n_sets):
        modes = rng.normal(size=(10, dims))
        spread = 0.3 + 1.2 * i / max(n_sets - 1, 1)
        sets.append(modes[rng.integers(0, 10, n_points)] + spread * rng.normal(
            size=(n_points, dims)))
    return sets


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def run_ours(sets: list[np.ndarray]) -> dict:
    seam_time = []
    seam = comparison._magnitude_of_sets

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return seam(*args, **kwargs)
        finally:
            seam_time.append(time.perf_counter() - start)

    comparison._magnitude_of_sets = timed
    try:
        start = time.perf_counter()
        result = diversity_core.compare(sets, metric="cosine", progress=False)
        total = time.perf_counter() - start
    finally:
        comparison._magnitude_of_sets = seam
    return {"total_s": total, "magnitude_s": seam_time[0], "other_s": total - seam_time[0],
            "t_cut": result.t_cut, "mag_areas": result.table["magarea"].to_list(),
            "undefined": {k: v for k, v in result.undefined.items() if v}}


def run_one_by_one(sets: list[np.ndarray]) -> dict:
    """The seam's magnitude work, one space at a time: convergence scales, the median t_cut,
    the functions on the shared grid and the MagAreas (single-threaded BLAS, as the seam)."""
    settings = diversity_core.MagnitudeSettings()
    distances = [diversity_core.pairwise_distances(X, "cosine") for X in sets]
    start = time.perf_counter()
    with comparison._single_threaded_blas():
        spaces = [diversity_core.MagnitudeSpace(D) for D in distances]
        t_conv = [settings.convergence_scale(S) for S in spaces]
        t_cut = float(np.median(t_conv))
        ts = comparison._grid(t_cut, settings.n_ts)
        areas = []
        for S in spaces:
            S.magnitude_function(ts)
            areas.append(settings.mag_area(S, t_cut))
    return {"magnitude_s": time.perf_counter() - start, "t_cut": t_cut, "mag_areas": areas}


def run_magnipy(sets: list[np.ndarray], threads: int | None) -> dict:
    import magnipy_bridge

    result = magnipy_bridge.run_magnipy(
        {"kind": "diversipy", "Xs": sets, "metric": "cosine"}, threads=threads)
    if "error" in result:
        raise RuntimeError(f"magnipy failed: {result['error']}")
    return {"total_s": result["time_total"], "t_cut": result["t_cut"],
            "mag_areas_over_t_cut": np.asarray(result["mag_areas"]).tolist(),
            "n_perturbed": result["n_perturbed"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--threads", type=int, help="BLAS threads of both (default: all)")
    parser.add_argument("--skip-magnipy", action="store_true")
    parser.add_argument("--one-by-one", action="store_true",
                        help="also time the magnitude work one space at a time")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    add_record_options(parser)
    args = parser.parse_args(argv)
    with recording(args.record, args.note):
        return _run(args)


def _run(args) -> int:

    limit = None
    if args.threads:
        from threadpoolctl import threadpool_limits

        limit = threadpool_limits(args.threads)
    sets = make_sets(args.sets, args.points, args.dims)
    report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version(), "numpy": np.__version__,
                          "diversity_core": diversity_core.__version__},
              "settings": vars(args) | {"json": str(args.json) if args.json else None}}
    print(f"# compare: {args.sets} sets x {args.points} points x {args.dims} dims, cosine "
          f"distance ({os.cpu_count()} CPUs, threads: {args.threads or 'all'})\n")
    load_before = _load()
    ours = run_ours(sets)
    ours["load"] = [load_before, _load()]
    report["ours"] = ours
    rows = [("diversity_core.compare (all measures)", ours["total_s"], ours["t_cut"],
             ours["load"]),
            ("  of which magnitude (_magnitude_of_sets)", ours["magnitude_s"], None, None),
            ("  of which distances, baselines, MagDiff", ours["other_s"], None, None)]
    if args.one_by_one:
        load_before = _load()
        single = run_one_by_one(sets)
        single["load"] = [load_before, _load()]
        single["max_relative_difference"] = float(np.nanmax(np.abs(
            np.asarray(single["mag_areas"]) / np.asarray(ours["mag_areas"]) - 1)))
        report["one_by_one"] = single
        rows.append(("magnitude one space at a time (single-space functions)",
                     single["magnitude_s"], single["t_cut"], single["load"]))
    if not args.skip_magnipy:
        load_before = _load()
        theirs = run_magnipy(sets, args.threads)
        theirs["load"] = [load_before, _load()]
        report["magnipy"] = theirs
        rows.append(("magnipy 1.0.0 Diversipy (magnitude only)", theirs["total_s"],
                     theirs["t_cut"], theirs["load"]))
    print("| run | wall time (s) | t_cut | load average before → after (1/5/15 min) |")
    print("|---|---:|---:|---|")
    for name, seconds, t_cut, load in rows:
        print(f"| {name} | {seconds:.2f} | {'' if t_cut is None else f'{t_cut:.6g}'} | "
              f"{'' if load is None else ' → '.join(load)} |")
    if not args.skip_magnipy:
        theirs = report["magnipy"]
        ratio = theirs["total_s"] / ours["total_s"]
        print(f"\nmagnipy / ours: {ratio:.1f}x (ours with every baseline; magnipy magnitude "
              f"only: {theirs['total_s'] / ours['magnitude_s']:.1f}x magnitude to magnitude); "
              f"t_cut relative difference {abs(ours['t_cut'] / theirs['t_cut'] - 1):.1e}; "
              f"magnipy's Z + 0.01 I retries: {theirs['n_perturbed']}")
        report["ratio"] = ratio
    if (args.sets, args.points, args.dims) == (20, 1000, 384):
        target = "met" if ours["total_s"] <= 30 else "NOT met"
        print(f"\ntarget (<= 30 s for 20 x 1000 x 384 on 2 cores): {target} "
              f"({ours['total_s']:.1f} s)")
    if args.one_by_one:
        single = report["one_by_one"]
        print(f"batch path / one by one (magnitude): "
              f"{single['magnitude_s'] / ours['magnitude_s']:.1f}x faster; MagArea max relative "
              f"difference {single['max_relative_difference']:.1e}")
    if ours["undefined"]:
        print(f"undefined values: {ours['undefined']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if limit is not None:
        limit.unregister() if hasattr(limit, "unregister") else None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
