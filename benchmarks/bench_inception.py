"""Throughput of the FID Inception V3 embedding (images per second) on this machine.

    python benchmarks/bench_inception.py --threads 2 --n-images 100 --batch-sizes 25,50

Prints, per batch size: wall-clock images/s, and images per CPU-second times the thread count
(what the threads would give if they had their cores to themselves: on a shared machine the two
differ by the share of the CPU this process got). Uses Fashion-MNIST images (grey 28 x 28,
resized to 299 x 299) and the network fetched by the pipeline into resources/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-images", type=int, default=100)
    parser.add_argument("--batch-sizes", default="50")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--model", default=str(REPO / "resources/inception/fid_inception_v3.pt"))
    parser.add_argument("--data", default=str(REPO / "resources/fashion_mnist"))
    args = parser.parse_args()

    import torch

    from diversity_core.data.images import load_fashion_mnist
    from diversity_core.device import parse_device
    from diversity_core.embed.inception import embed_images, load_inception

    torch.set_num_threads(args.threads)
    device = parse_device(args.device, key="--device").torch
    images, _ = load_fashion_mnist(args.data)
    batch = images[np.random.default_rng(0).choice(len(images), args.n_images, replace=False)]
    model = load_inception(args.model, device)
    embed_images(batch[:2], model, batch_size=2, device=device, progress=False)  # warm-up
    print(f"device={device} threads={args.threads} images={args.n_images}")
    print(f"{'batch':>6} {'wall s':>8} {'img/s':>8} {'img/CPU-s x threads':>20} {'CPU share':>10}")
    for bs in (int(b) for b in args.batch_sizes.split(",")):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter(), time.process_time()
        embed_images(batch, model, batch_size=bs, device=device, progress=False)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        share = cpu / (wall * args.threads)
        print(f"{bs:>6} {wall:>8.1f} {args.n_images / wall:>8.2f} "
              f"{args.n_images / cpu * args.threads:>20.2f} {share:>10.0%}")


if __name__ == "__main__":
    main()
