"""How far a change of CPU moves the sentence embeddings, measured on one machine.

    .venv/bin/python benchmarks/embedding_portability.py all-MiniLM-L6-v2 \\
        resources/text/models/all-MiniLM-L6-v2 results/models/interim/documents/fortunes.json \\
        --n 200 --variants native,avx2,portable,portable_avx2

Another machine runs other kernels: torch's ATen picks its vector code by the CPU
(``ATEN_CPU_CAPABILITY``), MKL's matrix products by the instruction set
(``MKL_ENABLE_INSTRUCTIONS``), oneDNN's likewise (``ONEDNN_MAX_CPU_ISA``). Capping them to AVX2 on
an AVX-512 machine runs the code an AVX2 machine (most AMD CPUs, Intel before Skylake-SP) would
run, so the difference from the uncapped run is the size of a change of machine. ``portable``
asks MKL for results that do not depend on the CPU (``MKL_CBWR=COMPATIBLE``) and runs ATen's
and oneDNN's generic code: if ``portable`` and ``portable_avx2`` give the same bits, those
settings remove this machine difference.

``haswell`` runs the embedding process under QEMU's user-mode emulator as an Intel Haswell
(``qemu-x86_64 -cpu Haswell``, Debian's ``qemu-user``): a CPU with AVX2 and FMA but no AVX-512,
as every library sees it through CPUID, so it reaches what the environment variables cannot:
ONNX Runtime's MLAS kernels, the 4-bit e5 engine's and glibc's own choices. The emulator
computes in software, so a difference it shows is that CPU's choice of code or the emulator's
own answer to an instruction whose result the instruction set leaves to the processor (an
approximate reciprocal square root such as ``rsqrtss``), which this run alone does not tell
apart; it runs 50 to 300 times slower than the native process, so keep ``--n`` small.

``cuda`` embeds on the GPU instead (does a GPU move the vectors more than the
stability check assumes?), ``cuda_again`` a second time (does the GPU repeat itself bit for
bit?); on a GPU machine whose host's CPU runs ``native`` with the same libraries, the
difference is the GPU's alone (docs/gpu.md says how the model gets there).

Each variant embeds the first ``--n`` documents in a fresh process (one thread, the variables
set before torch loads), then every variant is compared with ``native``: per element, the
relative difference (median, 90th and 99th percentile), per vector the relative norm of the
difference, and beside them what ``experiments.stability.perturb`` at
``--relative-to-column`` and ``--common-to-column`` (default 2.5e-6 and 1.5e-6, the stability
check's) does, per dimension the root mean square of the change over the dimension's, and what
all vectors share: the change's mean over the vectors per dimension (over its scale) and its
size against the whole change (independent changes of n vectors: about 1/sqrt(n)). Last, each
variant's encoding CPU seconds (one thread), what the settings cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from record import add_record_options, recording

from diversity_core.atomic import atomic_write

_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
         "ONEDNN_MAX_CPU_ISA": "AVX2"}
_PORTABLE = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default",
             "ONEDNN_MAX_CPU_ISA": "SSE41"}
VARIANTS = {"native": {}, "avx2": _AVX2, "portable": _PORTABLE,
            "portable_avx2": {**_PORTABLE, "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
            "haswell": {}, "cuda": {}, "cuda_again": {}}
# The variants that embed on the GPU (the others on the CPU).
ON_CUDA = ("cuda", "cuda_again")
# The variants whose process runs under an emulator: its command before Python's.
EMULATED = {"haswell": ["qemu-x86_64", "-cpu", "Haswell"]}


def embed(model: str, folder: str, documents: str, n: int, out: str, device: str = "cpu") -> None:
    """One variant, in this process (its environment set by the caller). Its CPU seconds, and
    on CUDA its wall seconds (the device's work is not CPU time), are written beside it."""
    import torch

    from diversity_core.embed.sentences import load_text_model

    torch.set_num_threads(1)
    with open(documents, encoding="utf-8") as stream:
        texts = json.load(stream)["texts"][:n]
    encoder = load_text_model(model, folder, device=device, threads=1)
    started = time.process_time() if device == "cpu" else time.perf_counter()
    np.save(out, np.asarray(encoder.encode(texts, batch_size=32, progress=False), np.float32))
    ended = time.process_time() if device == "cpu" else time.perf_counter()
    Path(out + ".seconds").write_text(f"{ended - started}\n")


def differences(reference: np.ndarray, other: np.ndarray) -> dict:
    """Per element relative differences (quantiles), per vector relative norms (median, max)
    and per dimension relative root mean squares (median, max)."""
    a, b = reference.astype(np.float64), other.astype(np.float64)
    nonzero = a != 0
    element = np.abs(b - a)[nonzero] / np.abs(a)[nonzero]
    vector = np.linalg.norm(b - a, axis=1) / np.linalg.norm(a, axis=1)
    # per dimension: the change's root mean square over the dimension's (the stability
    # check's model: a fraction of each dimension's scale)
    rms = np.sqrt(np.mean(a**2, axis=0))
    column = np.sqrt(np.mean((b - a) ** 2, axis=0))[rms > 0] / rms[rms > 0]
    # what all vectors share: the change's mean over the vectors, per dimension (over its
    # scale), and its size against the change's root mean square (independent changes of n
    # vectors: about 1/sqrt(n))
    change = (b - a)[:, rms > 0] / rms[rms > 0]
    common = np.abs(change.mean(axis=0))
    share = np.linalg.norm(change.mean(axis=0)) / max(np.sqrt(np.mean(change**2) * change.shape[1]),
                                                     1e-300)
    return {"identical": bool(np.array_equal(reference, other)),
            "column_median": float(np.median(column)), "column_max": float(column.max()),
            "common_median": float(np.median(common)), "common_max": float(common.max()),
            "common_share": float(share),
            "element_median": float(np.median(element)),
            "element_p90": float(np.quantile(element, 0.9)),
            "element_p99": float(np.quantile(element, 0.99)),
            "vector_median": float(np.median(vector)), "vector_max": float(vector.max())}


def report(model: str, shape: tuple, rows: dict, seconds: dict) -> None:
    """Print each variant's differences from ``native`` and the encoding times."""
    print(f"{model}, {shape[0]} documents x {shape[1]}:")
    for name, row in rows.items():
        print(f"  {name:28s} identical {row['identical']!s:5s}  per element "
              f"{row['element_median']:.2g} / {row['element_p90']:.2g} / "
              f"{row['element_p99']:.2g} (median / p90 / p99), per vector "
              f"{row['vector_median']:.2g} (median), {row['vector_max']:.2g} (max), per "
              f"dimension {row['column_median']:.2g} (median), {row['column_max']:.2g} (max); "
              f"shared by the vectors {row['common_median']:.2g} (median), "
              f"{row['common_max']:.2g} (max), {row['common_share']:.2f} of the change")
    print("  encoding s (CPU s on one thread; wall s on CUDA): "
          + ", ".join(f"{name} {s:.1f}" for name, s in seconds.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("folder", help="the model's folder (resources/text/models/<model>)")
    ap.add_argument("documents", help="a documents file of the model experiment (JSON 'texts')")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--variants", default="native,avx2,portable,portable_avx2")
    ap.add_argument("--relative-to-column", type=float, default=2.5e-6)
    ap.add_argument("--common-to-column", type=float, default=1.5e-6)
    ap.add_argument("--save", help="also keep each variant's vectors here (<variant>.npy)")
    ap.add_argument("--json", help="also write the comparison to this file")
    add_record_options(ap)
    ap.add_argument("--_embed", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._embed:
        model, folder, documents, n, out, device = args._embed
        embed(model, folder, documents, int(n), out, device)
        return
    names = args.variants.split(",")
    unknown = set(names) - set(VARIANTS)
    if unknown or "native" not in names:
        ap.error(f"variants: 'native' and any of {sorted(VARIANTS)}; got {args.variants}")
    if set(names) & set(ON_CUDA):
        import torch

        if not torch.cuda.is_available():
            ap.error(f"variants {', '.join(n for n in names if n in ON_CUDA)} embed on CUDA; "
                     "torch sees no CUDA GPU here.")
    for name in set(names) & set(EMULATED):
        if shutil.which(EMULATED[name][0]) is None:
            ap.error(f"variant {name} runs under {EMULATED[name][0]}, which is not installed "
                     "(Debian: apt-get install qemu-user).")
    with tempfile.TemporaryDirectory() as tmp:
        runs, seconds = {}, {}
        for name in names:
            out = str(Path(tmp) / f"{name}.npy")
            device = "cuda" if name in ON_CUDA else "cpu"
            subprocess.run([*EMULATED.get(name, []), sys.executable, __file__, args.model,
                            args.folder, args.documents,
                            "--_embed", args.model, args.folder, args.documents, str(args.n),
                            out, device], check=True, env={**os.environ, **VARIANTS[name]},
                           stdout=subprocess.DEVNULL)
            runs[name] = np.load(out)
            seconds[name] = float(Path(out + ".seconds").read_text())
            if args.save:
                Path(args.save).mkdir(parents=True, exist_ok=True)
                with atomic_write(Path(args.save) / f"{name}.npy", "wb") as stream:
                    np.save(stream, runs[name])
    from diversity_core.experiments.stability import perturb, perturbation_rng

    reference = runs["native"]
    perturbed = perturb(reference, args.relative_to_column,
                        perturbation_rng(0, "documents", args.model, 0),
                        common_to_column=args.common_to_column)
    rows = {name: differences(reference, X) for name, X in runs.items() if name != "native"}
    rows[f"perturb({args.relative_to_column:g}, {args.common_to_column:g})"] = differences(
        reference, perturbed)
    if "portable" in runs and "portable_avx2" in runs:
        rows["portable vs portable_avx2"] = differences(runs["portable"], runs["portable_avx2"])
    with recording(args.record, args.note):
        report(args.model, reference.shape, rows, seconds)
    if args.json:
        with atomic_write(args.json) as out:
            out.write(json.dumps(
                {"model": args.model, "documents": args.documents,
                 "shape": list(reference.shape), "against_native": rows, "seconds": seconds},
                indent=1) + "\n")


if __name__ == "__main__":
    main()
