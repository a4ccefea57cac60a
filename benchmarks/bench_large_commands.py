"""The large-n path through the command line, and where its time goes.

    .venv/bin/python benchmarks/bench_large_commands.py --csv
    .venv/bin/python benchmarks/bench_large_commands.py --points 3000 --integration cc25

Two jobs, each in a fresh process, each on points written first as ``.npy``
(``bench_large.points``: five Gaussian clusters in float32, as embeddings come):

* ``python -m diversity_core score X --metrics magarea --metric-space euclidean`` on
  N × 32 points;
* ``python -m diversity_core compare Y --metric-space euclidean`` on N × 64 points (MagArea
  and every reference-free baseline),

each with every rule of ``--integration`` (default: the package's). Per job: the wall time and
the peak resident memory of the command (the child's ``ru_maxrss``). The budget on 2 cores is
300 s and 4 GB each (``--points`` default 30,000).

Then the breakdown, in a fresh process on the N × 32 points: the large-n path's build,
convergence scale and MagArea as ``score`` runs them, with the products each phase takes (float32
products inside conjugate gradients, float64 products of the refinement steps, which also form
the derivative and the distance bound), each product's time as the engine runs it (by the
compiled kernels where they are built) and by NumPy's passes, and one float32 product by
NumPy's passes split into them, each timed alone over every stored panel on one thread at
t_conv: scaling the distances (``−t·D``, and the exponent floor where some entry reaches it),
the exponential, and the two matrix–vector products (each panel and its mirror); beside them
the compiled kernel's float32 product on one thread and one read of every panel, the memory
traffic no product can avoid. ``products × seconds per product`` against each phase's
time says how much of it the products are. The breakdown reads the engine's panels and panel
sizes (private names of ``diversity_core.magnitude._large``), as a profiler would.

``--csv`` writes ``large_commands.csv`` and ``large_product_breakdown.csv`` into ``--results``
(default ``benchmarks/results/``) through ``record.write_csv``: command, date, machine, versions
and load average above each table. Run it on an otherwise idle machine: the
times are the point.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import record
from bench_large import points

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S, BUDGET_GB = 300.0, 4.0
COMMAND_COLUMNS = ["job", "integration", "n_points", "n_features", "wall_s", "peak_rss_gb",
                   "within_budget"]
BREAKDOWN_COLUMNS = ["part", "seconds", "per_product_s", "products_float32",
                     "products_float64", "share", "what"]


def run_command(words: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident GB of one command, run as a child of this process."""
    # stderr (progress bars, warnings) goes to a file: a pipe left unread until the child ends
    # would stop the child once it is full.
    with tempfile.TemporaryFile(mode="w+") as log:
        start = time.perf_counter()
        child = subprocess.Popen(words, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code:
            log.seek(0)
            raise RuntimeError(f"{' '.join(words)} failed ({code}):\n{log.read()[-3000:]}")
    return wall, usage.ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


def commands(n: int, rules: list[str], seed: int, folder: Path) -> list[dict]:
    """The ``score`` and ``compare`` jobs, one row each per rule."""
    import numpy as np

    rows = []
    for job, d, words in (("score", 32, ["score", "--metrics", "magarea"]), ("compare", 64,
                                                                             ["compare"])):
        path = folder / f"{job}_{n}x{d}.npy"
        np.save(path, points("clustered", n, d, seed))
        for rule in rules:
            wall, rss = run_command([sys.executable, "-m", "diversity_core", *words, str(path),
                                     "--metric-space", "euclidean", "--integration", rule])
            rows.append({"job": job, "integration": rule, "n_points": n, "n_features": d,
                         "wall_s": round(wall, 1), "peak_rss_gb": round(rss, 2),
                         "within_budget": wall <= BUDGET_S and rss <= BUDGET_GB})
            print(f"{job} {n} x {d} ({rule}): {wall:.1f} s, {rss:.2f} GB", flush=True)
    return rows


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def product_parts(space, t: float) -> dict:
    """Seconds of one float32 product's parts over every panel, one thread each."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from diversity_core.magnitude import _large

    rows, columns = _large._PANEL_ROWS, _large._CHUNK_COLUMNS
    clamp = t * space.D_max > _large.FLOAT32_EXPONENT_FLOOR
    x = np.ones(space.n_unique, dtype=np.float32)
    y = np.zeros_like(x)
    block = np.empty(rows * columns, dtype=np.float32)
    seconds = dict.fromkeys(("scale", "exp", "matvec", "read"), 0.0)
    with threadpool_limits(1):
        for k, panel in enumerate(space._panels):
            p = k * rows
            h = panel.shape[0]
            seconds["read"] += _timed(lambda panel=panel: panel.sum(dtype=np.float32))
            for c in range(0, panel.shape[1], columns):
                D = panel[:, c:c + columns]
                Z = block[:D.size].reshape(D.shape)
                start = time.perf_counter()
                np.multiply(D, -t, out=Z)
                if clamp:
                    np.maximum(Z, -_large.FLOAT32_EXPONENT_FLOOR, out=Z)
                scaled = time.perf_counter()
                np.exp(Z, out=Z)
                exponentiated = time.perf_counter()
                y[p:p + h] += Z @ x[p + c:p + c + D.shape[1]]
                y[p + c:p + c + D.shape[1]] += x[p:p + h] @ Z
                done = time.perf_counter()
                seconds["scale"] += scaled - start
                seconds["exp"] += exponentiated - scaled
                seconds["matvec"] += done - exponentiated
    return seconds


def whole_products(space, t: float) -> tuple[float, float]:
    """Seconds of one float32 and one float64 product as the engine runs them (best of three
    and of two)."""
    import numpy as np

    x64 = np.ones(space.n_unique)
    x32 = x64.astype(np.float32)
    whole32 = min(_timed(lambda: space._product32(t, x32)) for _ in range(3))
    whole64 = min(_timed(lambda: space._product64(t, x64, derivative=True, absolute=True))
                  for _ in range(2))
    return whole32, whole64


def numpy_products(space, t: float) -> tuple[float, float]:
    """:func:`whole_products` by NumPy's passes, the compiled kernels set aside meanwhile."""
    from diversity_core.magnitude import _large

    kernels = _large._compiled_panel_product32, _large._compiled_panel_product64
    _large._compiled_panel_product32 = _large._compiled_panel_product64 = None
    try:
        return whole_products(space, t)
    finally:
        _large._compiled_panel_product32, _large._compiled_panel_product64 = kernels


def breakdown(n: int, seed: int) -> list[dict]:
    """The breakdown's rows (see the module docstring), in this process."""
    from threadpoolctl import threadpool_limits

    from diversity_core.magnitude import LargeMagnitudeSpace, _large

    X = points("clustered", n, 32, seed)
    phases = {}
    start = time.perf_counter()
    space = LargeMagnitudeSpace(X, "euclidean")
    phases["build"] = time.perf_counter() - start
    start = time.perf_counter()
    t_conv = space.convergence_scale()
    phases["convergence_scale"] = time.perf_counter() - start
    start = time.perf_counter()
    space.mag_area(t_conv)
    phases["mag_area"] = time.perf_counter() - start
    counts = {phase: [0, 0] for phase in ("convergence_scale", "mag_area")}
    for r in space.records:
        counts[r["phase"]][0] += r["iterations"]
        counts[r["phase"]][1] += r["refinements"] + 1
    whole32, whole64 = whole_products(space, t_conv)
    compiled = _large._compiled_panel_product32 is not None
    if compiled:
        numpy32, numpy64 = numpy_products(space, t_conv)
        with threadpool_limits(1):
            single32 = whole_products(space, t_conv)[0]
    parts = product_parts(space, t_conv)
    one_thread = parts["scale"] + parts["exp"] + parts["matvec"]
    rows = [{"part": "build", "seconds": round(phases["build"], 1),
             "what": "distances into float32 panels, nearest neighbours, duplicates"}]
    for phase, (n32, n64) in counts.items():
        spent = n32 * whole32 + n64 * whole64
        rows.append({"part": phase, "seconds": round(phases[phase], 1),
                     "products_float32": n32, "products_float64": n64,
                     "share": round(spent / phases[phase], 2),
                     "what": "share: products x seconds per product (threads as the engine "
                             "runs them), over the phase's time"})
    threads = space._thread_count()
    route = "the compiled kernels" if compiled else "NumPy's passes"
    rows.append({"part": "float32 product", "per_product_s": round(whole32, 4),
                 "what": f"as the engine runs it ({route}), on {threads} threads"})
    rows.append({"part": "float64 product", "per_product_s": round(whole64, 4),
                 "what": "with the derivative's and the distance bound's columns"})
    if compiled:
        rows.append({"part": "float32 product, NumPy's passes", "per_product_s": round(numpy32, 4),
                     "what": f"where the kernels are not built, on {threads} threads"})
        rows.append({"part": "float64 product, NumPy's passes", "per_product_s": round(numpy64, 4),
                     "what": f"where the kernels are not built, on {threads} threads"})
        rows.append({"part": "float32 product, one thread", "per_product_s": round(single32, 4),
                     "what": "the compiled kernel on one thread (against one read of the panels)"})
    for part, what in (("scale", "-t*D and the exponent floor"), ("exp", "the exponential"),
                       ("matvec", "panel and mirror matrix-vector products")):
        rows.append({"part": f"float32 product: {part}", "per_product_s": round(parts[part], 4),
                     "share": round(parts[part] / one_thread, 2),
                     "what": f"NumPy's pass: {what}, one thread; share of the three passes"})
    rows.append({"part": "read every panel", "per_product_s": round(parts["read"], 4),
                 "what": f"one pass over the {sum(p.nbytes for p in space._panels) / 2**30:.2f} "
                         "GiB of panels, one thread: the traffic every product makes"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=30_000, help="points per set (default 30,000)")
    ap.add_argument("--integration", default=None,
                    help="comma-separated rules (default: the package's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-commands", action="store_true", help="only the breakdown")
    ap.add_argument("--csv", action="store_true",
                    help="write large_commands.csv and large_product_breakdown.csv into "
                         "--results")
    ap.add_argument("--results", type=Path, default=record.RESULTS,
                    help="folder of --csv's files (default benchmarks/results)")
    ap.add_argument("--note", default="", help="a line for the files' header")
    ap.add_argument("--_breakdown", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._breakdown:
        print(json.dumps(breakdown(args.points, args.seed)))
        return
    from diversity_core.magnitude import DEFAULT_INTEGRATION, INTEGRATION_METHODS

    rules = args.integration.split(",") if args.integration else [DEFAULT_INTEGRATION]
    for rule in rules:
        if rule not in INTEGRATION_METHODS:
            ap.error(f"--integration {rule}: not a MagArea rule; use one or more of "
                     f"{', '.join(INTEGRATION_METHODS)}")
    before = record.load_average()
    rows = []
    if not args.no_commands:
        with tempfile.TemporaryDirectory() as folder:
            rows = commands(args.points, rules, args.seed, Path(folder))
    after_commands = record.load_average()
    child = subprocess.run([sys.executable, __file__, "--_breakdown", "--points",
                            str(args.points), "--seed", str(args.seed)], cwd=ROOT,
                           capture_output=True, text=True, check=False)
    if child.returncode:
        raise RuntimeError(f"the breakdown failed:\n{child.stderr[-3000:]}")
    parts = json.loads(child.stdout.strip().splitlines()[-1])
    for row in parts:
        print(", ".join(f"{key} {row[key]}" for key in BREAKDOWN_COLUMNS if key in row))
    if args.csv:
        command = record.command_line()
        if rows:
            record.write_csv(args.results / "large_commands.csv", COMMAND_COLUMNS, rows,
                             command=command, note=args.note, load=(before, after_commands))
        record.write_csv(args.results / "large_product_breakdown.csv", BREAKDOWN_COLUMNS,
                         parts, command=command, note=args.note,
                         load=(after_commands, record.load_average()))


if __name__ == "__main__":
    main()
