"""The magnitude engine's torch path beside the NumPy engine, in the same run (issue 36).

    python benchmarks/bench_gpu.py                        # on cuda, the issue's sizes
    python benchmarks/bench_gpu.py --device cpu --sizes small   # smoke run (CPU torch)

Jobs (clustered clouds in 64 dimensions, Euclidean distances):

* ``single N``: t_conv + MagArea (Chebyshev, rtol 1e-6) of N points: the torch path from the
  points (distances formed on the device) against ``MagnitudeSpace`` (the NumPy engine as the
  pipeline runs it: ``magnitude_space``, conjugate gradients from 500 points, the large-n path
  above 10,000 points);
* ``batch M x K``: t_conv of M sets of K points, their median as t_cut, and every set's
  MagArea: ``torch_convergence_scales`` + ``torch_mag_areas`` against
  ``convergence_scales`` + ``mag_areas``.

Issue 36's targets on one H200: 10,000 points <= 0.5 s, 50,000 points <= 60 s, 200 x 300
<= 0.1 s. Each line gives both times, their ratio and the largest relative difference of the
results. The NumPy engine is skipped above ``--numpy-max`` points (its 50,000-point run took
about 8 minutes on 16 cores). Times are wall-clock seconds of one run after a warm-up (CUDA
context, cuSOLVER handles).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

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


def single(n: int, device: str, numpy_max: int) -> dict:
    from diversity_core.magnitude import TorchMagnitudeSpace, magnitude_space

    X = cloud(n)

    def on_device():
        space = TorchMagnitudeSpace.from_points(X, device=device)
        t_conv = space.convergence_scale()
        return t_conv, space.mag_area(t_conv)

    (t_dev, a_dev), dev_s = _timed(on_device)
    row = {"job": f"single {n:,}", "torch_s": dev_s, "t_conv": t_dev, "mag_area": a_dev}
    if n <= numpy_max:
        def on_cpu():
            space = magnitude_space(X)
            t_conv = space.convergence_scale()
            return t_conv, space.mag_area(t_conv)

        (t_cpu, a_cpu), cpu_s = _timed(on_cpu)
        row.update(numpy_s=cpu_s, rel_diff=max(abs(t_dev / t_cpu - 1), abs(a_dev / a_cpu - 1)))
    return row


def batch(m: int, k: int, device: str) -> dict:
    from diversity_core.magnitude import (
        clear_cache,
        convergence_scales,
        mag_areas,
        torch_convergence_scales,
        torch_mag_areas,
    )
    from diversity_core.measures.distances import pairwise_distances

    matrices = [pairwise_distances(cloud(k, seed=s)) for s in range(m)]

    def on_device():
        from diversity_core.magnitude import TorchMagnitudeBatch

        prepared = TorchMagnitudeBatch(matrices, device=device)
        t_conv = torch_convergence_scales(prepared)
        return t_conv, torch_mag_areas(prepared, float(np.median(t_conv)))

    def on_cpu():
        clear_cache()  # no preparation carried over from an earlier call
        t_conv = convergence_scales(matrices)
        return t_conv, mag_areas(matrices, float(np.median(t_conv)))

    (t_dev, a_dev), dev_s = _timed(on_device)
    (t_cpu, a_cpu), cpu_s = _timed(on_cpu)
    diff = max(float(np.abs(t_dev / t_cpu - 1).max()), float(np.abs(a_dev / a_cpu - 1).max()))
    return {"job": f"batch {m:,} x {k}", "torch_s": dev_s, "numpy_s": cpu_s, "rel_diff": diff}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument("--sizes", choices=sorted(SIZES), default="full")
    parser.add_argument("--numpy-max", type=int, default=10_000,
                        help="largest single set the NumPy engine is timed on (default 10,000)")
    args = parser.parse_args(argv)
    import torch

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
          f"{torch.get_num_threads()} CPU threads, sizes {args.sizes}")
    single(300, device, 0)  # warm-up: CUDA context, cuSOLVER and cuBLAS handles
    batch(4, 20, device)
    sizes = SIZES[args.sizes]
    rows = [single(n, device, args.numpy_max) for n in sizes["single"]]
    rows += [batch(m, k, device) for m, k in sizes["batch"]]
    print(f"{'job':<18} {'torch s':>9} {'NumPy s':>9} {'ratio':>7} {'rel diff':>9}")
    for row in rows:
        numpy_s = row.get("numpy_s")
        print(f"{row['job']:<18} {row['torch_s']:>9.3f} "
              + (f"{numpy_s:>9.3f} {numpy_s / row['torch_s']:>7.2f} {row['rel_diff']:>9.1e}"
                 if numpy_s is not None else f"{'skipped':>9} {'':>7} {'':>9}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
