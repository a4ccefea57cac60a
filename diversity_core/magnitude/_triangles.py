"""Sums over one strict triangle of exp(-tD) in row blocks: the first-order sums of a distance
matrix (the convergence-scale search's start), shared by the dense solver (``_solver``) and the
batch (``_batch_solve``), so that both add the same blocks in the same order (the same bits).
"""

from __future__ import annotations

import numpy as np

from ._elementwise import _BLOCK_ENTRIES, _exponentials


def triangle_rows(n: int) -> int:
    """Rows per block for n points, here and in the dense solver's passes over a triangle.
    Short blocks: the diagonal block's triangle is cut out with a copy (np.triu), which cost as
    much as the rest of the product when the block was the whole matrix."""
    return max(1, min(64, _BLOCK_ENTRIES // n))


def triangle_block(D: np.ndarray, t: float, start: int, stop: int):
    """``(E, Db)``: exp(-tD) of rows ``start:stop`` and columns ``start:`` formed afresh, zero
    outside the strict upper triangle, and ``Db``, those rows and columns of D."""
    Db = D[start:stop, start:]
    E = np.empty(Db.shape)
    _exponentials(Db, t, E, clamp=False)
    E[:, :stop - start] = np.triu(E[:, :stop - start], 1)
    return E, Db


def pair_sums(D: np.ndarray, t: float) -> tuple[float, float]:
    """``(Σ_{i≠j} exp(-t D_ij), Σ_{i≠j} D_ij exp(-t D_ij))`` of a distance matrix on one
    thread: the bits of the dense solver's ``pair_sums`` where it forms exp(-tD) afresh (the
    same blocks, added in the same order), for a batch's members."""
    n = len(D)
    rows = triangle_rows(n)
    similarity = weighted = 0.0
    for start in range(0, n, rows):
        E, Db = triangle_block(D, t, start, min(start + rows, n))
        block_similarity, block_weighted = pair_parts(E, Db)
        similarity += block_similarity
        weighted += block_weighted
    return 2.0 * similarity, 2.0 * weighted


def pair_parts(E: np.ndarray, Db: np.ndarray) -> tuple[float, float]:
    """One block's ``(Σ E, Σ Db ∘ E)`` (E overwritten): the two first-order sums' parts."""
    similarity = float(E.sum())
    E *= Db
    return similarity, float(E.sum())
