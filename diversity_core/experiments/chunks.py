"""An experiment's items split among parallel jobs: job ``chunk`` of ``n_chunks`` takes one
contiguous, balanced share (the curvature experiment's clouds, the text experiment's
prompts)."""

from __future__ import annotations

import numpy as np

__all__ = ["chunk_indices"]


def chunk_indices(n_items: int, n_chunks: int, chunk: int) -> np.ndarray:
    """Indices of the items that job ``chunk`` of ``n_chunks`` processes (contiguous, balanced:
    ``np.array_split``)."""
    if not 0 <= chunk < n_chunks:
        raise ValueError(f"chunk {chunk} is outside 0..{n_chunks - 1}.")
    return np.array_split(np.arange(n_items), n_chunks)[chunk]
