"""The magnitude engine's torch path beside the NumPy engine, in the same run.

    python benchmarks/bench_gpu.py                        # on cuda, the target sizes
    python benchmarks/bench_gpu.py --device cpu --sizes small   # smoke run (CPU torch)

Jobs (clustered clouds in 64 dimensions, Euclidean distances):

* ``single N``: t_conv + MagArea (``--integration``, default the engine's rule, rtol 1e-6) of
  N points: the torch path from the points (distances formed on the device) against
  ``MagnitudeSpace`` (the NumPy engine as the pipeline runs it: ``magnitude_space``,
  conjugate gradients from 500 points, the large-n path above 10,000 points; MagArea by the
  rule the torch path takes, which factors every scale); with the
  device's factorisations by phase (``evaluations``), the seconds of each phase
  (``phases_s``: distances and duplicates, search, MagArea) and, up to 10,000 points, a second
  run of the same job (``repeat_s``: what of the first was a one-time cost);
* ``batch M x K``: t_conv of M sets of K points, their median as t_cut, and every set's
  MagArea: ``torch_convergence_scales`` + ``torch_mag_areas`` against
  ``convergence_scales`` + ``mag_areas``; the device's job run twice (``repeat_s``).

The targets on one H200: 10,000 points <= 0.5 s, 50,000 points <= 60 s, 200 x 300
<= 0.1 s. Each line gives both times, their ratio and the largest relative difference of the
results. The NumPy engine is skipped above ``--numpy-max`` points (its 50,000-point run took
about 8 minutes on 16 cores). Times are wall-clock seconds of one run after a warm-up (CUDA
context, cuSOLVER handles).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from record import add_record_options, recording

SIZES = {
    "full": {"single": [10_000, 50_000], "batch": [(200, 300), (1_000, 10)]},
    "small": {"single": [600, 1_500], "batch": [(20, 100), (100, 10)]},
}


def cloud(n: int, d: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(10, d))
    return (centres[rng.integers(10, size=n)] + rng.normal(size=(n, d))).astype(np.float64)


def _timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


# Single sets up to this size are timed twice on the device: the second run shows what of the
# first was a one-time cost (kernels loaded on first use, allocator growth).
REPEAT_MAX = 10_000


def single(n: int, device: str, numpy_max: int, method: str | None = None) -> dict:
    from diversity_core.magnitude import DEFAULT_INTEGRATION, TorchMagnitudeSpace, magnitude_space
    from diversity_core.magnitude._quadrature import path_rule

    method = method or DEFAULT_INTEGRATION

    X = cloud(n)

    def on_device():
        # Each phase ends in a value on the host (duplicates found, t_conv, MagArea), so the
        # device has finished its work when each mark is taken.
        marks = [time.perf_counter()]
        space = TorchMagnitudeSpace.from_points(X, device=device)
        marks.append(time.perf_counter())
        t_conv = space.convergence_scale()
        marks.append(time.perf_counter())
        area = space.mag_area(t_conv, method=method)
        marks.append(time.perf_counter())
        phases = dict(zip(("build", "search", "area"), np.round(np.diff(marks), 4).tolist(),
                          strict=True))
        return t_conv, area, space.evaluations, phases

    (t_dev, a_dev, evaluations, phases), dev_s = _timed(on_device)
    row = {"job": f"single {n:,}", "torch_s": dev_s, "t_conv": t_dev, "mag_area": a_dev,
           "evaluations": evaluations, "phases_s": phases}
    if n <= REPEAT_MAX:
        (t_again, a_again, _, phases_again), again_s = _timed(on_device)
        row.update(repeat_s=round(again_s, 4), repeat_phases_s=phases_again,
                   repeat_same=(t_again, a_again) == (t_dev, a_dev))
    if n <= numpy_max:
        def on_cpu():
            space = magnitude_space(X)
            t_conv = space.convergence_scale()
            # The rule the torch path takes (it factors every scale): ``auto`` would take
            # hermite_log where NumPy's conjugate gradients answer (from 500 points).
            rule = path_rule(method, factored=True, diameter=space.diameter)
            return t_conv, space.mag_area(t_conv, method=rule)

        (t_cpu, a_cpu), cpu_s = _timed(on_cpu)
        row.update(numpy_s=cpu_s, rel_diff=max(abs(t_dev / t_cpu - 1), abs(a_dev / a_cpu - 1)))
    return row


def large(n: int, device: str, dense: dict | None = None) -> dict:
    """The device's large-n path at ``n`` points, against ``dense`` (this run's ``single n``
    row on the same device, if any)."""
    from diversity_core.magnitude import TorchLargeMagnitudeSpace

    X = cloud(n)

    def on_device():
        space = TorchLargeMagnitudeSpace(X, "euclidean", device=device)
        t_conv = space.convergence_scale()
        return space, t_conv, space.mag_area(t_conv)

    (space, t_dev, a_dev), dev_s = _timed(on_device)
    row = {"job": f"large {n:,}", "torch_s": dev_s, "t_conv": t_dev, "mag_area": a_dev,
           "evaluations": space.evaluations,
           "cg_products": sum(r["iterations"] for r in space.records),
           "area_error": space.area_error}
    if dense is not None:  # the dense torch path stands in the NumPy column of this row
        row.update(numpy_s=dense["torch_s"], reference="dense torch path",
                   rel_diff=max(abs(t_dev / dense["t_conv"] - 1),
                                abs(a_dev / dense["mag_area"] - 1)))
    return row


def numpy_on_cores(n: int, cores: int) -> dict:
    """The NumPy engine's t_conv + MagArea of ``cloud(n)`` in a fresh process whose affinity
    is the first ``cores`` cores."""
    proc = subprocess.run([sys.executable, __file__, "--_numpy-case", json.dumps([n, cores])],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"numpy case n={n} cores={cores} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _numpy_case(n: int, cores: int) -> dict:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    from diversity_core.magnitude import magnitude_space

    X = cloud(n)
    magnitude_space(cloud(300)).convergence_scale()  # warm-up: imports, BLAS threads

    def on_cpu():
        space = magnitude_space(X)
        t_conv = space.convergence_scale()
        return t_conv, space.mag_area(t_conv)

    (t_conv, area), seconds = _timed(on_cpu)
    return {"job": f"numpy {n:,} on {cores} cores", "numpy_s": seconds, "t_conv": t_conv,
            "mag_area": area, "cores": len(os.sched_getaffinity(0))}


def batch(m: int, k: int, device: str, method: str | None = None) -> dict:
    from diversity_core.magnitude import (
        DEFAULT_INTEGRATION,
        clear_cache,
        convergence_scales,
        mag_areas,
        torch_convergence_scales,
        torch_mag_areas,
    )
    from diversity_core.measures.distances import pairwise_distances

    matrices = [pairwise_distances(cloud(k, seed=s)) for s in range(m)]
    method = method or DEFAULT_INTEGRATION

    def on_device():
        from diversity_core.magnitude import TorchMagnitudeBatch

        prepared = TorchMagnitudeBatch(matrices, device=device)
        t_conv = torch_convergence_scales(prepared)
        return t_conv, torch_mag_areas(prepared, float(np.median(t_conv)), method=method)

    def on_cpu():
        clear_cache()  # no preparation carried over from an earlier call
        t_conv = convergence_scales(matrices)
        return t_conv, mag_areas(matrices, float(np.median(t_conv)), method=method)

    (t_dev, a_dev), dev_s = _timed(on_device)
    (t_again, a_again), again_s = _timed(on_device)  # see REPEAT_MAX
    (t_cpu, a_cpu), cpu_s = _timed(on_cpu)
    diff = max(float(np.abs(t_dev / t_cpu - 1).max()), float(np.abs(a_dev / a_cpu - 1).max()))
    return {"job": f"batch {m:,} x {k}", "torch_s": dev_s, "numpy_s": cpu_s, "rel_diff": diff,
            "repeat_s": round(again_s, 4),
            "repeat_same": bool((t_again == t_dev).all() and (a_again == a_dev).all())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--sizes", choices=sorted(SIZES), default="full")
    parser.add_argument("--numpy-max", type=int, default=10_000,
                        help="largest single set the NumPy engine is timed on (default 10,000)")
    parser.add_argument("--large", default="",
                        help="comma-separated sizes for the device's large-n path")
    parser.add_argument("--numpy-cores", default="",
                        help="comma-separated core counts for the NumPy engine's first size")
    parser.add_argument("--only-extra", action="store_true",
                        help="skip the single and batch jobs (only --large, --numpy-cores)")
    parser.add_argument("--integration", default=None, metavar="RULE",
                        help="MagArea's rule for the single and batch jobs (default: the "
                             "engine's, hermite_log)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--_numpy-case", dest="numpy_case", help=argparse.SUPPRESS)
    add_record_options(parser)
    args = parser.parse_args(argv)
    if args.numpy_case:
        print(json.dumps(_numpy_case(*json.loads(args.numpy_case))))
        return 0
    with recording(args.record, args.note):
        return _run(args)


def _run(args) -> int:
    import torch

    from diversity_core.atomic import atomic_write
    from diversity_core.device import parse_device

    try:
        # The torch device of the name (auto: CUDA when torch sees one): what both sides
        # of every comparison are moved to.
        device = parse_device(args.device, key="--device").torch
    except ValueError as exc:
        print(f"bench_gpu: {exc}", file=sys.stderr)
        return 2
    where = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU torch"
    print(f"bench_gpu on {device} ({where}), torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads, sizes {args.sizes}, MagArea by "
          f"{args.integration or 'the default rule'}")
    single(300, device, 0)  # warm-up: CUDA context, cuSOLVER and cuBLAS handles
    batch(4, 20, device)
    sizes = SIZES[args.sizes]
    rows = []

    def show(row):
        rows.append(row)
        numpy_s, torch_s = row.get("numpy_s"), row.get("torch_s")
        print(f"{row['job']:<24} "
              + (f"{torch_s:>9.3f} " if torch_s is not None else f"{'-':>9} ")
              + (f"{numpy_s:>9.3f} " if numpy_s is not None else f"{'skipped':>9} ")
              + (f"{numpy_s / torch_s:>7.2f} {row['rel_diff']:>9.1e}"
                 if numpy_s is not None and torch_s is not None else "")
              + "".join(f" {key} {row[key]}" for key in (
                  "evaluations", "phases_s", "repeat_s", "repeat_phases_s", "repeat_same",
                  "cg_products", "area_error", "cores") if key in row),
              flush=True)
        if args.json:  # rewritten after every row: a run stopped at its limit keeps the rest
            with atomic_write(args.json) as out:
                json.dump({"device": device, "name": where, "rows": rows}, out, indent=1,
                          default=str)

    print(f"{'job':<24} {'torch s':>9} {'NumPy s':>9} {'ratio':>7} {'rel diff':>9}")
    if not args.only_extra:
        for n in sizes["single"]:
            show(single(n, device, args.numpy_max, args.integration))
        for m, k in sizes["batch"]:
            show(batch(m, k, device, args.integration))
    dense = {row["job"]: row for row in rows}
    for n in (int(s) for s in args.large.split(",") if s):
        show(large(n, device, dense.get(f"single {n:,}")))
    for cores in (int(c) for c in args.numpy_cores.split(",") if c):
        show(numpy_on_cores(sizes["single"][0], cores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
