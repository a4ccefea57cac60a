"""Batches of spaces on a torch device: convergence scales, magnitude functions and MagAreas of
many sets at once (the torch counterpart of ``_batch``).

Members are validated and de-duplicated on the host (as ``MagnitudeSpace`` does), grouped by
their number of distinct points and stacked on the device, (G, m, m) per group. Every
evaluation the batch needs at a time is one batched factorisation per group and chunk:
``exp(-t_k D_k)`` for each member k at its own scale, ``torch.linalg.cholesky_ex`` on the stack,
batched triangular solves, and one transfer of the values to the host. The convergence-scale
searches, the Clenshaw–Curtis levels of MagArea and the magnitude functions are the NumPy
engine's own batch functions (``_batch.convergence_scales``, ``mag_areas``,
``magnitude_functions``): :class:`TorchMagnitudeBatch` is one more
:class:`~diversity_core.magnitude._batch.PreparedBatch`, which only evaluates differently, so
results agree with the NumPy engine's batch and single-space functions to round-off and fail
the same way (:class:`~diversity_core.magnitude.MagnitudeBatchError`). A member whose
similarity matrix is not numerically positive definite at some scale is solved on the CPU
there by the engine's own fallback (``_solver.fallback_solve``), with a
:class:`MagnitudeWarning` naming the member (its ``member`` attribute) and the scale.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_distance_matrix
from ..device import Device, parse_device
from ._batch import (
    PreparedBatch,
    _member_warnings,
    convergence_scales,
    mag_areas,
    magnitude_functions,
)
from ._common import (
    DEFAULT_INTEGRATION,
    DEFAULT_INTEGRATION_RTOL,
    DEFAULT_MAX_ITER,
    DEFAULT_N_TS,
    DEFAULT_T_CONV_RTOL,
    DEFAULT_TARGET,
    DUPLICATE_RTOL,
    EXPONENT_FLOOR,
)
from ._search import _initial_scale
from ._solver import fallback_solve
from ._space import MagnitudeSpace
from ._torch import _duplicate_groups, _torch, _torch_device, check_torch_memory

__all__ = ["TorchMagnitudeBatch", "torch_convergence_scales", "torch_magnitude_functions",
           "torch_mag_areas", "torch_batch_memory"]

# Similarity entries per batched chunk (float64: 256 MiB per matrix stack): the chunk's
# distances, similarities, factors and products are four such stacks at most.
_CHUNK_ENTRIES = 1 << 25

def torch_batch_memory(sizes) -> int:
    """Device bytes of a batch of spaces of ``sizes`` distinct points: their stacked float64
    distance matrices plus four stacks of one chunk (similarities, factors, products)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    stacked = int(8 * (sizes**2).sum())
    chunk = 4 * 8 * min(int((sizes**2).sum()), _CHUNK_ENTRIES + int((sizes**2).max(initial=0)))
    return stacked + chunk + 64 * 2**20


class TorchMagnitudeBatch(PreparedBatch):
    """The members of a batch, validated, de-duplicated and stacked on ``device``.

    Parameters
    ----------
    spaces : sequence of m arrays of shape (n_i, n_i), or an array of shape (m, n, n)
    device : Device or str (its torch device is used; see
        :class:`~diversity_core.magnitude.TorchMagnitudeSpace`)
    memory_limit : int, optional (default: the device's free memory; see
        :func:`~diversity_core.magnitude.check_torch_memory`)

    Attributes
    ----------
    m : int; n_points, n_unique : arrays of shape (m,); failures : dict int -> str
    """

    def __init__(self, spaces, *, device: Device | str = "cpu", memory_limit: int | None = None):
        torch = _torch()
        if isinstance(spaces, np.ndarray) and spaces.ndim != 3:
            raise ValueError("spaces must be a sequence of distance matrices (or an array of "
                             "shape (m, n, n)); got a single space: wrap it in a list.")
        spaces = list(spaces)
        self.m = len(spaces)
        if self.m == 0:
            raise ValueError("an empty batch: no spaces.")
        where = _torch_device(device)
        self.device = where.to_torch()
        self.failures: dict[int, str] = {}
        self.D: list[np.ndarray | None] = [None] * self.m
        self.n_points = np.zeros(self.m, dtype=np.intp)
        self.n_unique = np.zeros(self.m, dtype=np.intp)
        for i, A in enumerate(spaces):
            try:
                self.D[i] = self._prepare(i, A)
            except ValueError as exc:
                self.failures[i] = str(exc)
        self.ok = np.array([i not in self.failures for i in range(self.m)])
        check_torch_memory(torch_batch_memory(self.n_unique[self.ok]), where,
                           memory_limit=memory_limit,
                           what=f"a batch of {int(self.ok.sum()):,} spaces")
        by_size: dict[int, list[int]] = {}
        for i in np.flatnonzero(self.ok):
            by_size.setdefault(int(self.n_unique[i]), []).append(int(i))
        self.group_of = np.full(self.m, -1, dtype=np.intp)
        self.row_of = np.full(self.m, -1, dtype=np.intp)
        self.groups = []  # (size, members, stacked distances on the device)
        for g, (size, members) in enumerate(sorted(by_size.items())):
            stack = torch.as_tensor(np.stack([self.D[i] for i in members]), device=self.device)
            self.groups.append((size, np.asarray(members, dtype=np.intp), stack))
            self.group_of[members] = g
            self.row_of[members] = np.arange(len(members))
        self.fallbacks: dict[int, list[dict]] = {}

    def _prepare(self, i: int, A) -> np.ndarray:
        D = check_distance_matrix(A, name=f"member {i}")
        self.n_points[i] = D.shape[0]
        near = np.argwhere(D <= DUPLICATE_RTOL * float(D.max()))
        groups = _duplicate_groups(near, D.shape[0]) if len(near) > D.shape[0] else None
        if groups is not None:
            keep = groups[0]
            D = np.ascontiguousarray(D[np.ix_(keep, keep)])
        self.n_unique[i] = D.shape[0]
        return D

    def initial_scales(self):
        for i in np.flatnonzero(self.ok).tolist():
            yield i, (_initial_scale(self.D[i]) if self.n_unique[i] > 1 else np.nan)

    def evaluate(self, idx, ts, *, derivative: bool = False, complement: float | None = None):
        """Mag (and dMag/dt) of member ``idx[k]`` at scale ``ts[k] > 0``: arrays of len(idx)
        (dMag/dt None unless ``derivative``); ``complement`` is not used (every scale is
        factorised afresh)."""
        idx = np.asarray(idx, dtype=np.intp)
        ts = np.asarray(ts, dtype=np.float64)
        mag = np.empty(len(idx))
        dmag = np.empty(len(idx)) if derivative else None
        for g in np.unique(self.group_of[idx]):
            sel = np.flatnonzero(self.group_of[idx] == g)
            size, members, stack = self.groups[g]
            chunk = max(1, _CHUNK_ENTRIES // (size * size))
            for start in range(0, len(sel), chunk):
                part = sel[start:start + chunk]
                values, slopes, failed = self._solve_stack(stack, self.row_of[idx[part]],
                                                           ts[part], derivative)
                mag[part] = values
                if derivative:
                    dmag[part] = slopes
                for k in part[failed]:
                    mag[k], d = self._fallback(int(idx[k]), float(ts[k]), derivative)
                    if derivative:
                        dmag[k] = d
        return mag, dmag

    def _solve_stack(self, stack, rows, ts, derivative: bool):
        torch = _torch()
        Dc = stack[torch.as_tensor(rows, device=self.device)]
        t = torch.as_tensor(ts, device=self.device)[:, None, None]
        # The floor of the NumPy engine's exponentials (_common.EXPONENT_FLOOR).
        Z = torch.mul(Dc, -t).clamp_(min=-EXPONENT_FLOOR).exp_()
        L, info = torch.linalg.cholesky_ex(Z)
        ones = torch.ones((len(rows), Dc.shape[1], 1), dtype=torch.float64, device=self.device)
        v = torch.linalg.solve_triangular(L, ones, upper=False)
        mag = (v * v).sum(dim=(1, 2))
        out = [mag, info.to(torch.float64)]
        if derivative:
            w = torch.linalg.solve_triangular(L.mT, v, upper=True)
            out.append((w.mT @ (Z.mul_(Dc) @ w))[:, 0, 0])
        host = torch.stack(out).cpu().numpy()  # one transfer
        return host[0], host[2] if derivative else None, host[1] != 0

    def _fallback(self, i: int, t: float, derivative: bool):
        with _member_warnings(i):
            w, record = fallback_solve(self.D[i], t, stacklevel=7)
        self.fallbacks.setdefault(i, []).append(record)
        if not derivative:
            return float(w.sum()), None
        Dm = self.D[i]
        return float(w.sum()), float(w @ ((Dm * np.exp(-t * Dm)) @ w))


def batch_on_device(spaces, device):
    """A batch of spaces where the engine runs: ``spaces`` themselves for the NumPy engine
    (``device.engine``, a :class:`~diversity_core.device.Device` or a name), else a
    :class:`TorchMagnitudeBatch` of their (de-duplicated) distances on ``device``, which the
    batch functions (``convergence_scales``, ``mag_areas``, ``magnitude_functions``) take as
    they take a list of matrices."""
    device = parse_device(device)
    if device.engine == "numpy" or isinstance(spaces, PreparedBatch):
        return spaces
    return TorchMagnitudeBatch([S.D if isinstance(S, MagnitudeSpace) else S for S in spaces],
                               device=device)


def _batch(spaces, device: Device | str, memory_limit: int | None) -> TorchMagnitudeBatch:
    if isinstance(spaces, TorchMagnitudeBatch):
        return spaces
    return TorchMagnitudeBatch(spaces, device=device, memory_limit=memory_limit)


def torch_convergence_scales(spaces, target: float = DEFAULT_TARGET, *,
                             device: Device | str = "cpu",
                             rtol: float = DEFAULT_T_CONV_RTOL, max_iter: int = DEFAULT_MAX_ITER,
                             errors: str = "raise",
                             memory_limit: int | None = None) -> np.ndarray:
    """:func:`~diversity_core.magnitude.convergence_scales` on a torch device.

    ``spaces``: a sequence of distance matrices or a :class:`TorchMagnitudeBatch` (prepared
    once for several calls). Returns an array of shape (m,); failures as the NumPy engine's
    (:class:`~diversity_core.magnitude.MagnitudeBatchError`, or NaN with ``errors="nan"``)."""
    return convergence_scales(_batch(spaces, device, memory_limit), target, rtol=rtol,
                              max_iter=max_iter, errors=errors)


def torch_magnitude_functions(spaces, ts, *, device: Device | str = "cpu",
                              errors: str = "raise",
                              memory_limit: int | None = None) -> np.ndarray:
    """:func:`~diversity_core.magnitude.magnitude_functions` on a torch device: an array of
    shape (m, n_scales)."""
    return magnitude_functions(_batch(spaces, device, memory_limit), ts, errors=errors)


def torch_mag_areas(spaces, t_cut, *, device: Device | str = "cpu",
                    method: str = DEFAULT_INTEGRATION,
                    rtol: float = DEFAULT_INTEGRATION_RTOL, n_ts: int = DEFAULT_N_TS,
                    errors: str = "raise", memory_limit: int | None = None) -> np.ndarray:
    """:func:`~diversity_core.magnitude.mag_areas` on a torch device: one ``t_cut`` for all
    or one per space; members sharing a limit share its Clenshaw–Curtis nodes."""
    return mag_areas(_batch(spaces, device, memory_limit), t_cut, method=method, rtol=rtol,
                     n_ts=n_ts, errors=errors)

