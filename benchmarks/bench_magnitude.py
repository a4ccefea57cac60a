"""Speed and accuracy of diversity_core's magnitude engine, against the reference library magnipy.

Run with our venv's python from the repository root (magnipy runs in its own venv through
tests/support/magnipy_bridge.py; set MAGNIPY_PYTHON to reuse an existing one)::

    nice -n 10 .venv/bin/python benchmarks/bench_magnitude.py                 # sections 1 and 2
    nice -n 10 .venv/bin/python benchmarks/bench_magnitude.py --large 50000   # and section 3

Three shapes (markdown tables on stdout; ``--json out.json`` writes every figure), each of ours
timed against magnipy back to back in one run, on the same data, with the ratio and the error:

1. **Defaults, one space.** ``pairwise_distances`` -> ``convergence_scale(D)`` ->
   ``mag_area(D, t_conv)``, every setting at the package's default (the two plain functions
   share their work through the engine's cache of prepared spaces), against magnipy's default
   path (``Magnipy(X)``, ``get_t_conv()``, ``get_magnitude()`` on 30 scales, ``MagArea()``).
   Clustered Euclidean points (a seeded Gaussian mixture, d = 10). Error: each MagArea against
   an accurate integral of the exact magnitude function (Cholesky at every scale, Clenshaw–Curtis
   to rtol 1e-11) up to the same limit.
2. **Batches.** The reference-free protocol (median convergence scale as the shared t_cut, one
   MagArea per set) with cosine distances: ``convergence_scales`` and ``mag_areas`` at their
   defaults against ``Diversipy(Xs, metric="cosine").MagAreas()``, on 1,000 sets of 10 points
   (the text experiment's shape) and 200 sets of 300 points in 384 dimensions (Table 2's);
   also the same through a loop of the single-space functions. Errors: batch against the
   single-space loop (they must agree to 1e-10), and the area of each against magnipy's
   (trapezoid rule / t_cut, so a few 1e-5 apart).
3. **Large n** (``--large N``, ours only: magnipy would need hours and a 20 GB matrix): a set of
   N points through :func:`magnitude_space` (the large-n path beyond 10,000 points): build,
   convergence scale, MagArea to ``--large-rtol`` (1e-4), peak resident memory, the run's own
   error budget; each case in a fresh process. ``--large-check`` repeats it at tolerances 10
   times tighter (the self-consistency check); ``--large-validate`` compares with the exact
   dense path (feasible up to n of about 10,000).

Timings are wall-clock minima over ``--repeats`` (default 2), ours and magnipy's runs taking
turns (ours, magnipy, ours, magnipy), so that both see the same spells of the machine's speed.
Both libraries use their BLAS
with ``--threads`` threads (default 2). The machine's load (``os.getloadavg``) is printed before
and after each section: on a machine shared with other jobs, compare ratios, not seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from record import add_record_options, recording

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "tests"):  # the package (also when run from elsewhere) and the bridge
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import diversity_core  # noqa: E402
from diversity_core import magnitude as mg  # noqa: E402
from diversity_core import pairwise_distances  # noqa: E402

SEED = 20241210
DIM = 10


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def gaussian_mixture(n: int, d: int = DIM, *, k: int = 10, spread: float = 4.0, seed=None):
    """n points from k unit-variance Gaussian clusters whose centres are N(0, spread² I)."""
    rng = np.random.default_rng([SEED, n, d] if seed is None else seed)
    centres = spread * rng.normal(size=(k, d))
    labels = rng.integers(k, size=n)
    return centres[labels] + rng.normal(size=(n, d))


def text_like_sets(n_sets: int, size: int, d: int = 384, seed: int = 3) -> list[np.ndarray]:
    """Sets that resemble sentence embeddings of generated responses: each set around one of
    100 "prompts", its spread drawn per set (the temperature)."""
    rng = np.random.default_rng([SEED, seed, n_sets, size])
    prompts = rng.normal(size=(100, d))
    return [3 * prompts[rng.integers(100)] + rng.uniform(0.5, 2.0) * rng.normal(size=(size, d))
            for _ in range(n_sets)]


def model_like_sets(n_sets: int, size: int, d: int = 384, seed: int = 4) -> list[np.ndarray]:
    """Subsamples of a clustered collection (topics), scaled per set: Table 2's shape."""
    rng = np.random.default_rng([SEED, seed, n_sets, size])
    topics = rng.normal(size=(8, d))
    return [topics[rng.integers(8, size=size)] * rng.uniform(1.0, 3.0)
            + rng.normal(size=(size, d)) for _ in range(n_sets)]


def _load() -> float:
    return os.getloadavg()[0]


def _timed(fn, repeats: int):
    best, value = math.inf, None
    for _ in range(repeats):
        mg.clear_cache()
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def _alternating(ours, job: dict | None, repeats: int):
    """Ours and magnipy's ``job`` in turn, ``repeats`` times each: ((best seconds, value) of
    ours, magnipy's job result of its best run or None, magnipy's versions). Taking turns, both
    libraries sample the same spells of a shared machine's speed, which moved by 20% within
    minutes on one of ours; one library's repeats and then the other's did not."""
    best, theirs, versions = (math.inf, None), None, {}
    for _ in range(repeats):
        seconds, value = _timed(ours, 1)
        if seconds < best[0]:
            best = (seconds, value)
        if job is not None:
            import magnipy_bridge

            res = magnipy_bridge.run_magnipy({"jobs": [
                {"X": gaussian_mixture(50, seed=[SEED, 0]), "metric": "euclidean",
                 "default": True},
                job]})
            versions = res["versions"]
            if theirs is None or res["jobs"][1]["time_total"] < theirs["time_total"]:
                theirs = res["jobs"][1]
    return best, theirs, versions


def accurate_area(D, t_cut: float) -> float:
    """∫_0^t_cut Mag(t) dt: Cholesky at every scale (solver="direct"), rtol 1e-11."""
    return mg.mag_area(mg.MagnitudeSpace(D, solver="direct"), t_cut, rtol=1e-11)


# --------------------------------------------------------------------------------------------
# 1. Defaults, one space
# --------------------------------------------------------------------------------------------


def ours_defaults(X):
    D = pairwise_distances(X)
    t_conv = mg.convergence_scale(D)
    return t_conv, mg.mag_area(D, t_conv)


def bench_defaults(sizes, repeats: int, skip_magnipy: bool):
    rows, versions = [], {}
    for n in sizes:
        X = gaussian_mixture(n)
        load = _load()
        (seconds, (t_conv, area)), theirs, theirs_versions = _alternating(
            lambda X=X: ours_defaults(X),
            None if skip_magnipy else {"X": X, "metric": "euclidean", "default": True}, repeats)
        row = {"n": n, "load": load, "ours": {"time": seconds, "t_conv": t_conv, "mag_area": area}}
        if theirs is not None:
            versions = theirs_versions
            row["magnipy"] = {"time": theirs["time_total"], "t_conv": theirs["t_conv"],
                              "mag_area": theirs["mag_area"]}
            row["ratio"] = theirs["time_total"] / seconds
        D = pairwise_distances(X)
        row["ours"]["area_rel_err"] = abs(area / accurate_area(D, t_conv) - 1)
        if "magnipy" in row:
            t_m = row["magnipy"]["t_conv"]
            row["magnipy"]["area_rel_err"] = abs(row["magnipy"]["mag_area"]
                                                 / accurate_area(D, t_m) - 1)
        rows.append(row)
        _progress(f"defaults n={n} done")
    return rows, versions


# --------------------------------------------------------------------------------------------
# 2. Batches
# --------------------------------------------------------------------------------------------


def ours_batch(Xs):
    Ds = [pairwise_distances(X, "cosine") for X in Xs]
    t_cut = float(np.median(mg.convergence_scales(Ds)))
    return t_cut, mg.mag_areas(Ds, t_cut)


def ours_loop(Xs):
    spaces = [mg.MagnitudeSpace(pairwise_distances(X, "cosine")) for X in Xs]
    t_cut = float(np.median([mg.convergence_scale(s) for s in spaces]))
    return t_cut, np.array([mg.mag_area(s, t_cut) for s in spaces])


def bench_batches(shapes, repeats: int, skip_magnipy: bool):
    out = []
    for name, n_sets, size, make in shapes:
        Xs = make(n_sets, size)
        load = _load()
        (seconds, (t_cut, areas)), theirs, _ = _alternating(
            lambda Xs=Xs: ours_batch(Xs),
            None if skip_magnipy else {"kind": "diversipy", "Xs": Xs, "metric": "cosine"},
            repeats)
        loop_seconds, (t_cut_loop, areas_loop) = _timed(lambda Xs=Xs: ours_loop(Xs), 1)
        row = {"shape": name, "n_sets": n_sets, "size": size, "load": load,
               "ours": {"time": seconds, "t_cut": t_cut},
               "loop": {"time": loop_seconds},
               "batch_vs_loop": float(np.max(np.abs(areas / areas_loop - 1))),
               "t_cut_batch_vs_loop": abs(t_cut / t_cut_loop - 1)}
        if theirs is not None:
            row["magnipy"] = {"time": theirs["time_total"], "t_cut": theirs["t_cut"]}
            row["ratio"] = theirs["time_total"] / seconds
            row["loop_ratio"] = theirs["time_total"] / loop_seconds
            # Diversipy reports area / t_cut by the 30-point trapezoid rule.
            row["vs_magnipy"] = float(np.max(np.abs(areas / t_cut / theirs["mag_areas"] - 1)))
        out.append(row)
        _progress(f"batch {name} done")
    return out


# --------------------------------------------------------------------------------------------
# 3. Large n (own process each: peak memory per case)
# --------------------------------------------------------------------------------------------


def large_points(n: int, d: int, metric: str) -> np.ndarray:
    rng = np.random.default_rng([SEED, n, d, 9])
    if metric == "cosine":  # not centred: cosine distances well below 1 on average
        return rng.normal(size=(n, d)) + 0.5
    return gaussian_mixture(n, d)


def large_case(n: int, d: int, metric: str, rtol: float, solver_rtol: float,
               validate: bool) -> dict:
    X = large_points(n, d, metric)
    need = mg.magnitude_memory(n, d)
    t0 = time.perf_counter()
    space = mg.magnitude_space(X, metric, solver_rtol=solver_rtol) if n > 10_000 else \
        mg.LargeMagnitudeSpace(X, metric, solver_rtol=solver_rtol)
    t1 = time.perf_counter()
    t_conv = mg.convergence_scale(space)
    t2 = time.perf_counter()
    area = mg.mag_area(space, t_conv, rtol=rtol)
    t3 = time.perf_counter()
    out = {"n": n, "d": d, "metric": metric, "rtol": rtol, "solver_rtol": solver_rtol,
           "t_conv": t_conv, "mag_area": area, "time_build": t1 - t0,
           "time_t_conv": t2 - t1, "time_area": t3 - t2, "time_total": t3 - t0,
           "scales": len(space.records),
           "products": sum(r["iterations"] for r in space.records),
           "area_error": space.area_error, "memory_estimate_gib": need / 2**30,
           "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    if validate:  # the exact dense path: float64 everywhere, MagArea to rtol 1e-10
        del space
        t0 = time.perf_counter()
        dense = mg.MagnitudeSpace(pairwise_distances(X, metric))
        t_exact = mg.convergence_scale(dense)
        out.update(t_conv_exact=t_exact, t_conv_rel_err=abs(t_conv / t_exact - 1),
                   mag_area_exact=mg.mag_area(dense, t_conv, rtol=1e-10),
                   time_exact=time.perf_counter() - t0)
        out["mag_area_rel_err"] = abs(area / out["mag_area_exact"] - 1)
    return out


def bench_large(n: int, cases, rtol: float, check: bool, validate: bool) -> list[dict]:
    out = []
    runs = [(rtol, mg.LargeMagnitudeSpace.__init__.__kwdefaults__["solver_rtol"])]
    if check:
        runs.append((rtol / 10, runs[0][1] / 10))
    for metric, d in cases:
        for r, s in runs:
            _progress(f"large n={n} d={d} {metric} rtol={r:g} solver_rtol={s:g} "
                      f"(fresh process; load {_load():.1f}) ...")
            load = _load()
            proc = subprocess.run(
                [sys.executable, __file__, "--_large-case",
                 json.dumps([n, d, metric, r, s, validate])],
                capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"large case failed:\n{proc.stderr[-3000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["load"] = load
            out.append(result)
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _progress(msg: str) -> None:
    print(f"# {msg}", file=sys.stderr, flush=True)


def _fmt(x, spec=".3g"):
    return "—" if x is None else format(x, spec)


def print_report(report: dict) -> None:
    mach = report["machine"]
    print(f"\nMachine: {mach['cpu_count']} CPU cores, BLAS threads {mach['threads']}, "
          f"{mach['platform']}; load average at start {mach['load_start']:.1f}, at end "
          f"{mach['load_end']:.1f}; ours: numpy {report['versions']['numpy']}, scipy "
          f"{report['versions']['scipy']}"
          + (f"; magnipy venv: {report['versions']['magnipy']}"
             if report["versions"].get("magnipy") else ""))
    rows = report.get("defaults")
    if rows:
        print("\n### 1. Defaults: pairwise_distances → convergence_scale → mag_area "
              "(clustered Euclidean, d = 10)\n")
        print("| n | load | ours (s) | magnipy (s) | ratio | ours MagArea rel. err | "
              "magnipy MagArea rel. err |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            m = r.get("magnipy", {})
            print(f"| {r['n']:,} | {r['load']:.1f} | {r['ours']['time']:.3f} | "
                  f"{_fmt(m.get('time'), '.2f')} | {_fmt(r.get('ratio'), '.1f')}× | "
                  f"{r['ours']['area_rel_err']:.1e} | {_fmt(m.get('area_rel_err'), '.1e')} |")
    rows = report.get("batches")
    if rows:
        print("\n### 2. Batches: convergence_scales → median → mag_areas (cosine)\n")
        print("| sets × points | load | ours, batch (s) | ours, loop (s) | magnipy Diversipy "
              "(s) | ratio batch | ratio loop | batch vs loop (max rel.) | vs magnipy "
              "(max rel.) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            m = r.get("magnipy", {})
            print(f"| {r['n_sets']:,} × {r['size']} | {r['load']:.1f} | "
                  f"{r['ours']['time']:.3f} | {r['loop']['time']:.2f} | "
                  f"{_fmt(m.get('time'), '.2f')} | {_fmt(r.get('ratio'), '.1f')}× | "
                  f"{_fmt(r.get('loop_ratio'), '.1f')}× | {r['batch_vs_loop']:.1e} | "
                  f"{_fmt(r.get('vs_magnipy'), '.1e')} |")
    rows = report.get("large")
    if rows:
        print("\n### 3. Large n (ours only)\n")
        print("| n | d | metric | rtol / solver_rtol | load | build (s) | t_conv (s) | "
              "MagArea (s) | total (s) | scales | products | peak RSS (GiB) | estimate (GiB) "
              "| t_conv | MagArea | error budget (rel.) | vs exact: t_conv, MagArea |")
        print("|" + "---|" * 17)
        for r in rows:
            exact = (f"{r['t_conv_rel_err']:.1e}, {r['mag_area_rel_err']:.1e}"
                     if "mag_area_rel_err" in r else "—")
            print(f"| {r['n']:,} | {r['d']} | {r['metric']} | {r['rtol']:g} / "
                  f"{r['solver_rtol']:g} | {r['load']:.1f} | {r['time_build']:.1f} | "
                  f"{r['time_t_conv']:.1f} | {r['time_area']:.1f} | {r['time_total']:.1f} | "
                  f"{r['scales']} | {r['products']} | {r['peak_rss_gib']:.2f} | "
                  f"{r['memory_estimate_gib']:.2f} | {r['t_conv']:.8g} | {r['mag_area']:.8g} | "
                  f"{r['area_error']['relative']:.1e} | {exact} |")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,1500,2000,4000",
                    help="section 1: comma-separated n (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=2, help="timing repeats (minimum reported)")
    ap.add_argument("--threads", type=int, default=2,
                    help="BLAS threads of ours AND magnipy (default: %(default)s)")
    ap.add_argument("--skip-magnipy", action="store_true", help="time ours only")
    ap.add_argument("--no-defaults", action="store_true", help="skip section 1")
    ap.add_argument("--no-batches", action="store_true", help="skip section 2")
    ap.add_argument("--large", type=int, metavar="N", help="also run section 3 with N points")
    ap.add_argument("--large-cases", default="euclidean:16,cosine:512",
                    help="section 3: metric:dimension, comma-separated (default: %(default)s)")
    ap.add_argument("--large-rtol", type=float, default=1e-4,
                    help="section 3: MagArea tolerance (default: %(default)s)")
    ap.add_argument("--large-check", action="store_true",
                    help="section 3: repeat each case with tolerances 10 times tighter")
    ap.add_argument("--large-validate", action="store_true",
                    help="section 3: compare with the exact dense path (n up to ~10,000)")
    ap.add_argument("--json", type=Path, help="write all figures to this JSON file")
    ap.add_argument("--_large-case", help=argparse.SUPPRESS)
    add_record_options(ap)
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # the magnipy worker and the large-case children
    threadpool_limits(args.threads)
    if args._large_case:  # child process of section 3
        print(json.dumps(large_case(*json.loads(args._large_case)), default=float))
        return {}

    with recording(args.record, args.note):
        import scipy

        report = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                              "threads": args.threads, "load_start": _load()},
                  "versions": {"numpy": np.__version__, "scipy": scipy.__version__,
                               "diversity_core": diversity_core.__version__}}
        if not args.no_defaults:
            sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
            report["defaults"], magnipy_versions = bench_defaults(sizes, args.repeats,
                                                                  args.skip_magnipy)
            if magnipy_versions:
                report["versions"]["magnipy"] = magnipy_versions
        if not args.no_batches:
            report["batches"] = bench_batches(
                [("text", 1000, 10, text_like_sets), ("table2", 200, 300, model_like_sets)],
                args.repeats, args.skip_magnipy)
        if args.large:
            cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.large_cases.split(",")]
            report["large"] = bench_large(args.large, cases, args.large_rtol, args.large_check,
                                          args.large_validate)
        report["machine"]["load_end"] = _load()
        print_report(report)
    if args.json:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(report, indent=2, default=float))
        tmp.replace(args.json)
    return report


if __name__ == "__main__":
    main()
