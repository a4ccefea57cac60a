"""LAPACK and BLAS on packed triangles, called without the GIL: the looped batch solvers'
routines.

``_gil_free_lapack`` reaches SciPy's own LAPACK and BLAS through their Cython tables and ctypes
(which releases the GIL, so that a batch's threads factorise in parallel); ``_scipy_lapack`` is
the same through SciPy's Python wrappers, the fallback where those tables cannot be read.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.linalg import blas, lapack


def _packed(D: np.ndarray) -> np.ndarray:
    """The upper triangle (C order) of D in rectangular full packed format: LAPACK's "L"
    triangle of the Fortran view, with TRANSR = "N"."""
    packed, info = lapack.dtrttf(D.T, transr="N", uplo="L")
    if info != 0:
        raise RuntimeError(f"LAPACK dtrttf failed (info={info}).")
    return packed


def _packed_blocks(n: int) -> tuple[int, int, int, int, int, int]:
    """Where the three blocks of a symmetric n × n matrix A lie in its packed array (see
    :func:`_packed`), as LAPACK's rectangular full packed format places them: ``(n1, n2, lda,
    a11, a22, a21)``, with A11 = A[:n1, :n1] at offset ``a11`` (its lower triangle, column-major
    with leading dimension ``lda``), A22 = A[n1:, n1:] at ``a22`` (its upper triangle) and
    A21 = A[n1:, :n1] at ``a21`` (all of it, n2 × n1)."""
    if n % 2 == 0:
        k = n // 2
        return k, k, n + 1, 1, 0, k + 1
    k = (n + 1) // 2
    return k, k - 1, n, 0, n, k


class _LapackCalls(NamedTuple):
    """The LAPACK and BLAS routines of the looped solvers, on a C-ordered buffer (see their
    callers)."""

    pftrf: Callable  # pftrf(Z, n) -> bool: Cholesky in place, packed (see _packed)
    tfsm: Callable  # tfsm(L, b, transpose) -> x: L x = b (Lᵀ x = b), L packed; b overwritten
    sfmv: Callable  # sfmv(A, x, out) -> out = A x, A symmetric and packed (see _packed_blocks)
    trttf: Callable  # trttf(D) -> the packed upper triangle of a C-ordered D (see _packed)


def _scipy_lapack() -> _LapackCalls:
    """The routines through SciPy's wrappers (which hold the GIL)."""

    def pftrf(Z, n):
        _, info = lapack.dpftrf(n, Z, transr="N", uplo="L", overwrite_a=1)
        return info == 0

    def tfsm(L, b, transpose):
        return lapack.dtfsm(1.0, L, b[:, None], transr="N", side="L", uplo="L",
                            trans="T" if transpose else "N", diag="N", overwrite_b=1)[:, 0]

    def sfmv(A, x, out):
        n1, n2, lda, a11, a22, a21 = _packed_blocks(len(x))

        def block(offset, rows, cols):  # column-major, leading dimension lda
            return np.lib.stride_tricks.as_strided(A[offset:], (rows, cols), (8, 8 * lda))

        out[:n1] = blas.dsymv(1.0, block(a11, n1, n1), x[:n1], lower=1)
        if n2:
            out[n1:] = blas.dsymv(1.0, block(a22, n2, n2), x[n1:], lower=0)
            A21 = np.asfortranarray(block(a21, n2, n1))  # copied once for both products
            # Added into the results (beta = 1) as the ctypes route adds them.
            out[:n1] = blas.dgemv(1.0, A21, x[n1:], beta=1.0, y=out[:n1], trans=1)
            out[n1:] = blas.dgemv(1.0, A21, x[:n1], beta=1.0, y=out[n1:])
        return out

    return _LapackCalls(pftrf, tfsm, sfmv, _packed)


@functools.cache
def _gil_free_lapack() -> _LapackCalls | None:
    """The routines of SciPy's own LAPACK and BLAS called through ctypes, or None.

    SciPy's Python wrappers hold the GIL (two threads factorising 300-point matrices took as
    long as one); ctypes releases it. The functions come from SciPy's Cython LAPACK and BLAS
    tables (``scipy.linalg.cython_lapack``, ``cython_blas``: the interface SciPy documents for
    compiled callers): the same library and routines as the wrappers, so the LAPACK results
    are bit for bit theirs (``sfmv``'s agree to round-off: the wrappers copy each block), and
    200 factorisations of 300 points took 32 to 39 ms on two threads against 62 ms on one. If
    those tables cannot be read, the wrappers are used on one thread.
    """
    try:
        from scipy.linalg import cython_blas, cython_lapack

        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

        def function(name, *argtypes, table=cython_lapack):
            capsule = table.__pyx_capi__[name]
            pointer = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
            return ctypes.CFUNCTYPE(None, *argtypes)(pointer)

        int_p, char_p, ptr = ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_void_p
        double_p = ctypes.POINTER(ctypes.c_double)
        dpftrf = function("dpftrf", char_p, char_p, int_p, ptr, int_p)
        dtfsm = function("dtfsm", char_p, char_p, char_p, char_p, char_p, int_p, int_p,
                         double_p, ptr, ptr, int_p)
        dtrttf = function("dtrttf", char_p, char_p, int_p, ptr, int_p, ptr, int_p)
        dsymv = function("dsymv", char_p, int_p, double_p, ptr, int_p, ptr, int_p, double_p,
                         ptr, int_p, table=cython_blas)
        dgemv = function("dgemv", char_p, int_p, int_p, double_p, ptr, int_p, ptr, int_p,
                         double_p, ptr, int_p, table=cython_blas)
    except Exception:  # noqa: BLE001 - any failure: fall back to the wrappers
        return None
    one, unit, nil = ctypes.c_int(1), ctypes.c_double(1.0), ctypes.c_double(0.0)

    def pftrf(Z, n):
        n, info = ctypes.c_int(n), ctypes.c_int(0)
        dpftrf(b"N", b"L", ctypes.byref(n), Z.ctypes.data, ctypes.byref(info))
        return info.value == 0

    def tfsm(L, b, transpose):
        n = ctypes.c_int(len(b))
        dtfsm(b"N", b"L", b"L", b"T" if transpose else b"N", b"N", ctypes.byref(n),
              ctypes.byref(one), ctypes.byref(unit), L.ctypes.data, b.ctypes.data,
              ctypes.byref(n))
        return b

    def sfmv(A, x, out):
        n1, n2, lda, a11, a22, a21 = _packed_blocks(len(x))
        a, x1, y1 = A.ctypes.data, x.ctypes.data, out.ctypes.data  # 8 bytes an entry
        x2, y2 = x1 + 8 * n1, y1 + 8 * n1
        first, second, lead = ctypes.c_int(n1), ctypes.c_int(n2), ctypes.c_int(lda)
        f, s, ld, step = (ctypes.byref(c) for c in (first, second, lead, one))
        dsymv(b"L", f, ctypes.byref(unit), a + 8 * a11, ld, x1, step, ctypes.byref(nil), y1,
              step)
        if n2:
            dsymv(b"U", s, ctypes.byref(unit), a + 8 * a22, ld, x2, step, ctypes.byref(nil),
                  y2, step)
            dgemv(b"T", s, f, ctypes.byref(unit), a + 8 * a21, ld, x2, step,
                  ctypes.byref(unit), y1, step)
            dgemv(b"N", s, f, ctypes.byref(unit), a + 8 * a21, ld, x1, step,
                  ctypes.byref(unit), y2, step)
        return out

    def trttf(D):
        n, info = ctypes.c_int(len(D)), ctypes.c_int(0)
        packed = np.empty(len(D) * (len(D) + 1) // 2)
        dtrttf(b"N", b"L", ctypes.byref(n), np.ascontiguousarray(D).ctypes.data,
               ctypes.byref(n), packed.ctypes.data, ctypes.byref(info))
        if info.value != 0:
            raise RuntimeError(f"LAPACK dtrttf failed (info={info.value}).")
        return packed

    return _LapackCalls(pftrf, tfsm, sfmv, trttf)

