"""Threads: how many the package's own parallel work may use, and the one pool it runs on.

Shared by every stage that splits work over threads (the magnitude engine's elementwise passes,
products and batches, the exact distance matrices of :mod:`diversity_core.measures.distances`,
the comparison's BLAS limits), so that one rule decides: as many threads as BLAS is allowed
(the caller's limit: a Snakemake job's ``threads``, ``OMP_NUM_THREADS``, threadpoolctl), at
most the cores the process may run on. A leaf: it imports nothing of the package.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import ThreadpoolController

# How long OpenBLAS's worker threads spin after each call before they sleep, as OpenBLAS reads it
# when it loads (2^value cycles; OpenBLAS's default 2^28, about 0.1 s). Spinning, they held the
# cores that the engine's own threads needed next (the exp(-tD) fills between the conjugate
# gradients' products): t_conv + MagArea of 10,000 points on an H200 machine's host, the fills
# 3.6 s of 7.6 s on 16 cores, 1.1 s of 4.7 s at 2^4; the whole job 7.98 against 4.09 s on 16
# cores, 21.7 against 20.7 s on 2 (the same bits: the work is split alike).
OPENBLAS_THREAD_TIMEOUT = "4"


def quiet_blas_workers() -> None:
    """Let OpenBLAS's idle worker threads sleep almost at once (``OPENBLAS_THREAD_TIMEOUT``,
    above), unless the environment says otherwise. Effective only before NumPy or SciPy load
    OpenBLAS: ``import diversity_core`` calls it (it loads neither), and every process it
    starts, a Snakemake job or a benchmark's case, inherits it."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)


@functools.cache
def threadpools() -> ThreadpoolController:
    return ThreadpoolController()


def single_threaded_if(condition: bool):
    """A context in which BLAS/LAPACK run on one thread if ``condition``, else unchanged."""
    if condition:
        return threadpools().limit(limits=1, user_api="blas")
    return contextlib.nullcontext()


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity: a SLURM or taskset allocation), not the
    machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def allowed_threads() -> int:
    """Threads the package's own parallel work may use (the engine's elementwise passes over
    similarity matrices, the derivative's quadratic form, batch shares, large-n products; exact
    distance matrices): as many as BLAS is allowed (the caller's limit: a Snakemake job's
    ``threads``, ``OMP_NUM_THREADS``, threadpoolctl), at most the usable cores."""
    blas = max((c.num_threads for c in threadpools().select(user_api="blas").lib_controllers),
               default=1)
    return max(1, min(blas, usable_cores()))


_POOL_PREFIX = "diversity_core"


@functools.cache
def executor(pid: int) -> ThreadPoolExecutor:
    """One thread pool per process (keyed by pid: a pool inherited through fork has no threads
    behind it), as large as the usable cores; callers bound their shares by
    :func:`allowed_threads`."""
    return ThreadPoolExecutor(max_workers=usable_cores(), thread_name_prefix=_POOL_PREFIX)


def row_block_shares(n: int, rows: int, threads: int) -> list[list[int]]:
    """The first rows of an (n, ·) matrix's blocks of ``rows`` rows, dealt round-robin into
    ``threads`` shares (blocks of an upper triangle fall in length: dealt so, the shares even
    out)."""
    starts = list(range(0, n, rows))
    return [starts[k::threads] for k in range(threads)]


def map_threads(fn, items, threads: int) -> list:
    """``[fn(item) for item in items]``, on up to ``threads`` threads of :func:`executor`
    (NumPy's ufuncs, BLAS and the ctypes LAPACK calls release the GIL); results in order.

    Called from one of the pool's own threads (a share that itself splits its work, say
    distances computed inside a batch's share), it runs the items there, one after the other:
    shares waiting for shares queued behind them on a full pool would wait for ever."""
    if (threads <= 1 or len(items) < 2
            or threading.current_thread().name.startswith(_POOL_PREFIX)):
        return [fn(item) for item in items]
    return list(executor(os.getpid()).map(fn, items))
