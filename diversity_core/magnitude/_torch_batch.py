"""Batches of spaces on a torch device: convergence scales, magnitude functions and MagAreas of
many sets at once (the torch counterpart of ``_batch``).

Members are moved to the device as given, grouped by size, and checked there together (the
checks of ``check_distance_matrix`` and the duplicate search, decided exactly as on the host:
``_plain_members``); members flagged are checked and de-duplicated on the host (as
``MagnitudeSpace`` does, for its message). They are grouped by their number of distinct points
and stacked on the device, (G, m, m) per group. Every
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
from ..device import Device, free_memory, parse_device
from ._batch import (
    PreparedBatch,
    _member_warnings,
    convergence_scales,
    magnitude_functions,
)
from ._batch_areas import mag_areas
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
from ._solver import fallback_derivatives, fallback_solve
from ._space import MagnitudeSpace
from ._torch import _duplicate_groups, _pair_sums, _torch, _torch_device, check_torch_memory

__all__ = ["TorchMagnitudeBatch", "torch_convergence_scales", "torch_magnitude_functions",
           "torch_mag_areas", "torch_batch_memory"]

# Similarity entries per batched chunk (float64: 256 MiB per matrix stack): the chunk's
# distances, similarities, factors and products are four such stacks at most.
_CHUNK_ENTRIES = 1 << 25
# On a GPU with the memory to spare (twice the four stacks, after the batch's distances), chunks
# of up to this many entries (2 GiB a stack): a level of MagArea's nodes for 200 sets of 300
# points is then one chunk, not seven, each with its launches and its transfer to the host.
_CHUNK_ENTRIES_SPARE = 1 << 28

def torch_batch_memory(sizes) -> int:
    """Device bytes of a batch of spaces of ``sizes`` distinct points: their stacked float64
    distance matrices plus four stacks of one chunk (similarities, factors, products)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    stacked = int(8 * (sizes**2).sum())
    chunk = 4 * 8 * min(int((sizes**2).sum()), _CHUNK_ENTRIES + int((sizes**2).max(initial=0)))
    return stacked + chunk + 64 * 2**20


def _plain_members(raw) -> np.ndarray:
    """For each matrix of a (G, n, n) float64 stack on its device: whether it passes the checks
    of ``check_distance_matrix`` (finite, non-negative, zero diagonal and symmetric to 1e-10 of
    its largest entry) and has no pair of distinct points within ``DUPLICATE_RTOL`` of it — the
    NumPy batch's vectorised checks (``_batch._Batch._prepare_small``), on the device. The
    decisions are exact comparisons of the same values, so a member is flagged here exactly
    when the host would flag it; 200 members of 300 points were checked on the host in 120 to
    130 ms of a 0.25 s batch on an H200's host."""
    torch = _torch()
    G, n = raw.shape[0], raw.shape[1]
    plain = torch.empty(G, dtype=torch.bool, device=raw.device)
    chunk = max(1, _CHUNK_ENTRIES // (n * n))
    for start in range(0, G, chunk):
        C = raw[start:start + chunk]
        finite = torch.isfinite(C).flatten(1).all(dim=1)
        high = torch.where(finite, C.flatten(1).amax(dim=1), 0.0)
        scale = torch.where(high > 0, high, 1.0)
        diagonal = C.diagonal(dim1=1, dim2=2).abs().amax(dim=1)
        asymmetry = (C - C.mT).abs().flatten(1).amax(dim=1)
        valid = (finite & (C.flatten(1).amin(dim=1) >= 0) & (diagonal <= 1e-10 * scale)
                 & (asymmetry <= 1e-10 * scale))
        close = C <= (DUPLICATE_RTOL * high)[:, None, None]
        close.diagonal(dim1=1, dim2=2).fill_(False)
        plain[start:start + chunk] = valid & ~close.flatten(1).any(dim=1)
    return plain.cpu().numpy()


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
    chunk_entries : int
        Similarity entries factorised together at most (see ``_CHUNK_ENTRIES_SPARE``).
    """

    def __init__(self, spaces, *, device: Device | str = "cpu", memory_limit: int | None = None):
        torch = _torch()
        if isinstance(spaces, np.ndarray) and spaces.ndim != 3:
            raise ValueError("spaces must be a sequence of distance matrices (or an array of "
                             "shape (m, n, n)); got a single space: wrap it in a list.")
        arrays = [np.asarray(A) for A in spaces]
        self.m = len(arrays)
        if self.m == 0:
            raise ValueError("an empty batch: no spaces.")
        where = _torch_device(device)
        self.device = where.to_torch()
        self.failures: dict[int, str] = {}
        self.D: list[np.ndarray | None] = [None] * self.m
        self.n_points = np.zeros(self.m, dtype=np.intp)
        self.n_unique = np.zeros(self.m, dtype=np.intp)
        # Square numeric matrices go to the device as they are, grouped by size, and are checked
        # there; the rest, and members the checks flag, on the host (for the message of
        # check_distance_matrix, or to be de-duplicated).
        by_size: dict[int, list[int]] = {}
        for i, A in enumerate(arrays):
            if (A.ndim == 2 and A.shape[0] == A.shape[1] and A.shape[0] > 0
                    and A.dtype != object and np.issubdtype(A.dtype, np.number)
                    and not np.iscomplexobj(A)):
                by_size.setdefault(A.shape[0], []).append(i)
            else:
                self._prepare_on_host(i, A)
        sizes = [n for n, members in by_size.items() for _ in members]
        sizes += [int(self.n_unique[i]) for i in range(self.m) if self.D[i] is not None]
        # The sizes as given bound the de-duplicated ones: checked before anything is moved.
        check_torch_memory(torch_batch_memory(sizes), where, memory_limit=memory_limit,
                           what=f"a batch of {len(sizes):,} spaces")
        on_device: dict[int, tuple] = {}  # member -> (stack as given, its row)
        for n, members in by_size.items():
            raw = torch.empty((len(members), n, n), dtype=torch.float64, device=self.device)
            given = {}
            for k, i in enumerate(members):
                # float64 in native byte order on the host (no copy if it is already)
                given[i] = np.ascontiguousarray(arrays[i], dtype=np.float64)
                raw[k].copy_(torch.from_numpy(given[i]))
            plain = _plain_members(raw)
            for k, i in enumerate(members):
                if plain[k]:
                    self.D[i] = given[i]
                    self.n_points[i] = self.n_unique[i] = n
                    on_device[i] = (raw, k)
                else:
                    self._prepare_on_host(i, arrays[i])
        self.ok = np.array([i not in self.failures for i in range(self.m)])
        groups: dict[int, list[int]] = {}
        for i in np.flatnonzero(self.ok):
            groups.setdefault(int(self.n_unique[i]), []).append(int(i))
        self.group_of = np.full(self.m, -1, dtype=np.intp)
        self.row_of = np.full(self.m, -1, dtype=np.intp)
        self.groups = []  # (size, members, stacked distances on the device)
        for g, (size, members) in enumerate(sorted(groups.items())):
            self.groups.append((size, np.asarray(members, dtype=np.intp),
                                self._stack(members, on_device)))
            self.group_of[members] = g
            self.row_of[members] = np.arange(len(members))
        self.fallbacks: dict[int, list[dict]] = {}
        self.chunk_entries = _CHUNK_ENTRIES
        if where.kind == "cuda" and memory_limit is None:
            spare = free_memory(where) // (2 * 4 * 8)
            while 2 * self.chunk_entries <= min(spare, _CHUNK_ENTRIES_SPARE):
                self.chunk_entries *= 2

    def _prepare_on_host(self, i: int, A) -> None:
        """Member ``i`` checked and de-duplicated on the host (as ``MagnitudeSpace`` does), or
        its failure recorded."""
        try:
            D = check_distance_matrix(A, name=f"member {i}")
        except ValueError as exc:
            self.failures[i] = str(exc)
            return
        self.n_points[i] = D.shape[0]
        near = np.argwhere(D <= DUPLICATE_RTOL * float(D.max()))
        groups = _duplicate_groups(near, D.shape[0]) if len(near) > D.shape[0] else None
        if groups is not None:
            keep = groups[0]
            D = np.ascontiguousarray(D[np.ix_(keep, keep)])
        self.n_unique[i] = D.shape[0]
        self.D[i] = D

    def _stack(self, members: list[int], on_device: dict):
        """The members' distance matrices stacked on the device, in the order given. Where
        they all came in one stack (the common case), that stack, its rows moved up over those
        of members that failed or were de-duplicated (in place: no second stack in memory);
        else gathered."""
        torch = _torch()
        raw = on_device.get(members[0], (None,))[0]
        if raw is not None and all(i in on_device and on_device[i][0] is raw for i in members):
            for new, old in enumerate(on_device[i][1] for i in members):  # rows ascending
                if new != old:
                    raw[new].copy_(raw[old])
            return raw[:len(members)]
        return torch.stack([on_device[i][0][on_device[i][1]] if i in on_device
                            else torch.as_tensor(self.D[i], device=self.device)
                            for i in members])

    def initial_scales(self):
        """``_search._initial_scale`` of every valid member, computed on the device (the same
        minima, and the median as NumPy takes it), in the members' order."""
        scales: dict[int, float] = {}
        for size, members, stack in self.groups:
            if size == 1:
                scales.update((int(i), np.nan) for i in members)
                continue
            chunk = max(1, _CHUNK_ENTRIES // (size * size))
            for start in range(0, len(members), chunk):
                off = stack[start:start + chunk].clone()
                off.diagonal(dim1=1, dim2=2).fill_(np.inf)
                nearest = off.amin(dim=2).sort(dim=1).values
                del off
                half = size // 2
                median = (nearest[:, half] if size % 2
                          else (nearest[:, half - 1] + nearest[:, half]) / 2)
                # 5 / median on the host: torch divides a number by a tensor through its
                # reciprocal, a unit in the last place away from _initial_scale's quotient.
                scales.update(zip(members[start:start + chunk].tolist(),
                                  (5.0 / median.cpu().numpy()).tolist(), strict=True))
        for i in sorted(scales):
            yield i, scales[i]

    def pair_sums(self, i: int, t: float) -> tuple[float, float]:
        _, _, stack = self.groups[self.group_of[i]]
        return _pair_sums(stack[int(self.row_of[i])], float(t))

    def pair_sums_many(self, idx, ts) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pair_sums` of members ``idx[k]`` at ``ts[k]``, a group's members in one
        reduction per chunk on the device (to round-off of the member's own sums)."""
        torch = _torch()
        idx, ts = np.asarray(idx, dtype=np.intp), np.asarray(ts, dtype=float)
        s0, s1 = np.empty(len(idx)), np.empty(len(idx))
        group_of = self.group_of[idx]
        for g in np.unique(group_of).tolist():
            size, _, stack = self.groups[g]
            at = np.flatnonzero(group_of == g)
            chunk = max(1, self.chunk_entries // (size * size))
            for start in range(0, len(at), chunk):
                part = at[start:start + chunk]
                D = stack[torch.as_tensor(self.row_of[idx[part]], device=self.device)]
                scale = torch.as_tensor(-ts[part], dtype=D.dtype, device=self.device)
                E = torch.mul(D, scale[:, None, None]).clamp_(min=-EXPONENT_FLOOR).exp_()
                similarity = E.sum(dim=(1, 2)) - size  # the diagonal's exp(0) = 1 taken off
                sums = torch.stack([similarity, E.mul_(D).sum(dim=(1, 2))]).cpu().numpy()
                s0[part], s1[part] = sums
        return s0, s1

    def evaluate(self, idx, ts, *, derivative: bool = False, complement: float | None = None):
        """Mag (and dMag/dt) of member ``idx[k]`` at scale ``ts[k] > 0``: arrays of len(idx)
        (dMag/dt None unless ``derivative``); ``complement`` is not used (every scale is
        factorised afresh)."""
        mag, derivatives = self._evaluate(idx, ts, 2 if derivative else 1)
        return mag, derivatives[0] if derivative else None

    def evaluate_derivatives(self, idx, ts):
        mag, derivatives = self._evaluate(idx, ts, 3)
        return mag, derivatives[0], derivatives[1]

    def _evaluate(self, idx, ts, order: int):
        """Mag and its first ``order`` − 1 derivatives (an array (order − 1, len(idx)))."""
        idx = np.asarray(idx, dtype=np.intp)
        ts = np.asarray(ts, dtype=np.float64)
        mag = np.empty(len(idx))
        derivatives = np.empty((order - 1, len(idx)))
        for g in np.unique(self.group_of[idx]):
            sel = np.flatnonzero(self.group_of[idx] == g)
            size, members, stack = self.groups[g]
            chunk = max(1, self.chunk_entries // (size * size))
            for start in range(0, len(sel), chunk):
                part = sel[start:start + chunk]
                values, found, failed = self._solve_stack(stack, self.row_of[idx[part]],
                                                          ts[part], order)
                mag[part] = values
                derivatives[:, part] = found
                for k in part[failed]:
                    mag[k], derivatives[:, k] = self._fallback(int(idx[k]), float(ts[k]), order)
        return mag, derivatives

    def _solve_stack(self, stack, rows, ts, order: int):
        """Mag, its first ``order`` − 1 derivatives (d²Mag/dt² = 2 vᵀZ⁻¹v − wᵀ(D²∘Z)w with
        v = (D∘Z)w, one more triangular solve) and which members' factorisations failed."""
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
        if order > 1:
            w = torch.linalg.solve_triangular(L.mT, v, upper=True)
            weighted = Z.mul_(Dc) @ w  # (D∘Z)w; Z now holds D∘Z
            out.append((w.mT @ weighted)[:, 0, 0])
        if order > 2:
            half = torch.linalg.solve_triangular(L, weighted, upper=False)
            out.append(2.0 * (half * half).sum(dim=(1, 2))
                       - (w.mT @ (Z.mul_(Dc) @ w))[:, 0, 0])
        host = torch.stack(out).cpu().numpy()  # one transfer
        return host[0], host[2:], host[1] != 0

    def _fallback(self, i: int, t: float, order: int) -> tuple[float, tuple]:
        with _member_warnings(i):
            w, record = fallback_solve(self.D[i], t, stacklevel=7)
        self.fallbacks.setdefault(i, []).append(record)
        if order == 1:
            return float(w.sum()), ()
        if order == 2:
            Dm = self.D[i]
            return float(w.sum()), (float(w @ ((Dm * np.exp(-t * Dm)) @ w)),)
        return float(w.sum()), fallback_derivatives(self.D[i], t, w)


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

