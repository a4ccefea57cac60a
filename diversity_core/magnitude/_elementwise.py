"""Elementwise passes over similarity matrices: exp(-tD) formed, shifted and copied in row blocks.

Every path that forms exp(-tD) goes through :func:`_exp_inplace` or :func:`_exponentials`, one
routine (:data:`EXPONENTIAL` names it), so that an entry's bits depend on its value only, not on
the path, the block or the thread that formed it. The passes split a matrix's triangle among
threads in row blocks (:func:`_row_blocks`); each entry is computed alone, so the thread count
never changes a bit.
"""

from __future__ import annotations

import math

import numpy as np

from .._threads import map_threads
from ._common import EXPONENT_FLOOR, FLOAT32_FLOOR

try:  # the compiled kernels (see _kernels.c): absent where the extension was not built
    from ._kernels import VECTORISED as _VEXP_VECTORISED
    from ._kernels import exp_inplace as _vexp_inplace
    from ._kernels import exp_scaled as _exp_scaled
    from ._kernels import panel_product32 as _panel_product32  # for _large
    from ._kernels import panel_product64 as _panel_product64  # for _large
    from ._kernels import weighted_row_sums as _weighted_row_sums  # for _solver
except ImportError:
    _vexp_inplace = _exp_scaled = _weighted_row_sums = None
    _panel_product32 = _panel_product64 = None
    _VEXP_VECTORISED = False


# Which routine exponentiates the similarity matrices (the last bits of every magnitude depend
# on it): glibc's AVX2 vector exp through _kernels ("libmvec-avx2"), glibc's scalar exp through
# _kernels on a CPU without AVX2 or where DIVERSITY_CORE_SCALAR_KERNELS is set ("glibc-scalar",
# see _kernels.c), or NumPy's exp where _kernels was not built (then NumPy also forms dMag/dt's
# weighted distance form, see _solver, and the large-n path's products, see _large: their last
# bits differ).
EXPONENTIAL = ("numpy" if _vexp_inplace is None
               else "libmvec-avx2" if _VEXP_VECTORISED else "glibc-scalar")

# Elementwise work (exp(-tD), the float32 copy) runs in row blocks of this many entries, which
# stay in a core's cache between steps: 1 MiB of float64 (filling exp(-tD) for 2,000 points took
# 8.0, 8.3 and 9.7 ms with blocks of 1 MiB, 256 KiB and 64 KiB on one thread).
_BLOCK_ENTRIES = 131072
# With this many threads or more, blocks four times as large: each block's handful of NumPy calls
# hold the GIL between them, and 16 threads on 1 MiB blocks queued on it (exp(-tD) and its float32
# copy at 10,000 points on an H200 machine's host: 91 to 99 ms a scale with 16 threads on 1 MiB
# blocks, 36 ms on 4 MiB ones; 8 threads 60 to 62 against 48 ms; 2 threads 151 to 156 against
# 158 ms, so two keep 1 MiB). Entries are computed alone: the block size changes no bit.
_MANY_THREADS = 8
# exp(-tD) is formed from exp(-sD) where |t - s|·max(D) is at most this (see _shift_similarity):
# 2^-12, where a Taylor polynomial of degree 4 is exact.
_SHIFT_LIMIT = 2.0**-12


def _fill_similarity(D, t: float, Z, Z32, *, fill64: bool, full: bool, clamp: bool,
                     threads: int, quotient=None) -> None:
    """Upper triangles (C order; all of it if ``full``) of Z = exp(-tD) (if ``fill64``; else Z
    holds it already) and of its float32 copy Z32 (if given), and, with ``quotient`` =
    (A, out), of out = A / exp(-tD) (see ``SimilarityBuffer.announce_pairs``; in the same
    pass, while the block is in cache: 5 to 7 against 8 ms for both at n = 1,000 here).

    Row blocks of ``_BLOCK_ENTRIES`` go through every step while they are in cache, split among
    ``threads`` Python threads (NumPy releases the GIL in ufuncs): each full pass over a
    1,000-point matrix cost 0.3 to 0.7 ms here, about as much as a float32 matrix-vector product.

    Entries are kept >= exp(-345) = 1e-150 (``clamp``; not needed where t·max(D) <= 345), so
    that products of two of them, as formed by the factorisation, stay normal floats:
    subnormals make LAPACK orders of magnitude slower. Next to the diagonal 1 the change is nil
    (norm <= n·1e-150). In float32, entries below ``FLOAT32_FLOOR`` = 1e-20 are set to zero
    for the same reason: their products with the entries of a CG vector would fall below
    float32's smallest normal number (1.2e-38); with a floor of 1e-37 instead, 1,000-point CG
    solves at large t ran 5 times slower than their iteration count predicts. The change is a
    perturbation of norm <= n·1e-20, far below float32's precision, and the float64 residuals
    of the refinement see the exact Z anyway.
    """
    n = D.shape[0]

    def worker():
        # NumPy's exponentials go through a contiguous scratch block: its exp on the strided
        # rows of the upper trapezoid took twice as long (0.98 against 0.83 ms at n = 1,000).
        # The compiled kernel writes the rows in place.
        scratch = np.empty(_block_rows(n, threads) * n) if fill64 and _exp_scaled is None \
            else None

        def fill(block) -> None:
            z = Z[block]
            if scratch is not None:
                z = _contiguous_block(scratch, block, n)
                _exponentials(D[block], t, z, clamp=clamp)
                Z[block] = z
            elif fill64:
                _exponentials(D[block], t, z, clamp=clamp)
            if Z32 is not None:
                np.multiply(z, z >= FLOAT32_FLOOR, out=Z32[block], casting="unsafe")
            if quotient is not None:
                np.divide(quotient[0][block], z, out=quotient[1][block])
        return fill

    _row_blocks(n, full=full, threads=threads, worker=worker)


def _shift_similarity(D, delta: float, Z, *, threads: int) -> None:
    """Upper triangle (C order) of Z = exp(-sD) multiplied by exp(-δD), |δ|·max(D) <=
    ``_SHIFT_LIMIT``, through the Taylor polynomial of degree 4 of exp(x), x = -δD: its remainder
    |x|⁵/120 <= 7e-21 lies below round-off, and the product differs from exp(-(s + δ)D) by a
    few units in the last place of the exponential's own argument t·D (measured at n = 1,000:
    1.5e-14 relative at t·max(D) = 78, 7.2e-14 at 300, where that argument's units are 1.4e-14
    and 5.7e-14). Nine elementwise passes over each row block while it is in cache: 2.4 to 2.9
    against 5.6 to 5.8 ms for the exponentials at n = 1,000 here."""
    n = D.shape[0]

    def worker():
        scratch = np.empty((2, _block_rows(n, threads) * n))

        def shift(block) -> None:
            x, p = (_contiguous_block(a, block, n) for a in scratch)
            np.multiply(D[block], -delta, out=x)
            np.multiply(x, 1.0 / 24.0, out=p)
            p += 1.0 / 6.0
            for coefficient in (0.5, 1.0, 1.0):  # Horner
                p *= x
                p += coefficient
            Z[block] *= p
        return shift

    _row_blocks(n, full=False, threads=threads, worker=worker)


def _contiguous_block(scratch: np.ndarray, block, n: int) -> np.ndarray:
    """The leading part of a flat ``scratch`` buffer (at least ``_block_rows(n, threads) · n``
    entries) as a C-contiguous array of the shape of the (n, n) matrix's row block ``block``."""
    height, width = block[0].stop - block[0].start, n - block[1].start
    return scratch[:height * width].reshape(height, width)


def _block_rows(n: int, threads: int) -> int:
    # At least 8 blocks, else the upper trapezoids add up to much more than the triangle.
    entries = _BLOCK_ENTRIES * (4 if threads >= _MANY_THREADS else 1)
    return max(1, min(entries // n, -(-n // 8)))


def _row_blocks(n: int, *, full: bool, threads: int, worker) -> None:
    """Elementwise work on an (n, n) matrix's upper triangle (C order; all of it if ``full``)
    in row blocks of about ``_BLOCK_ENTRIES``: each block is the rows' part from the first
    row's diagonal on (the upper triangle, plus a little of the lower one inside the diagonal
    block). ``worker()`` returns the function that takes a block (a pair of slices); it is
    called once per thread, so that it may own scratch memory. The triangle is split among
    ``threads`` Python threads (NumPy releases the GIL in ufuncs) in shares of equal entries."""
    rows = _block_rows(n, threads)

    def run(first: int, last: int) -> None:
        work = worker()
        for start in range(first, last, rows):
            work((slice(start, min(start + rows, last)), slice(0 if full else start, None)))

    n_blocks = -(-n // rows)
    threads = min(threads, n_blocks)
    if threads <= 1:
        run(0, n)
        return
    bounds = _share_bounds(n, threads, full=full, rows=rows)
    map_threads(lambda share: run(*share), list(zip(bounds[:-1], bounds[1:], strict=True)),
                threads)


def _share_bounds(n: int, threads: int, *, full: bool, rows: int = 1) -> list[int]:
    """Row bounds ``[0, ..., n]`` that cut an (n, n) matrix's upper triangle (all of it if
    ``full``) into ``threads`` shares at multiples of ``rows``: equal shares of its entries, not
    of its rows (row i of the triangle has n - i of them)."""
    bounds = [0]
    for k in range(1, threads):
        row = n * k / threads if full else n * (1.0 - math.sqrt(1.0 - k / threads))
        bounds.append(min(n, rows * round(row / rows)))
    bounds.append(n)
    return bounds



def _exponentials(D: np.ndarray, t: float, out: np.ndarray, *, clamp: bool) -> None:
    """out = exp(-tD) entry by entry, the exponent clamped at -``EXPONENT_FLOOR`` (``_common``)
    if ``clamp`` (see :func:`_fill_similarity`); the batch solvers form their matrices with it
    too, so that the same scale gives the same bits on every path. One pass through the
    compiled kernel where it is built and both arrays are float64 with contiguous rows (the
    bits of the three NumPy passes below: the same product, floor and exponential)."""
    if _exp_scaled is not None and _float64_rows(D) and _float64_rows(out):
        _exp_scaled(D, -t, -EXPONENT_FLOOR if clamp else -math.inf, out)
        return
    np.multiply(D, -t, out=out)
    if clamp:
        np.maximum(out, -EXPONENT_FLOOR, out=out)
    _exp_inplace(out)


def _float64_rows(a: np.ndarray) -> bool:
    """Whether ``a`` is a two-dimensional float64 array with contiguous rows (what the compiled
    kernels take)."""
    return a.dtype == np.float64 and a.ndim == 2 and (a.shape[1] <= 1 or a.strides[1] == 8)


def _exp_inplace(a: np.ndarray) -> None:
    """a = exp(a) entry by entry, by :data:`EXPONENTIAL`'s routine: every path that forms
    exp(-tD) goes through here, so that an entry's bits depend on its value only.

    NumPy vectorises its float64 exp for AVX-512 only: on an AVX2 machine every entry took
    glibc's scalar routine, 7 to 9 ns, against 1.4 to 2.2 ns through libmvec (``_kernels.c``);
    at 1,000 points that was a quarter of a default convergence scale + MagArea."""
    if _vexp_inplace is None or a.dtype != np.float64:
        np.exp(a, out=a)
    elif a.flags.c_contiguous:
        _vexp_inplace(a)
    else:
        b = np.ascontiguousarray(a)
        _vexp_inplace(b)
        a[...] = b


