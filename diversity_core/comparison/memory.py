"""The memory rule of :func:`diversity_core.compare` (and ``score``): how much the sets will need,
checked before anything is computed.

:func:`required_memory` adds up what a comparison holds (the dense sets' distance matrices, to
the end) and its largest single need (the engine's
:func:`~diversity_core.magnitude.magnitude_memory` of a set, PRDC's and MMD's distances against
a reference); :func:`check_memory` refuses with a
:class:`~diversity_core.MemoryNeedError` of one line naming the figure and the largest set (the
command line adds its remedy, ``--subsample``). Both are importable from
:mod:`diversity_core.comparison`.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._memory import MemoryNeedError
from ..device import Device, parse_device
from ..magnitude import available_memory, magnitude_plan

__all__ = ["check_memory", "required_memory"]


def required_memory(sizes: Mapping[str, int], n_features: int, *, metric: str = "cosine",
                    reference: str | None = None, magnitude: bool = True,
                    device: Device | str = "cpu") -> tuple[int, str]:
    """Peak memory of :func:`~diversity_core.compare` (and of ``score``) on sets of these
    sizes, in bytes, and the set that needs the most.

    Each set's path and bytes are the engine's answer,
    :func:`~diversity_core.magnitude.magnitude_plan`. Every dense set's distance matrix is held
    until the end (8 bytes a pair, and as much again for the batch's copies); on top of that the
    largest single need: the engine's
    :func:`~diversity_core.magnitude.magnitude_memory` of a set (its similarity buffers; the
    large-n path for sets beyond 10,000 points, plus a copy of the points for the baselines,
    which work in blocks or on the d × d covariance), and with a ``reference`` PRDC's and MMD's
    distances between a set and the reference, ``8 (n + n_ref)²``. ``magnitude=False`` (no
    magnitude measure asked for): only the baselines' copy of the points and the distances
    against the reference. On a torch ``device`` (the engine's torch path) a set beyond 10,000
    points is prepared on the device from its points (its memory is the device's, checked by
    :func:`~diversity_core.magnitude.device_path`): the host holds its points only.
    """
    device = parse_device(device)
    held, peak, worst = 0, 0, None
    n_ref = sizes[reference] if reference is not None else 0
    for name, n in sizes.items():
        n = int(n)
        if n < 1:
            continue
        if not magnitude:
            need = 16 * n * n_features
        else:  # the engine's own answer (path and bytes) for this set on this device
            plan = magnitude_plan(n, n_features, metric=metric, device=device)
            held += plan.held_bytes
            need = plan.peak_bytes
        if reference is not None and name != reference:
            need = max(need, 8 * (n + n_ref) ** 2)
        if need > peak:
            peak, worst = need, name
    return held + peak, worst


def check_memory(sizes: Mapping[str, int], n_features: int, *, metric: str = "cosine",
                 reference: str | None = None, memory_limit: int | None = None,
                 magnitude: bool = True, device: Device | str = "cpu") -> int:
    """Raise :class:`~diversity_core.MemoryNeedError` (one line: the figure, the largest set;
    ``need`` and ``limit`` as numbers) if :func:`required_memory` exceeds ``memory_limit``
    (default: the memory available now); else return the bytes needed."""
    need, worst = required_memory(sizes, n_features, metric=metric, reference=reference,
                                  magnitude=magnitude, device=device)
    limit = available_memory() if memory_limit is None else int(memory_limit)
    if need > limit:
        have = "are available" if memory_limit is None else "allowed"
        raise MemoryNeedError(
            f"these {len(sizes)} set{'s' if len(sizes) != 1 else ''} need about "
            f"{need / 2**30:.1f} GiB (the largest, {worst}: {sizes[worst]:,} points in "
            f"{n_features} dimensions); {limit / 2**30:.1f} GiB {have}", need=need, limit=limit)
    return need
