"""Speed and accuracy of diversity_core's magnitude engine, against the reference library magnipy.

Run with our venv's python from the repository root (magnipy runs in its own venv through
tests/magnipy_bridge.py; set MAGNIPY_PYTHON to reuse an existing one)::

    nice -n 10 .venv/bin/python benchmarks/bench_magnitude.py --sizes 500,1000,2000,4000

Sections (markdown tables on stdout; ``--json out.json`` writes every figure):

1. One space: convergence scale + MagArea up to it, for clustered Euclidean points (a seeded
   Gaussian mixture, d = 10). Ours = pairwise_distances + MagnitudeSpace + convergence_scale +
   mag_area (rtol from --rtol, default 1e-4), the engine's other defaults. magnipy's default
   path = ``Magnipy(X)`` (distances), ``get_t_conv()`` (toms748), ``get_magnitude()`` (30
   scales) and ``MagArea()`` (trapezoid), run right after ours on the same data. Accuracy:
   relative error of each MagArea against an accurate integral of our magnitude function
   (``scipy.integrate.quad``, rtol 1e-10).
2. Many small spaces: the reference-free protocol on 200 spaces of 300 points: ours
   (reference_free_t_cut + mag_area per space) against ``Diversipy(Xs).MagAreas()``.
3. ``--large`` only: n = 20,000 (d = 10 Euclidean; d = 384 cosine), ours only: convergence scale,
   MagArea, and peak resident memory (``resource.getrusage``), each case in a fresh process.
4. Dense-path efficiency: GFLOP/s of our magnitude per scale with ``solver="direct"`` (counted
   as the Cholesky's n³/3 flops; the default solver would answer most of these scales by
   conjugate gradients), in float64 (the engine's default) and in mixed precision (float32
   Cholesky + float64 refinement), against this machine's measured matrix-multiply rate
   (4000 x 4000 numpy matmul, 2n³ flops) in float64 and float32.

Timings are wall-clock minima over ``--repeats``. Both libraries use their BLAS with all cores,
or ``--threads N`` for both (each venv has its own NumPy/SciPy build; versions are printed). On a
machine shared with other jobs use ``--threads 1``. The "scales" and "Cholesky" columns count the
distinct scales our engine evaluated and its LAPACK potrf calls (a benchmark-local probe of the
engine's internals; "—" where the engine does not expose them or used no factorisation).
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
from scipy import integrate

REPO = Path(__file__).resolve().parents[1]
RTOL = 1e-4  # our MagArea tolerance (--rtol)
for _p in (REPO, REPO / "tests"):  # the package (also when run from elsewhere) and the bridge
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import diversity_core  # noqa: E402
from diversity_core import (  # noqa: E402
    convergence_scale,
    mag_area,
    magnitude_function,
    pairwise_distances,
    reference_free_t_cut,
)

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


# --------------------------------------------------------------------------------------------
# Instrumentation (benchmark-local): count the engine's Cholesky factorisations
# --------------------------------------------------------------------------------------------


class FactorCounter:
    """Counts the engine's LAPACK Cholesky calls (dpotrf: float64, spotrf: float32).

    Swaps the ``lapack`` module seen by diversity_core.magnitude for a counting proxy while in the
    ``with`` block; if the engine stops using it, the counts stay at zero and are reported as "—".
    """

    def __init__(self):
        self.counts = {"dpotrf": 0, "spotrf": 0}
        self._module = diversity_core.magnitude
        self._real = getattr(self._module, "lapack", None)

    def __enter__(self):
        if self._real is not None:
            real, counts = self._real, self.counts

            class _Proxy:
                def __getattr__(self, name):
                    attr = getattr(real, name)
                    if name not in counts:
                        return attr

                    def counted(*args, **kwargs):
                        counts[name] += 1
                        return attr(*args, **kwargs)

                    return counted

            self._module.lapack = _Proxy()
        return self

    def __exit__(self, *exc):
        if self._real is not None:
            self._module.lapack = self._real

    @property
    def total(self) -> int:
        return self.counts["dpotrf"] + self.counts["spotrf"]


def _scales_evaluated(space):
    """Distinct positive scales a MagnitudeSpace has evaluated (its cache), or None."""
    cache = getattr(space, "_cache", None)
    return None if cache is None else sum(1 for t in cache if t > 0)


def make_space(D, **kwargs):
    """Our engine's prepared space (validated, de-duplicated, cached) if it has one, else D."""
    cls = getattr(diversity_core, "MagnitudeSpace", None)
    return cls(D, **kwargs) if cls is not None else D


def _magnitude_callable(D, precision="double"):
    """Scalar t -> Mag(t), float64 throughout where the engine offers it (the yardstick)."""
    try:
        space = make_space(D, precision=precision)
    except TypeError:
        space = make_space(D)
    if hasattr(space, "magnitude"):
        return space.magnitude
    return lambda t: float(magnitude_function(D, [t])[0])


def accurate_area(D, t_cut: float) -> float:
    """∫_0^t_cut Mag(t) dt with scipy quad at rtol 1e-10 (the accuracy yardstick)."""
    value, _ = integrate.quad(_magnitude_callable(D), 0.0, t_cut, epsabs=0.0, epsrel=1e-10,
                              limit=400)
    return float(value)


# --------------------------------------------------------------------------------------------
# 1. One space
# --------------------------------------------------------------------------------------------


def ours_single(X, repeats: int) -> tuple[dict, np.ndarray]:
    """pairwise_distances -> MagnitudeSpace -> convergence_scale -> mag_area (default settings)."""
    best: dict[str, float] = {}
    for _ in range(repeats):
        with FactorCounter() as fc:
            t0 = time.perf_counter()
            D = pairwise_distances(X)
            t1 = time.perf_counter()
            space = make_space(D)
            t2 = time.perf_counter()
            t_conv = convergence_scale(space)
            t3 = time.perf_counter()
            counts_conv = dict(fc.counts)
            scales_conv = _scales_evaluated(space)
            area = mag_area(space, t_conv, rtol=RTOL)
            t4 = time.perf_counter()
        times = {"time_dist": t1 - t0, "time_prepare": t2 - t1, "time_t_conv": t3 - t2,
                 "time_area": t4 - t3, "time_total": t4 - t0}
        for k, v in times.items():
            best[k] = min(best.get(k, math.inf), v)
    scales_all = _scales_evaluated(space)
    out = dict(best, t_conv=t_conv, mag_area=area,
               scales_t_conv=scales_conv,
               scales_area=None if scales_all is None else scales_all - scales_conv,
               factor_t_conv=counts_conv,
               factor_area={k: fc.counts[k] - counts_conv[k] for k in fc.counts})
    return out, D


def magnipy_single(X, repeats: int) -> tuple[dict, dict]:
    import magnipy_bridge

    warm = {"X": gaussian_mixture(50, seed=[SEED, 0]), "metric": "euclidean", "default": True}
    job = {"X": X, "metric": "euclidean", "default": True, "repeats": repeats}
    res = magnipy_bridge.run_magnipy({"jobs": [warm, job]})
    return res["jobs"][1], res["versions"]


def bench_single(sizes, repeats: int, skip_magnipy: bool, accuracy: bool) -> tuple[list, dict]:
    rows, versions = [], {}
    for n in sizes:
        X = gaussian_mixture(n)
        ours, D = ours_single(X, repeats)
        row = {"n": n, "ours": ours}
        if not skip_magnipy:
            theirs, versions = magnipy_single(X, repeats)
            if "error" in theirs:
                raise RuntimeError(f"magnipy failed at n={n}: {theirs['error']}")
            row["magnipy"] = {k: v for k, v in theirs.items()
                              if k not in ("default_ts", "default_mag", "messages")}
            row["speedup"] = theirs["time_total"] / ours["time_total"]
            row["t_conv_rel_diff"] = abs(ours["t_conv"] / theirs["t_conv"] - 1)
        if accuracy:
            t0 = time.perf_counter()
            exact = accurate_area(D, ours["t_conv"])
            row["time_accurate_area"] = time.perf_counter() - t0
            row["area_exact"] = exact
            row["ours_area_rel_err"] = abs(ours["mag_area"] / exact - 1)
            if "magnipy" in row:
                # Their integral ends at their t_conv: add the sliver between the two scales.
                f = _magnitude_callable(D)
                t_a, t_b = ours["t_conv"], row["magnipy"]["t_conv"]
                exact_theirs = exact + 0.5 * (f(t_a) + f(t_b)) * (t_b - t_a)
                row["magnipy_area_rel_err"] = abs(row["magnipy"]["mag_area"] / exact_theirs - 1)
        rows.append(row)
        _print_progress(f"single space n={n} done")
    return rows, versions


# --------------------------------------------------------------------------------------------
# 2. Many small spaces
# --------------------------------------------------------------------------------------------


def bench_many(n_spaces: int, size: int, skip_magnipy: bool) -> dict:
    rng = np.random.default_rng([SEED, 7])
    spreads = rng.uniform(1.0, 6.0, n_spaces)
    Xs = [gaussian_mixture(size, seed=[SEED, 7, i], spread=s) for i, s in enumerate(spreads)]
    with FactorCounter() as fc:
        t0 = time.perf_counter()
        spaces = [make_space(pairwise_distances(X)) for X in Xs]
        t_cut = reference_free_t_cut(spaces)
        areas = np.array([mag_area(space, t_cut, rtol=RTOL) for space in spaces])
        elapsed = time.perf_counter() - t0
    out = {"n_spaces": n_spaces, "size": size,
           "ours": {"time_total": elapsed, "t_cut": t_cut, "factor": dict(fc.counts)}}
    if not skip_magnipy:
        import magnipy_bridge

        res = magnipy_bridge.run_magnipy({"jobs": [
            {"X": gaussian_mixture(50, seed=[SEED, 0]), "metric": "euclidean", "default": True},
            {"kind": "diversipy", "Xs": Xs, "metric": "euclidean"},
        ]})
        theirs = res["jobs"][1]
        if "error" in theirs:
            raise RuntimeError(f"magnipy Diversipy failed: {theirs['error']}")
        out["magnipy"] = {"time_total": theirs["time_total"], "t_cut": theirs["t_cut"],
                          "n_perturbed": theirs["n_perturbed"]}
        out["speedup"] = theirs["time_total"] / elapsed
        out["t_cut_rel_diff"] = abs(t_cut / theirs["t_cut"] - 1)
        # Diversipy reports area / t_cut (trapezoid); ours is the exact integral.
        out["area_max_rel_diff"] = float(np.max(np.abs(areas / t_cut / theirs["mag_areas"] - 1)))
    return out


# --------------------------------------------------------------------------------------------
# 3. Large n (own process each: peak memory per case)
# --------------------------------------------------------------------------------------------


def large_case(n: int, d: int, metric: str, validate: bool = False) -> dict:
    rng = np.random.default_rng([SEED, n, d, 9])
    if metric == "cosine":
        X = rng.normal(size=(n, d)) + 0.5  # not centred: cosine distances well below 1 on average
    else:
        X = gaussian_mixture(n, d)
    with FactorCounter() as fc:
        t0 = time.perf_counter()
        space = make_space(pairwise_distances(X, metric))
        t1 = time.perf_counter()
        t_conv = convergence_scale(space)
        t2 = time.perf_counter()
        n_conv = fc.total
        area = mag_area(space, t_conv, rtol=RTOL)
        t3 = time.perf_counter()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    scales = _scales_evaluated(space)
    exact = {}
    if validate:  # the exact dense computation: float64 Cholesky at every scale, rtol 1e-10
        dense = make_space(space.D, precision="double", solver="direct")
        t_exact = convergence_scale(dense)
        area_exact = mag_area(dense, t_exact, rtol=1e-10)
        exact = {"t_conv_exact": t_exact, "mag_area_exact": area_exact,
                 "t_conv_rel_err": abs(t_conv / t_exact - 1),
                 "mag_area_rel_err": abs(area / area_exact - 1)}
    return {"n": n, "d": d, "metric": metric, "t_conv": t_conv, "mag_area": area, **exact,
            "scales_evaluated": scales,
            "time_dist": t1 - t0, "time_t_conv": t2 - t1, "time_area": t3 - t2,
            "time_total": t3 - t0, "n_factor_t_conv": n_conv, "n_factor_area": fc.total - n_conv,
            "peak_rss_gib": peak_kib / 2**20, "dense_matrix_gib": n * n * 8 / 2**30}


LARGE_CASES = {"euclidean": (10, "euclidean"), "cosine": (384, "cosine")}


def bench_large(n: int, cases=("euclidean", "cosine"), validate: bool = False) -> list[dict]:
    out = []
    for d, metric in (LARGE_CASES[c] for c in cases):
        _print_progress(f"large case n={n} d={d} {metric} (fresh process) ...")
        proc = subprocess.run(
            [sys.executable, __file__, "--rtol", str(RTOL),
             "--_large-case", f"{n},{d},{metric},{int(validate)}"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"large case failed:\n{proc.stderr[-3000:]}")
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


# --------------------------------------------------------------------------------------------
# 4. Dense-path efficiency
# --------------------------------------------------------------------------------------------


def matmul_gflops(n: int = 4000, repeats: int = 3, dtype=np.float64) -> float:
    rng = np.random.default_rng(0)
    A, B = rng.random((n, n)).astype(dtype), rng.random((n, n)).astype(dtype)
    A @ B  # warm-up
    best = min(_timed(lambda: A @ B) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def cholesky_gflops(n: int, repeats: int, n_scales: int = 4) -> dict:
    """Time per scale of our magnitude (Cholesky + one solve, plus exp(-tD)) at n_scales distinct
    scales in [t_conv/4, t_conv], per precision mode; GFLOP/s counts n³/3 per scale.

    The one-off preparation of a space (validation, duplicate search) is timed separately.
    """
    D = pairwise_distances(gaussian_mixture(n))
    t_conv = convergence_scale(D)
    ts = np.linspace(t_conv / 4, t_conv, n_scales)
    out = {"n": n}
    out["time_prepare"] = min(_timed(lambda: make_space(D)) for _ in range(max(repeats, 2)))
    for precision in ("double", "mixed"):
        try:
            make_space(D, precision=precision, solver="direct")
        except (TypeError, ValueError):
            continue
        times = []
        for _ in range(repeats):
            space = make_space(D, precision=precision, solver="direct")  # fresh cache
            times.append(_timed(lambda space=space: [space.magnitude(t) for t in ts]))
        per_scale = min(times) / n_scales
        out[f"time_per_scale_{precision}"] = per_scale
        out[f"gflops_{precision}"] = n**3 / 3 / per_scale / 1e9
    return out


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _print_progress(msg: str) -> None:
    print(f"# {msg}", file=sys.stderr, flush=True)


def _fmt(x, spec=".3g"):
    return "—" if x is None else format(x, spec)


def print_report(report: dict) -> None:
    mach = report["machine"]
    print(f"\nMachine: {mach['cpu_count']} CPU cores (BLAS threads: {mach['blas_threads']}; "
          f"load average at start {mach['load_average_at_start'][0]:.1f}), {mach['platform']}; "
          f"ours: numpy {report['versions']['ours']['numpy']}, scipy "
          f"{report['versions']['ours']['scipy']}"
          + (f"; magnipy venv: {report['versions']['magnipy']}" if report["versions"].get(
              "magnipy") else ""))
    rows = report.get("single", [])
    if rows:
        print("\n### 1. One space: convergence scale + MagArea (clustered Euclidean, d = 10)\n")
        print("| n | ours t_conv (s) | ours area (s) | ours total (s) | scales t_conv / area | "
              "Cholesky t_conv / area (of which float32) | magnipy t_conv (s) | "
              "magnipy 30-scale fn (s) | magnipy total (s) | speed-up | t_conv rel. diff | "
              "ours area rel. err | magnipy area rel. err |")
        print("|" + "---|" * 13)
        for r in rows:
            o, m = r["ours"], r.get("magnipy", {})
            print(f"| {r['n']} | {o['time_t_conv']:.2f} | {o['time_area']:.2f} | "
                  f"{o['time_total']:.2f} | {_fmt(o.get('scales_t_conv'), 'd')} / "
                  f"{_fmt(o.get('scales_area'), 'd')} | {_factor_str(o['factor_t_conv'])} / "
                  f"{_factor_str(o['factor_area'])} | {_fmt(m.get('time_t_conv'), '.2f')} | "
                  f"{_fmt(m.get('time_function'), '.2f')} | {_fmt(m.get('time_total'), '.2f')} | "
                  f"{_fmt(r.get('speedup'), '.1f')}× | {_fmt(r.get('t_conv_rel_diff'), '.1e')} | "
                  f"{_fmt(r.get('ours_area_rel_err'), '.1e')} | "
                  f"{_fmt(r.get('magnipy_area_rel_err'), '.1e')} |")
    many = report.get("many")
    if many:
        o, m = many["ours"], many.get("magnipy", {})
        print(f"\n### 2. Many small spaces: {many['n_spaces']} spaces × {many['size']} points "
              "(reference-free MagArea)\n")
        print("| ours total (s) | magnipy Diversipy total (s) | speed-up | t_cut rel. diff | "
              "max area rel. diff (exact vs 30-pt trapezoid) |")
        print("|---|---|---|---|---|")
        print(f"| {o['time_total']:.2f} | {_fmt(m.get('time_total'), '.2f')} | "
              f"{_fmt(many.get('speedup'), '.1f')}× | {_fmt(many.get('t_cut_rel_diff'), '.1e')} | "
              f"{_fmt(many.get('area_max_rel_diff'), '.1e')} |")
    large = report.get("large")
    if large:
        print("\n### 3. Large n (ours only)\n")
        print("| n | d | metric | t_conv | MagArea | distances (s) | t_conv (s) | area (s) | "
              "total (s) | scales evaluated | Cholesky t_conv + area | peak RSS (GiB) | "
              "one n×n float64 matrix (GiB) |")
        print("|" + "---|" * 13)
        for r in large:
            print(f"| {r['n']} | {r['d']} | {r['metric']} | {r['t_conv']:.5g} | "
                  f"{r['mag_area']:.6g} | {r['time_dist']:.1f} | {r['time_t_conv']:.1f} | "
                  f"{r['time_area']:.1f} | {r['time_total']:.1f} | "
                  f"{_fmt(r.get('scales_evaluated'), 'd')} | "
                  f"{r['n_factor_t_conv']} + {r['n_factor_area']} | "
                  f"{r['peak_rss_gib']:.2f} | {r['dense_matrix_gib']:.2f} |")
        for r in large:
            if "mag_area_exact" in r:
                print(f"\nn = {r['n']} {r['metric']}: against the exact dense computation "
                      f"(float64 Cholesky at every scale, rtol 1e-10): t_conv rel. error "
                      f"{r['t_conv_rel_err']:.1e}, MagArea rel. error {r['mag_area_rel_err']:.1e}")
    eff = report.get("efficiency")
    if eff:
        p64, p32 = eff["matmul_gflops_float64"], eff["matmul_gflops_float32"]
        print(f"\n### 4. Dense-path efficiency (measured matmul rate, 4000×4000: float64 "
              f"{p64:.1f} GFLOP/s, float32 {p32:.1f} GFLOP/s)\n")
        print("| n | prepare space (s) | float64 path: s per scale | GFLOP/s | share of float64 "
              "matmul | mixed path: s per scale | GFLOP/s | share of float32 matmul |")
        print("|" + "---|" * 8)
        for r in eff["rows"]:
            g64, g32 = r.get("gflops_double"), r.get("gflops_mixed")
            print(f"| {r['n']} | {r['time_prepare']:.3f} | "
                  f"{_fmt(r.get('time_per_scale_double'), '.3f')} | {_fmt(g64, '.1f')} | "
                  f"{_fmt(g64 and g64 / p64, '.0%')} | "
                  f"{_fmt(r.get('time_per_scale_mixed'), '.3f')} | {_fmt(g32, '.1f')} | "
                  f"{_fmt(g32 and g32 / p32, '.0%')} |")


def _factor_str(counts: dict) -> str:
    total = counts["dpotrf"] + counts["spotrf"]
    return "—" if total == 0 else f"{total} ({counts['spotrf']})"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,1000,2000,4000",
                    help="comma-separated n for section 1 (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=1, help="timing repeats (minimum reported)")
    ap.add_argument("--skip-magnipy", action="store_true", help="time ours only")
    ap.add_argument("--json", type=Path, help="write all figures to this JSON file")
    ap.add_argument("--large", action="store_true",
                    help="also run section 3 (n = --large-n; takes many minutes and ~8 GB)")
    ap.add_argument("--large-n", type=int, default=20000, help="n of section 3")
    ap.add_argument("--large-cases", default="euclidean,cosine",
                    help="section 3 cases: euclidean (d = 10), cosine (d = 384)")
    ap.add_argument("--n-spaces", type=int, default=200, help="section 2: number of spaces")
    ap.add_argument("--space-size", type=int, default=300, help="section 2: points per space")
    ap.add_argument("--no-many", action="store_true", help="skip section 2")
    ap.add_argument("--no-accuracy", action="store_true",
                    help="skip the rtol-1e-10 reference integrals of section 1")
    ap.add_argument("--threads", type=int,
                    help="BLAS threads for ours AND magnipy (default: the libraries' default, all "
                         "cores); use 1 on a machine shared with other jobs, where multithreaded "
                         "OpenBLAS slows down by orders of magnitude")
    ap.add_argument("--rtol", type=float, default=1e-4,
                    help="relative tolerance of our MagArea integrals (default: %(default)s, the "
                         "accuracy the comparison asks for)")
    ap.add_argument("--validate", action="store_true",
                    help="section 3: also compute the exact dense result (float64 Cholesky at "
                         "every scale) and report the errors; feasible up to n of about 8,000")
    ap.add_argument("--_large-case", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global RTOL
    RTOL = args.rtol
    if args.threads:
        from threadpoolctl import threadpool_limits

        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS"):
            os.environ[var] = str(args.threads)  # the magnipy worker and large-case children
        threadpool_limits(args.threads)

    if args._large_case:  # child process of section 3
        n, d, metric, validate = args._large_case.split(",")
        print(json.dumps(large_case(int(n), int(d), metric, validate == "1")))
        return {}

    import scipy

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    report = {
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "blas_threads": args.threads or "default",
                    "load_average_at_start": os.getloadavg()},
        "versions": {"ours": {"numpy": np.__version__, "scipy": scipy.__version__,
                              "diversity_core": diversity_core.__version__}},
        "settings": vars(args) | {"json": str(args.json) if args.json else None},
    }
    report["single"], magnipy_versions = bench_single(
        sizes, args.repeats, args.skip_magnipy, not args.no_accuracy)
    if not args.no_many:
        _print_progress(f"many small spaces: {args.n_spaces} × {args.space_size} ...")
        report["many"] = bench_many(args.n_spaces, args.space_size, args.skip_magnipy)
    if args.large:
        report["large"] = bench_large(args.large_n, args.large_cases.split(","), args.validate)
    _print_progress("dense-path efficiency ...")
    report["efficiency"] = {
        "matmul_gflops_float64": matmul_gflops(dtype=np.float64),
        "matmul_gflops_float32": matmul_gflops(dtype=np.float32),
        "rows": [cholesky_gflops(n, max(args.repeats, 1)) for n in sizes],
    }
    if magnipy_versions:
        report["versions"]["magnipy"] = magnipy_versions
    print_report(report)
    if args.json:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(report, indent=2, default=float))
        tmp.replace(args.json)
    return report


if __name__ == "__main__":
    main()
