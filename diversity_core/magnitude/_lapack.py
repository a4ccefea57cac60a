"""LAPACK on packed triangles, called without the GIL: the looped batch solvers' routines.

``_gil_free_lapack`` reaches SciPy's own LAPACK through its Cython table and ctypes (which
releases the GIL, so that a batch's threads factorise in parallel); ``_scipy_lapack`` is the same
through SciPy's Python wrappers, the fallback where that table cannot be read.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.linalg import lapack


def _packed(D: np.ndarray) -> np.ndarray:
    """The upper triangle (C order) of D in rectangular full packed format: LAPACK's "L"
    triangle of the Fortran view, with TRANSR = "N"."""
    packed, info = lapack.dtrttf(D.T, transr="N", uplo="L")
    if info != 0:
        raise RuntimeError(f"LAPACK dtrttf failed (info={info}).")
    return packed



class _LapackCalls(NamedTuple):
    """The LAPACK routines of the looped solvers, on a C-ordered buffer (see their callers)."""

    pftrf: Callable  # pftrf(Z, n) -> bool: Cholesky in place, packed (see _packed)
    tfsm: Callable  # tfsm(L, b, transpose) -> x: L x = b (Lᵀ x = b), L packed; b overwritten
    tfttr: Callable  # tfttr(Z, out): packed Z -> the upper triangle (C order) of out
    trttf: Callable  # trttf(D) -> the packed upper triangle of a C-ordered D (see _packed)


def _scipy_lapack() -> _LapackCalls:
    """The routines through SciPy's wrappers (which hold the GIL)."""

    def pftrf(Z, n):
        _, info = lapack.dpftrf(n, Z, transr="N", uplo="L", overwrite_a=1)
        return info == 0

    def tfsm(L, b, transpose):
        return lapack.dtfsm(1.0, L, b[:, None], transr="N", side="L", uplo="L",
                            trans="T" if transpose else "N", diag="N", overwrite_b=1)[:, 0]

    def tfttr(Z, out):
        full, _ = lapack.dtfttr(len(out), Z, transr="N", uplo="L")
        out[...] = np.triu(full.T)

    return _LapackCalls(pftrf, tfsm, tfttr, _packed)


@functools.cache
def _gil_free_lapack() -> _LapackCalls | None:
    """The routines of SciPy's own LAPACK called through ctypes, or None.

    SciPy's Python wrappers hold the GIL (two threads factorising 300-point matrices took as
    long as one); ctypes releases it. The functions come from SciPy's Cython LAPACK table
    (``scipy.linalg.cython_lapack``, the interface SciPy documents for compiled callers): the
    same library and routines as the wrappers, so the results are bit for bit theirs, and
    200 factorisations of 300 points took 32 to 39 ms on two threads against 62 ms on one. If
    that table cannot be read, the wrappers are used on one thread.
    """
    try:
        from scipy.linalg import cython_lapack

        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

        def function(name, *argtypes):
            capsule = cython_lapack.__pyx_capi__[name]
            pointer = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
            return ctypes.CFUNCTYPE(None, *argtypes)(pointer)

        int_p, char_p, ptr = ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_void_p
        dpftrf = function("dpftrf", char_p, char_p, int_p, ptr, int_p)
        dtfsm = function("dtfsm", char_p, char_p, char_p, char_p, char_p, int_p, int_p,
                         ctypes.POINTER(ctypes.c_double), ptr, ptr, int_p)
        dtfttr = function("dtfttr", char_p, char_p, int_p, ptr, ptr, int_p, int_p)
        dtrttf = function("dtrttf", char_p, char_p, int_p, ptr, int_p, ptr, int_p)
    except Exception:  # noqa: BLE001 - any failure: fall back to the wrappers
        return None
    one, unit = ctypes.c_int(1), ctypes.c_double(1.0)

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

    def tfttr(Z, out):
        n, info = ctypes.c_int(len(out)), ctypes.c_int(0)
        dtfttr(b"N", b"L", ctypes.byref(n), Z.ctypes.data, out.ctypes.data, ctypes.byref(n),
               ctypes.byref(info))

    def trttf(D):
        n, info = ctypes.c_int(len(D)), ctypes.c_int(0)
        packed = np.empty(len(D) * (len(D) + 1) // 2)
        dtrttf(b"N", b"L", ctypes.byref(n), np.ascontiguousarray(D).ctypes.data,
               ctypes.byref(n), packed.ctypes.data, ctypes.byref(info))
        if info.value != 0:
            raise RuntimeError(f"LAPACK dtrttf failed (info={info.value}).")
        return packed

    return _LapackCalls(pftrf, tfsm, tfttr, trttf)

