"""Time and peak memory of diversity_core.prdc against the ``prdc`` 0.2 package.

    nice -n 10 .venv/bin/python benchmarks/bench_prdc.py                  # 2k, 5k, 10k points
    nice -n 10 .venv/bin/python benchmarks/bench_prdc.py --sizes 10000 --package-max 0

Each measurement runs in a fresh subprocess so that its peak resident set size
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) belongs to that call alone. The inputs are
float32 features of dimension 2048 (as the Inception pool features of the image experiment): a
random linear image of 32-dimensional Gaussian latents plus noise, the fake latents shrunk by 0.8
and shifted by 0.3; N real and N fake points, k = 5. ``base MB`` is the
RSS after the inputs exist (interpreter, NumPy and the two input arrays); ``peak MB`` the peak of
the whole process, inputs included. The requirement: 10,000 x 10,000 points of dimension 2048
within 60 s and under 2 GB peak.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _worker(impl: str, n: int, dim: int, k: int, seed: int) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    # Points near a 32-dimensional linear manifold, like pooled network features: a random
    # projection of Gaussian latents plus isotropic noise; the fake latents are shrunk and shifted.
    W = rng.standard_normal((32, dim), dtype=np.float32) / np.float32(32**0.5)
    real = rng.standard_normal((n, 32), dtype=np.float32) @ W
    real += np.float32(0.3) * rng.standard_normal((n, dim), dtype=np.float32)
    fake = (np.float32(0.8) * rng.standard_normal((n, 32), dtype=np.float32) + np.float32(0.3)) @ W
    fake += np.float32(0.3) * rng.standard_normal((n, dim), dtype=np.float32)
    base = _rss_mb()
    t0 = time.perf_counter()
    if impl == "ours":
        from diversity_core import prdc

        out = prdc(real, fake, k)
    else:
        from prdc import compute_prdc

        with contextlib.redirect_stdout(io.StringIO()):
            out = compute_prdc(real, fake, k)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "impl": impl, "n": n, "dim": dim, "k": k, "seconds": seconds, "base_mb": base,
        "peak_mb": peak, "result": {key: float(v) for key, v in out.items()},
    }


def _run(impl: str, n: int, dim: int, k: int, seed: int, timeout: float) -> dict | None:
    cmd = [sys.executable, __file__, "--worker", impl, "--sizes", str(n), "--dim", str(dim),
           "--k", str(k), "--seed", str(seed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  {impl} n={n}: timed out after {timeout:.0f} s", flush=True)
        return None
    if proc.returncode != 0:
        print(f"  {impl} n={n}: failed ({proc.stderr.strip().splitlines()[-1:]})", flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,5000,10000", help="comma-separated N")
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--package-max", type=int, default=10000,
                        help="run the prdc package only up to this N (0: never)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--worker", choices=["ours", "package"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        print(json.dumps(_worker(args.worker, sizes[0], args.dim, args.k, args.seed)))
        return

    print(f"prdc benchmark: N real = N fake, dim {args.dim}, k {args.k}, float32 input, "
          f"{os.cpu_count()} CPU cores")
    rows = []
    for n in sizes:
        ours = _run("ours", n, args.dim, args.k, args.seed, args.timeout)
        pkg = (_run("package", n, args.dim, args.k, args.seed, args.timeout)
               if n <= args.package_max else None)
        rows += [r for r in (ours, pkg) if r]
        line = f"N={n:6d}  ours: "
        line += (f"{ours['seconds']:6.1f} s, peak {ours['peak_mb']:7.0f} MB "
                 f"(base {ours['base_mb']:.0f} MB)") if ours else "n/a"
        if pkg:
            line += (f" | prdc 0.2: {pkg['seconds']:6.1f} s, peak {pkg['peak_mb']:7.0f} MB"
                     f" (base {pkg['base_mb']:.0f} MB)")
            if ours:
                diff = max(abs(ours["result"][key] - pkg["result"][key]) for key in ours["result"])
                line += (f" | time ratio ours/prdc {ours['seconds'] / pkg['seconds']:.2f}, "
                         f"peak ratio {ours['peak_mb'] / pkg['peak_mb']:.2f}, "
                         f"max |diff| {diff:.1e}")
        print(line, flush=True)
        if ours:
            print(f"           ours result: {ours['result']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
