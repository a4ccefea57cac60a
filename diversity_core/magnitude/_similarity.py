"""The similarity buffer of one dense space: exp(-tD) at the scale being solved, formed as cheaply
as the scales asked before allow (exponentials, a shift from a nearby scale, or a pair of
quadrature scales formed from each other), with its float32 copy for conjugate gradients."""

from __future__ import annotations

import numpy as np

from .._threads import allowed_threads
from ._common import EXPONENT_FLOOR
from ._elementwise import _SHIFT_LIMIT, _fill_similarity, _row_blocks, _shift_similarity

# exp(-tD) is formed on one thread below this many distinct points: convergence scale + MagArea
# of the benchmark clouds took 80 against 96 ms at n = 1,000 and 326 against 342 ms at 2,000
# (the pool's hand-offs cost more than the second core saves there). Every elementwise pass of
# the buffer (exponentials, shifts, the pairs' quotients, square roots and copies) and the
# derivative's quadratic form use this rule.
_FILL_SINGLE_THREAD_BELOW = 2500
# MagArea's scales in pairs t, T - t (see SimilarityBuffer.announce_pairs): from this many
# distinct points on (below, the batch's stacked solves answer, and bookkeeping would outweigh
# the exponentials saved), where the two extra buffers (exp(-TD) and a smaller partner's
# exp(-tD)) take at most this much memory (up to 5,792 points).
_PAIR_MIN_POINTS = 65
_PAIR_BUFFER_BYTES = 512 * 2**20


def pair_memory(n: int) -> int:
    """Bytes of the two extra buffers of MagArea's paired scales for n distinct points (see
    :meth:`SimilarityBuffer.announce_pairs`), 0 where they are not used."""
    need = 2 * 8 * n * n
    return need if n >= _PAIR_MIN_POINTS and need <= _PAIR_BUFFER_BYTES else 0


def elementwise_threads(n: int) -> int:
    """Threads of an elementwise pass over an (n, n) matrix (see _FILL_SINGLE_THREAD_BELOW)."""
    return 1 if n < _FILL_SINGLE_THREAD_BELOW else allowed_threads()


class SimilarityBuffer:
    """exp(-tD) of one de-duplicated (n, n) distance matrix, one scale at a time.

    Only the upper triangle (row <= column, C order) of :attr:`Z` holds exp(-tD): Z is
    symmetric, and LAPACK's Cholesky and BLAS's symv read one triangle, so the other is never
    computed (half the exponentials; a symmetric matrix-vector product reads half the memory of
    a general one and ran 1.6 to 3.8 times faster here). The strict lower triangle is scratch
    (or holds exp(-tD) too, see :attr:`lower_scale`). ``Z.T`` is the same matrix in Fortran
    order with the upper triangle as its *lower* one: the view handed to LAPACK and BLAS.

    Attributes
    ----------
    Z : array of shape (n, n) or None
        float64 buffer, allocated on first use. Whoever overwrites its upper triangle (a
        factorisation) calls :meth:`invalidate`.
    scale, lower_scale : float or None
        The scale whose exp(-tD) the upper (strict lower) triangle of :attr:`Z` holds.
    Z32, scale32 : float32 buffer (CG, mixed precision) and the scale it holds intact.
    """

    def __init__(self, D: np.ndarray, D_max: float):
        self.D = D
        self.n = D.shape[0]
        self.D_max = D_max
        self.Z = self.scale = self.lower_scale = None
        self.Z32 = self.scale32 = None
        # Announced pairs (see announce_pairs): the larger scale -> its smaller partner, the
        # scale T whose exp(-TD) divides, its half, the buffer holding exp(-TD) in its upper
        # triangle (valid for _pair_total), the smaller partners' exp(-tD) formed with their
        # larger one (scale -> buffer; one at a time), and buffers to reuse.
        self._pair_partners: dict[float, float] = {}
        self._pair_total = self._pair_half = None
        self._E_total = None
        self._E_total_valid = False
        self._stash: dict[float, np.ndarray] = {}
        self._spare: list[np.ndarray] = []

    def threads(self) -> int:
        return elementwise_threads(self.n)

    def release(self) -> None:
        """Free the buffers (they are allocated again on the next use)."""
        self.Z = self.Z32 = None
        self.scale = self.lower_scale = self.scale32 = None
        self.announce_pairs([], None, None)

    def invalidate(self) -> None:
        """The upper triangle of :attr:`Z` was overwritten (by a factor)."""
        self.scale = None

    def float32_buffer(self) -> np.ndarray:
        """The float32 buffer (allocated if needed), its content about to be overwritten."""
        if self.Z32 is None:
            self.Z32 = np.empty(self.D.shape, dtype=np.float32)
        self.scale32 = None
        return self.Z32

    # -- exp(-tD) ------------------------------------------------------------------------------
    def similarity(self, t: float, *, float32: bool = False, full: bool = False) -> np.ndarray:
        """exp(-tD) in the upper triangle of :attr:`Z`, in its lower triangle too if ``full``,
        and in the upper triangle of :attr:`Z32` if ``float32`` (then Z32 is returned)."""
        if self.Z is None:
            self.Z = np.zeros(self.D.shape)  # zeros: the scratch triangle stays finite
        fill64 = self.scale != t or (full and self.lower_scale != t)
        fill32 = float32 and self.scale32 != t
        if fill32 and self.Z32 is None:
            self.Z32 = np.empty(self.D.shape, dtype=np.float32)
        if fill64 and not full and (self._paired(t) or self._shifted(t)):
            fill64 = False
            self.scale, self.lower_scale = t, None
        if fill64 or fill32:
            _fill_similarity(self.D, t, self.Z, self.Z32 if fill32 else None,
                             fill64=fill64, full=full, clamp=t * self.D_max > EXPONENT_FLOOR,
                             threads=self.threads())
            self.scale = t
            if fill64:
                # An upper fill also writes some of the lower triangle (in diagonal blocks).
                self.lower_scale = t if full else None
            if fill32:
                self.scale32 = t
        return self.Z32 if float32 else self.Z

    def _shifted(self, t: float) -> bool:
        """exp(-tD) in the upper triangle of :attr:`Z` from the exp(-sD) it holds, where s is
        within ``_SHIFT_LIMIT`` / max(D) of t (the convergence scale's last Newton step, about
        1e-6 t, or a MagArea up to a convergence scale that the search returned without solving
        at it), as exp(-sD) ∘ exp(-(t - s)D) with the second factor by its Taylor polynomial
        (see ``_elementwise._shift_similarity``); False otherwise."""
        s = self.scale
        if s is None or not abs(t - s) * self.D_max <= _SHIFT_LIMIT \
                or max(s, t) * self.D_max > EXPONENT_FLOOR:  # clamped entries: no identity
            return False
        _shift_similarity(self.D, t - s, self.Z, threads=self.threads())
        return True

    # -- scales in pairs -----------------------------------------------------------------------
    def announce_pairs(self, pairs, total, half) -> None:
        """Announce scales about to be asked for: ``pairs`` of scales (larger, smaller) summing
        to ``total`` up to round-off, and ``half`` = total / 2 (or None); no pairs (or
        ``total`` None) frees the extra buffers. A hint, never a condition of correctness.

        exp(-tD) of an announced larger scale is then exp(-total·D) / exp(-sD), with exp(-sD)
        of its smaller partner s formed in the same pass and kept for its turn, and
        exp(-half·D) is sqrt(exp(-total·D)): one division or square root an entry instead of
        an exponential (7 to 11 ns an entry where NumPy's float64 exp is scalar, without
        AVX-512): 13 of the 23 new scales of a 25-scale MagArea (the larger of 11 pairs,
        total / 2, and a smaller partner total / 4 as the square root of that) without
        exponentials of their own, exp(-total·D) copied where :attr:`Z` holds it (the
        convergence scale's last solve). The entries differ from the exponential's by a few
        units in the last place, as much as the exponential's own rounding; apart from
        total / 4, only scales of total / 2 and above are formed so, where Z is well
        conditioned, and not where exp(-total·D) meets its floor (``EXPONENT_FLOOR``), which
        would break the identity. (The batch does the same for its looped members:
        ``_batch_solve._looped_values``.)

        The order the scales are then asked in only decides what is saved, never a value:
        every buffer is keyed by its own scale. The saving needs each smaller partner asked
        for after its larger one and before the next pair's larger one, as
        ``_chebyshev._paired_order`` does; a smaller scale asked first is formed by
        exponentials (and again with its larger partner), and a larger scale asked while
        another partner still waits is formed by exponentials (no memory for a third buffer).
        """
        self._spare.extend(self._stash.values())
        self._stash.clear()
        self._pair_partners = {}
        self._pair_half = None
        usable = (total is not None and pair_memory(self.n) > 0
                  and total * self.D_max <= EXPONENT_FLOOR)
        if not usable or not (pairs or half is not None):
            self._pair_total = None
            self._E_total = None
            self._E_total_valid = False
            self._spare.clear()
            return
        if total != self._pair_total:
            self._pair_total, self._E_total_valid = total, False
        self._pair_partners = dict(pairs)
        self._pair_half = half

    def _paired(self, t: float) -> bool:
        """exp(-tD) in the upper triangle of :attr:`Z` from an announced pair, if t is one of
        its scales (see :meth:`announce_pairs`); False where it must be formed otherwise."""
        if t in self._stash:  # a smaller partner, formed with its larger one: the buffers swap
            self._spare.append(self.Z)
            self.Z = self._stash.pop(t)
            return True
        smaller = self._pair_partners.pop(t, None)
        half = t == self._pair_half
        if smaller is None and not half:
            return False
        if smaller is not None and self._stash:
            # A partner still waits (the pairs were not asked for one after the other): no
            # memory for another, both by exponentials.
            return False
        E_total = self._total_similarity()
        threads = self.threads()
        if half:
            _row_blocks(self.n, full=False, threads=threads,
                        worker=lambda: lambda rows: np.sqrt(E_total[rows], out=self.Z[rows]))
            return True
        E_smaller = self._spare.pop() if self._spare else np.zeros(self.D.shape)
        if abs(smaller - 0.25 * self._pair_total) <= 8 * np.finfo(float).eps * self._pair_total:
            # The first level's t_N/4 = T/4 (Chebyshev node cos(π/3) = 1/2): exp(-TD/4) is
            # sqrt(sqrt(exp(-TD))), two square roots an entry instead of an exponential (the
            # pair's fill 4.0 against 5.4 to 7.9 ms at n = 1,000 here).
            def quarter(rows) -> None:
                np.sqrt(E_total[rows], out=E_smaller[rows])
                np.sqrt(E_smaller[rows], out=E_smaller[rows])
                np.divide(E_total[rows], E_smaller[rows], out=self.Z[rows])
            _row_blocks(self.n, full=False, threads=threads, worker=lambda: quarter)
        else:
            _fill_similarity(self.D, smaller, E_smaller, None, fill64=True, full=False,
                             clamp=False, threads=threads, quotient=(E_total, self.Z))
        self._stash[smaller] = E_smaller
        return True

    def _total_similarity(self) -> np.ndarray:
        """exp(-TD) for the announced pairs' T, in the upper triangle of its own buffer (a copy
        of :attr:`Z`'s where that holds it)."""
        if not self._E_total_valid:
            if self._E_total is None:
                self._E_total = np.zeros(self.D.shape)
            if self.scale == self._pair_total:
                _row_blocks(self.n, full=False, threads=self.threads(),
                            worker=lambda: lambda rows: np.copyto(self._E_total[rows],
                                                                  self.Z[rows]))
            else:
                _fill_similarity(self.D, self._pair_total, self._E_total, None, fill64=True,
                                 full=False, clamp=False, threads=self.threads())
            self._E_total_valid = True
        return self._E_total
