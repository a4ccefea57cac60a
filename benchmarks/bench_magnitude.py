"""Speed and accuracy of diversity_core's magnitude engine, against the reference library magnipy.

Run with our venv's python from the repository root (magnipy runs in its own venv through
tests/support/magnipy_bridge.py; set MAGNIPY_PYTHON to reuse an existing one)::

    nice -n 10 .venv/bin/python benchmarks/bench_magnitude.py                 # sections 1 and 2
    nice -n 10 .venv/bin/python benchmarks/bench_magnitude.py --large 50000   # and section 3
    nice -n 10 .venv/bin/python benchmarks/bench_magnitude.py --sizes 1500 --threads 1 \\
        --integration cc25,hermite_log --csv benchmarks/results/magnitude_vs_magnipy.csv

Three shapes (markdown tables on stdout; ``--json out.json`` writes every figure, ``--csv
out.csv`` sections 1 and 2 under a header naming the command, date, machine, BLAS threads,
versions and load), each of ours timed against magnipy back to back in one run, on the same
data, with the ratio and the error. ``--integration`` names the MagArea rules of ours
(``MagnitudeSettings(integration=...)``, which the timed functions take; default: the package's
rule): each is timed on the same data in turn, one row per rule.

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
   single-space loop (they must agree to 1e-10), and each library's areas against accurate
   integrals as in section 1 (magnipy's: its trapezoid rule times its t_cut, at its t_cut).
3. **Large n** (``--large N``, ours only: magnipy would need hours and a 20 GB matrix): a set of
   N points through :func:`magnitude_space` (the large-n path beyond 10,000 points): build,
   convergence scale, MagArea to ``--large-rtol`` (1e-4), peak resident memory, the run's own
   error budget; each case in a fresh process. ``--large-check`` repeats it at tolerances 10
   times tighter (the self-consistency check); ``--large-validate`` compares with the exact
   dense path (feasible up to n of about 10,000).

Each of ``--repeats`` repetitions (default 2) draws new data and runs every rule of ours (the
engine's cache emptied before each, the first rule changing from one repetition to the next),
then magnipy, so that both libraries see the same spells of the machine's speed; times are the
minima over the repetitions, errors the maxima. Both libraries use their BLAS with
``--threads`` threads (default 2). The machine's load (``os.getloadavg``) is printed before
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
import record

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "tests" / "support"):  # the package (also from elsewhere), the bridge
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_quadrature_rule import solves  # noqa: E402  (it imports the package)

import diversity_core  # noqa: E402
from diversity_core import magnitude as mg  # noqa: E402
from diversity_core import pairwise_distances  # noqa: E402
from diversity_core.magnitude.settings import MagnitudeSettings  # noqa: E402

SEED = 20241210
DIM = 10
BATCH_DIM = 384  # sentence embeddings


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def gaussian_mixture(n: int, d: int = DIM, *, k: int = 10, spread: float = 4.0, seed=None):
    """n points from k unit-variance Gaussian clusters whose centres are N(0, spread² I)."""
    rng = np.random.default_rng([SEED, n, d] if seed is None else seed)
    centres = spread * rng.normal(size=(k, d))
    labels = rng.integers(k, size=n)
    return centres[labels] + rng.normal(size=(n, d))


def text_like_sets(n_sets: int, size: int, d: int = BATCH_DIM, seed: int = 3,
                   repetition: int = 0) -> list[np.ndarray]:
    """Sets that resemble sentence embeddings of generated responses: each set around one of
    100 "prompts", its spread drawn per set (the temperature)."""
    rng = np.random.default_rng([SEED, seed, n_sets, size, repetition])
    prompts = rng.normal(size=(100, d))
    return [3 * prompts[rng.integers(100)] + rng.uniform(0.5, 2.0) * rng.normal(size=(size, d))
            for _ in range(n_sets)]


def model_like_sets(n_sets: int, size: int, d: int = BATCH_DIM, seed: int = 4,
                    repetition: int = 0) -> list[np.ndarray]:
    """Subsamples of a clustered collection (topics), scaled per set: Table 2's shape."""
    rng = np.random.default_rng([SEED, seed, n_sets, size, repetition])
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


def _magnipy(job: dict) -> tuple[dict, dict]:
    """magnipy's result of ``job`` and its versions: one worker process, which first runs a
    small default job (imports and first calls warmed up) and then ``job``, timed inside."""
    import magnipy_bridge

    res = magnipy_bridge.run_magnipy({"jobs": [
        {"X": gaussian_mixture(50, seed=[SEED, 0]), "metric": "euclidean", "default": True},
        job]})
    return res["jobs"][1], res["versions"]


def _turns(rules: list[str], repetition: int) -> list[str]:
    """The rules in the order of this repetition: each takes its turn first."""
    k = repetition % len(rules)
    return rules[k:] + rules[:k]


def accurate_area(D, t_cut: float) -> float:
    """∫_0^t_cut Mag(t) dt: Cholesky at every scale (solver="direct"), rtol 1e-11."""
    return mg.mag_area(mg.MagnitudeSpace(D, solver="direct"), t_cut, rtol=1e-11)


def _rel(values, reference) -> float:
    return float(np.max(np.abs(np.asarray(values) / np.asarray(reference) - 1)))


# --------------------------------------------------------------------------------------------
# 1. Defaults, one space
# --------------------------------------------------------------------------------------------


def ours_defaults(X, settings):
    """Distances, convergence scale and MagArea under ``settings`` (the package's defaults but
    for the integration rule)."""
    D = pairwise_distances(X)
    t_conv = settings.convergence_scale(D)
    return t_conv, settings.mag_area(D, t_conv)


def default_solves(D, settings) -> int:
    """The distinct scales a fresh space of ``D`` solves for t_conv and MagArea (each one
    factorisation or conjugate-gradient solve)."""
    space = mg.MagnitudeSpace(D)
    settings.mag_area(space, settings.convergence_scale(space))
    return solves(space)


def bench_defaults(sizes, rules: list[str], repeats: int, skip_magnipy: bool):
    """Rows of section 1, one per (n, rule): each repetition draws a new cloud, times every
    rule on it (in turn, the cache emptied before each), then magnipy; times are minima,
    errors maxima over the repetitions."""
    rows, versions = [], {}
    settings = {rule: MagnitudeSettings(integration=rule) for rule in rules}
    for n in sizes:
        load = _load()
        ours = {rule: {"time": math.inf, "area_rel_err": 0.0, "solves": 0} for rule in rules}
        theirs = None
        for r in range(repeats):
            X = gaussian_mixture(n, seed=[SEED, n, DIM, r])
            values = {}
            for rule in _turns(rules, r):
                seconds, values[rule] = _timed(lambda X=X, s=settings[rule]: ours_defaults(X, s),
                                               1)
                ours[rule]["time"] = min(ours[rule]["time"], seconds)
            D = pairwise_distances(X)
            t_conv = values[rules[0]][0]  # the search does not depend on the rule
            assert all(values[rule][0] == t_conv for rule in rules), values
            reference = accurate_area(D, t_conv)
            for rule in rules:
                o = ours[rule]
                o["t_conv"], o["mag_area"] = values[rule]
                o["area_rel_err"] = max(o["area_rel_err"], _rel(values[rule][1], reference))
                o["solves"] = max(o["solves"], default_solves(D, settings[rule]))
            if not skip_magnipy:
                job, versions = _magnipy({"X": X, "metric": "euclidean", "default": True})
                err = _rel(job["mag_area"], accurate_area(D, job["t_conv"]))
                theirs = {"time": min(job["time_total"], theirs["time"] if theirs else math.inf),
                          "t_conv": job["t_conv"], "mag_area": job["mag_area"],
                          "area_rel_err": max(err, theirs["area_rel_err"] if theirs else 0.0)}
            _progress(f"defaults n={n} repetition {r + 1} of {repeats} done")
        for rule in rules:
            row = {"n": n, "rule": rule, "load": load, "ours": ours[rule]}
            if theirs is not None:
                row["magnipy"] = theirs
                row["ratio"] = theirs["time"] / ours[rule]["time"]
            rows.append(row)
    return rows, versions


# --------------------------------------------------------------------------------------------
# 2. Batches
# --------------------------------------------------------------------------------------------


def ours_batch(Xs, settings):
    Ds = [pairwise_distances(X, "cosine") for X in Xs]
    t_cut = float(np.median(settings.convergence_scales(Ds)))
    return t_cut, settings.mag_areas(Ds, t_cut)


def ours_loop(Xs, settings):
    spaces = [mg.MagnitudeSpace(pairwise_distances(X, "cosine")) for X in Xs]
    t_cut = float(np.median([settings.convergence_scale(s) for s in spaces]))
    return t_cut, np.array([settings.mag_area(s, t_cut) for s in spaces]), spaces


def bench_batches(shapes, rules: list[str], repeats: int, skip_magnipy: bool):
    """Rows of section 2, one per (shape, rule), repeated as in :func:`bench_defaults`; also
    the single-space loop of each rule (its spaces count the solves per set)."""
    out = []
    settings = {rule: MagnitudeSettings(integration=rule) for rule in rules}
    for name, n_sets, size, make in shapes:
        load = _load()
        ours = {rule: {"time": math.inf, "loop_time": math.inf, "area_rel_err": 0.0,
                       "batch_vs_loop": 0.0, "t_cut_batch_vs_loop": 0.0, "solves": 0.0}
                for rule in rules}
        theirs = None
        for r in range(repeats):
            Xs = make(n_sets, size, repetition=r)
            values = {}
            for rule in _turns(rules, r):
                seconds, values[rule] = _timed(lambda Xs=Xs, s=settings[rule]: ours_batch(Xs, s),
                                               1)
                ours[rule]["time"] = min(ours[rule]["time"], seconds)
                seconds, loop = _timed(lambda Xs=Xs, s=settings[rule]: ours_loop(Xs, s), 1)
                o = ours[rule]
                o["loop_time"] = min(o["loop_time"], seconds)
                o["batch_vs_loop"] = max(o["batch_vs_loop"], _rel(values[rule][1], loop[1]))
                o["t_cut_batch_vs_loop"] = max(o["t_cut_batch_vs_loop"],
                                               abs(values[rule][0] / loop[0] - 1))
                o["solves"] = max(o["solves"], float(np.mean([solves(s) for s in loop[2]])))
            Ds = [pairwise_distances(X, "cosine") for X in Xs]
            t_cut = values[rules[0]][0]  # the searches do not depend on the rule
            assert all(values[rule][0] == t_cut for rule in rules), values
            reference = [accurate_area(D, t_cut) for D in Ds]
            for rule in rules:
                o = ours[rule]
                o["t_cut"] = values[rule][0]
                o["area_rel_err"] = max(o["area_rel_err"], _rel(values[rule][1], reference))
            if not skip_magnipy:
                job, _ = _magnipy({"kind": "diversipy", "Xs": Xs, "metric": "cosine"})
                # Diversipy reports area / t_cut by the 30-point trapezoid rule.
                t_m = job["t_cut"]
                err = _rel(np.asarray(job["mag_areas"]) * t_m,
                           [accurate_area(D, t_m) for D in Ds])
                theirs = {"time": min(job["time_total"], theirs["time"] if theirs else math.inf),
                          "t_cut": t_m,
                          "area_rel_err": max(err, theirs["area_rel_err"] if theirs else 0.0)}
            _progress(f"batch {name} repetition {r + 1} of {repeats} done")
        for rule in rules:
            row = {"shape": name, "n_sets": n_sets, "size": size, "rule": rule, "load": load,
                   "ours": ours[rule]}
            if theirs is not None:
                row["magnipy"] = theirs
                row["ratio"] = theirs["time"] / ours[rule]["time"]
                row["loop_ratio"] = theirs["time"] / ours[rule]["loop_time"]
            out.append(row)
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
        print("| n | rule | load | ours (s) | magnipy (s) | ratio | solves | ours MagArea rel. "
              "err | magnipy MagArea rel. err |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            m = r.get("magnipy", {})
            print(f"| {r['n']:,} | {r['rule']} | {r['load']:.1f} | {r['ours']['time']:.3f} | "
                  f"{_fmt(m.get('time'), '.2f')} | {_fmt(r.get('ratio'), '.1f')}× | "
                  f"{r['ours']['solves']} | {r['ours']['area_rel_err']:.1e} | "
                  f"{_fmt(m.get('area_rel_err'), '.1e')} |")
    rows = report.get("batches")
    if rows:
        print("\n### 2. Batches: convergence_scales → median → mag_areas (cosine)\n")
        print("| sets × points | rule | load | ours, batch (s) | ours, loop (s) | magnipy "
              "Diversipy (s) | ratio batch | ratio loop | solves per set | batch vs loop (max "
              "rel.) | ours MagArea rel. err | magnipy MagArea rel. err |")
        print("|" + "---|" * 12)
        for r in rows:
            m, o = r.get("magnipy", {}), r["ours"]
            print(f"| {r['n_sets']:,} × {r['size']} | {r['rule']} | {r['load']:.1f} | "
                  f"{o['time']:.3f} | {o['loop_time']:.2f} | "
                  f"{_fmt(m.get('time'), '.2f')} | {_fmt(r.get('ratio'), '.1f')}× | "
                  f"{_fmt(r.get('loop_ratio'), '.1f')}× | {o['solves']:.1f} | "
                  f"{o['batch_vs_loop']:.1e} | {o['area_rel_err']:.1e} | "
                  f"{_fmt(m.get('area_rel_err'), '.1e')} |")
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


CSV_COLUMNS = ["section", "case", "sets", "points", "dim", "metric", "rule", "load",
               "ours_s", "magnipy_s", "ratio", "ours_loop_s", "loop_ratio", "ours_solves",
               "ours_rel_error", "magnipy_rel_error", "batch_vs_loop", "t_cut",
               "magnipy_t_cut"]
CSV_LEGEND = (
    "one row per section, case and MagArea rule; new data each repetition; ours_s and "
    "magnipy_s: wall-clock minima over the repetitions (ours after emptying the engine's "
    "cache), ratio = magnipy_s / ours_s; ours_loop_s: the single-space functions in a loop; "
    "ours_solves: distinct scales solved for t_conv + MagArea (one factorisation or "
    "conjugate-gradient solve each; batches: the mean per set of the loop's spaces); "
    "*_rel_error: the largest relative error of a MagArea against Cholesky at every scale and "
    "Clenshaw-Curtis to rtol 1e-11 (magnipy: its trapezoid rule at its own t_cut); "
    "batch_vs_loop: the largest relative difference between the two; t_cut, magnipy_t_cut: "
    "the last repetition's limit of integration (t_conv; batches: the median); load: the "
    "1-minute load average before the case")


def csv_rows(report: dict) -> list[dict]:
    """The report's sections 1 and 2 as rows of :data:`CSV_COLUMNS`."""
    def number(x, spec):
        return "" if x is None else format(x, spec)

    rows = []
    for r in report.get("defaults", []):
        o, m = r["ours"], r.get("magnipy", {})
        rows.append({"section": "defaults", "case": "clustered", "sets": 1, "points": r["n"],
                     "dim": DIM, "metric": "euclidean", "rule": r["rule"],
                     "load": f"{r['load']:.2f}", "ours_s": f"{o['time']:.4g}",
                     "magnipy_s": number(m.get("time"), ".4g"),
                     "ratio": number(r.get("ratio"), ".3g"), "ours_loop_s": "",
                     "loop_ratio": "", "ours_solves": o["solves"],
                     "ours_rel_error": f"{o['area_rel_err']:.2g}",
                     "magnipy_rel_error": number(m.get("area_rel_err"), ".2g"),
                     "batch_vs_loop": "", "t_cut": f"{o['t_conv']:.8g}",
                     "magnipy_t_cut": number(m.get("t_conv"), ".8g")})
    for r in report.get("batches", []):
        o, m = r["ours"], r.get("magnipy", {})
        rows.append({"section": "batch", "case": r["shape"], "sets": r["n_sets"],
                     "points": r["size"], "dim": BATCH_DIM, "metric": "cosine",
                     "rule": r["rule"], "load": f"{r['load']:.2f}",
                     "ours_s": f"{o['time']:.4g}", "magnipy_s": number(m.get("time"), ".4g"),
                     "ratio": number(r.get("ratio"), ".3g"),
                     "ours_loop_s": f"{o['loop_time']:.4g}",
                     "loop_ratio": number(r.get("loop_ratio"), ".3g"),
                     "ours_solves": f"{o['solves']:.1f}",
                     "ours_rel_error": f"{o['area_rel_err']:.2g}",
                     "magnipy_rel_error": number(m.get("area_rel_err"), ".2g"),
                     "batch_vs_loop": f"{o['batch_vs_loop']:.2g}", "t_cut": f"{o['t_cut']:.8g}",
                     "magnipy_t_cut": number(m.get("t_cut"), ".8g")})
    return rows


def _git_commit() -> str:
    """The repository's commit, ``+changes`` where tracked files differ from it (read when the
    run starts)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return commit + (" +changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def write_csv(path: Path, report: dict, *, command: str, note: str,
              load: tuple[str, str]) -> Path:
    """Sections 1 and 2 as a CSV whose header (``#`` lines, :func:`record.write_csv`) names
    the command, date, machine, BLAS threads, versions and load."""
    v = report["versions"]
    magnipy = v.get("magnipy")
    return record.write_csv(path, CSV_COLUMNS, csv_rows(report), command=command, note=note,
                            load=load, extra=(
        ("BLAS threads", str(report["machine"]["threads"])),
        ("ours", f"diversity_core {v['diversity_core']} at commit {v['commit']}; SciPy "
                 f"{v['scipy']}; MagArea rules {', '.join(report['rules'])}"),
        ("magnipy", "not run (--skip-magnipy)" if not magnipy else
         ", ".join(f"{k} {x}" for k, x in magnipy.items()) + " (its own virtualenv)"),
        ("columns", CSV_LEGEND)))


def _rules(text: str) -> list[str]:
    rules = list(dict.fromkeys(r.strip() for r in text.split(",") if r.strip()))
    unknown = [r for r in rules if r not in mg.INTEGRATION_METHODS]
    if not rules or unknown:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or repr(text)}: not a MagArea rule; use one or more of "
            f"{', '.join(mg.INTEGRATION_METHODS)}, comma-separated")
    return rules


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,1500,2000,4000",
                    help="section 1: comma-separated n (default: %(default)s)")
    ap.add_argument("--integration", type=_rules, default=[mg.DEFAULT_INTEGRATION],
                    metavar="METHOD[,METHOD...]",
                    help="MagArea rules of ours (magnitude.integration), each timed on the same "
                         "data in turn (default: the package's, %(default)s)")
    ap.add_argument("--batch-shapes", default="1000x10,200x300", metavar="SETSxPOINTS,...",
                    help="section 2: the text-like batch first, then Table 2's "
                         "(default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="repetitions, each on new data (times: minimum; errors: maximum)")
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
    ap.add_argument("--csv", type=Path, metavar="PATH",
                    help="write sections 1 and 2 to this CSV, one row per case and rule, under "
                         "a header naming the command, date, machine, versions and load")
    ap.add_argument("--_large-case", help=argparse.SUPPRESS)
    record.add_record_options(ap)
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # the magnipy worker and the large-case children
    threadpool_limits(args.threads)
    if args._large_case:  # child process of section 3
        print(json.dumps(large_case(*json.loads(args._large_case)), default=float))
        return {}

    shapes = [tuple(int(k) for k in shape.lower().split("x"))
              for shape in args.batch_shapes.split(",")]
    if len(shapes) != 2 or any(len(shape) != 2 for shape in shapes):
        ap.error(f"--batch-shapes {args.batch_shapes!r}: two SETSxPOINTS, e.g. 1000x10,200x300")
    load_before = record.load_average()
    with record.recording(args.record, args.note):
        import scipy

        report = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                              "threads": args.threads, "load_start": _load()},
                  "versions": {"numpy": np.__version__, "scipy": scipy.__version__,
                               "diversity_core": diversity_core.__version__,
                               "commit": _git_commit()},
                  "rules": args.integration}
        if not args.no_defaults:
            sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
            report["defaults"], magnipy_versions = bench_defaults(
                sizes, args.integration, args.repeats, args.skip_magnipy)
            if magnipy_versions:
                report["versions"]["magnipy"] = magnipy_versions
        if not args.no_batches:
            report["batches"] = bench_batches(
                [("text", *shapes[0], text_like_sets), ("table2", *shapes[1], model_like_sets)],
                args.integration, args.repeats, args.skip_magnipy)
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
    if args.csv:
        write_csv(args.csv, report, command=record.command_line(), note=args.note,
                  load=(load_before, record.load_average()))
    return report


if __name__ == "__main__":
    main()
