"""Magnitude on a torch device (a CUDA GPU; the CPU for tests): dense float64, one space.

The same mathematics as the NumPy engine (see :mod:`diversity_core.magnitude`): one Cholesky
factorisation of ``Z_t = exp(-tD)`` per scale (``torch.linalg.cholesky_ex``, in place),
``Mag(t) = ‖L⁻¹1‖²``, the weighting ``w = L⁻ᵀL⁻¹1`` and ``dMag/dt = wᵀ(D∘Z_t)w`` when asked for,
duplicates merged without reordering, and the scales' values remembered. The convergence-scale
search takes exactly the NumPy engine's steps (``_search._ScaleSearch`` from the same first
guess) and MagArea uses its quadrature (``_quadrature._integrate``), so the results agree with
the NumPy engine's direct solver to round-off (the tests check 1e-9 relative).

What it does not do: conjugate gradients (the NumPy engine's default from 500 points; the two
then agree to the accuracy CG is asked for, about 1e-10 for t_conv and ``rtol / 16`` per scale
inside a MagArea) and the large-n path (float32 distances): on a GPU the float64 factorisation
of 10,000 points took 16 ms, and the matrices must fit in the device's memory
(:func:`torch_magnitude_memory`; refused beforehand by :func:`check_torch_memory`).

Where ``Z_t`` is not numerically positive definite, the scale is solved on the CPU as the NumPy
engine solves it (symmetric indefinite LDLᵀ, else a pseudo-inverse), recorded in
:attr:`TorchMagnitudeSpace.fallbacks` and announced by a :class:`MagnitudeWarning` naming the
scale: never a silently wrong number.

torch is imported when a space is made, never when this module is: the package imports
without it. The engine's device is a :class:`~diversity_core.device.Device` (its table of
names: ``cpu`` and ``auto`` the NumPy engine, so that committed tables do not depend on the
machine; ``cuda``, ``cuda:N`` and ``torch:cpu`` this path).
"""

from __future__ import annotations

import math

import numpy as np

from .._memory import MemoryNeedError
from .._validation import check_distance_matrix
from ..device import Device, free_memory, parse_device
from ._common import DUPLICATE_RTOL, EXPONENT_FLOOR, duplicate_groups
from ._quadrature import _integrate, path_rule
from ._solver import fallback_derivatives, fallback_solve
from ._space import _Operations

__all__ = [
    "TorchMagnitudeSpace",
    "space_on_device",
    "torch_magnitude_memory",
    "check_torch_memory",
]

# Entries per row block of the derivative's product (exp(-tD) formed afresh block by block:
# one O(n²) pass beside an O(n³) factorisation, instead of a third n × n matrix in memory).
_BLOCK_ENTRIES = 1 << 24
# From this many points on, Euclidean distances on a device come from one matrix product (see
# _euclidean_by_products): the NumPy side's threaded distances start there too; below it cdist's
# differences cost little.
_PRODUCT_DISTANCES_FROM = 2048
# The largest relative error of a squared distance by the product; pairs that could exceed it
# are formed from their differences (a distance's error: half of it).
_PRODUCT_RTOL = 1e-11
# Past this share of all pairs formed again, every pair is (cdist by rows).
_PRODUCT_RECOMPUTE_SHARE = 1 / 16
# Bytes of device memory per pair of distinct points: the distance matrix and the similarity
# matrix that is factorised in place (float64 each), plus one more for the factorisation's own
# workspace and the allocator's slack (cuSOLVER's potrf may copy an aliased output).
_BYTES_PER_PAIR = 3 * 8
_OVERHEAD_BYTES = 64 * 2**20


def _torch():
    try:
        import torch
    except ModuleNotFoundError as exc:  # pragma: no cover - torch comes with the embeddings
        if exc.name != "torch":
            raise
        raise ImportError("the magnitude engine's torch path needs torch (pip install torch); "
                          "device 'cpu' uses the NumPy engine without it.") from exc
    return torch


def space_on_device(D, device):
    """``D`` (a distance matrix or a prepared space) where the engine runs: itself for the
    NumPy engine (``device.engine``, a :class:`~diversity_core.device.Device` or a name) and
    for a large or torch space; else a :class:`TorchMagnitudeSpace` of its (de-duplicated)
    distances on ``device``."""
    from ._large import LargeMagnitudeSpace
    from ._space import MagnitudeSpace

    device = parse_device(device)
    if device.engine == "numpy" or isinstance(D, (LargeMagnitudeSpace, TorchMagnitudeSpace)):
        return D
    return TorchMagnitudeSpace(D.D if isinstance(D, MagnitudeSpace) else D, device=device)


def torch_magnitude_memory(n_points: int, n_features: int = 0) -> int:
    """Device memory, in bytes, of a :class:`TorchMagnitudeSpace` of ``n_points`` distinct
    points and a convergence scale and MagArea of it: the float64 distance and similarity
    matrices and one matrix of workspace (24 bytes per pair of points: 2.4 GB at 10,000 points,
    60 GB at 50,000), the points themselves and their centred copy (``n_features``, where the
    distances are formed on the device) and a derivative block."""
    n, d = int(n_points), int(n_features)
    if n < 1 or d < 0:
        raise ValueError(f"need at least one point and no negative width; got {n} x {d}.")
    block = 8 * min(n * n, _BLOCK_ENTRIES) * 2
    # The points twice: as given and centred (_euclidean_by_products).
    return _BYTES_PER_PAIR * n * n + 16 * n * d + block + 16 * 8 * n + _OVERHEAD_BYTES


def check_torch_memory(need: int, device, *, memory_limit: int | None = None,
                       what: str = "this computation") -> None:
    """Raise :class:`~diversity_core.MemoryNeedError` in one line, before anything is
    allocated, if ``need`` bytes exceed the free memory of ``device`` (a
    :class:`~diversity_core.device.Device`; CUDA: ``torch.cuda.mem_get_info``; the CPU: the
    host's available memory) or ``memory_limit``."""
    device = parse_device(device)  # a name given here is this public function's to parse
    limit = free_memory(device) if memory_limit is None else int(memory_limit)
    if need > limit:
        have = "free" if memory_limit is None else "allowed (memory_limit)"
        raise MemoryNeedError(f"{what} needs about {need / 2**30:.2f} GiB on {device.torch}; "
                              f"{limit / 2**30:.2f} GiB {have}.", need=need, limit=limit)


def _torch_device(device) -> Device:
    """The :class:`~diversity_core.device.Device` of a torch space or batch: a ``Device`` as it
    is (parsed at its edge); a name or a ``torch.device`` given to a constructor is this edge's,
    parsed here once (one line for a GPU torch does not see, rather than CUDA's error at the
    first allocation)."""
    _torch()  # one line without torch
    return parse_device(device if isinstance(device, (Device, str)) else str(device))


def _duplicate_groups(near_pairs: np.ndarray, n: int):
    """(keep, group_of_point, multiplicity) from the (k, 2) index pairs of near-zero
    distances, merged as ``MagnitudeSpace`` merges them (``_common.duplicate_groups``); None if
    there are no duplicates."""
    rows, cols = near_pairs[:, 0], near_pairs[:, 1]
    off = rows != cols
    if not off.any():
        return None
    keep, group_of_point = duplicate_groups(n, rows[off], cols[off])
    return keep, group_of_point, np.bincount(group_of_point, minlength=len(keep))


def _check_distance_tensor(D, name: str):
    """The checks of ``check_distance_matrix`` on a float64 tensor where it lies."""
    torch = _torch()
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) distance matrix; got shape "
                         f"{tuple(D.shape)}.")
    if D.shape[0] == 0:
        raise ValueError(f"{name} is an empty set: the distance matrix has no points.")
    if not bool(torch.isfinite(D).all()):
        raise ValueError(f"{name} contains NaN or infinite values.")
    low, high = float(D.min()), float(D.max())
    if low < 0:
        raise ValueError(f"{name} has negative distances (min {low:.3g}).")
    scale = high or 1.0
    if float(D.diagonal().abs().max()) > 1e-10 * scale:
        raise ValueError(f"{name} has a non-zero diagonal: a point must be at distance 0 from "
                         "itself.")
    n, rows = D.shape[0], max(1, _BLOCK_ENTRIES // D.shape[0])
    # Row block against column block: no n × n temporary (60 GB at 50,000 points).
    asym = max(float((D[s:s + rows] - D[:, s:s + rows].T).abs().max()) for s in range(0, n, rows))
    if asym > 1e-10 * scale:
        raise ValueError(f"{name} is not symmetric (largest |D - D.T| = {asym:.3g}).")
    return D


class TorchMagnitudeSpace(_Operations):
    """A distance matrix on a torch device, prepared for magnitude (float64, dense).

    The torch counterpart of :class:`~diversity_core.magnitude.MagnitudeSpace`, one more
    prepared space (``_space._Operations``: ``weights``, ``magnitude_function``,
    ``convergence_scale``, ``mag_area`` and the package's functions —
    :func:`~diversity_core.magnitude.convergence_scale`, ``mag_area``, ``mag_diff`` — accept it
    as they accept a ``MagnitudeSpace``); it evaluates ``magnitude(t)``,
    ``magnitude_and_derivative(t)`` and ``unique_weights(t)`` on its device. The results agree
    with the NumPy engine's direct solver to round-off.

    Parameters
    ----------
    D : array or tensor of shape (n, n)
        Distance matrix (a tensor is used where it lies and converted to float64 there).
    device : Device or str
        Where it lies (:class:`~diversity_core.device.Device`, or a name of its table:
        ``cuda``, ``cuda:1``, ``cpu``; its torch device is used).
    memory_limit : int, optional
        Bytes the space may use on the device; default: the device's free memory. The need
        (:func:`torch_magnitude_memory`) is checked before anything is allocated there.

    Attributes
    ----------
    D : tensor of shape (n_unique, n_unique), float64, on ``device``
    fallbacks : list of dict
        Scales solved on the CPU because ``Z_t`` was not numerically positive definite:
        ``t``, ``solver`` (``ldl`` or ``pinv``), ``relative_residual``, ``mag_error_bound``.
    """

    def __init__(self, D, *, device: Device | str = "cpu", memory_limit: int | None = None,
                 name: str = "D", _memory_checked: bool = False):
        torch = _torch()
        where = _torch_device(device)
        self.device = where.to_torch()
        if isinstance(D, torch.Tensor):
            n = D.shape[0] if D.ndim == 2 else 0
            if not _memory_checked:
                need = torch_magnitude_memory(max(n, 1))
                if D.device == self.device and D.dtype == torch.float64 and memory_limit is None:
                    need -= 8 * D.numel()  # already there: free memory excludes it
                check_torch_memory(need, where, memory_limit=memory_limit,
                                   what=f"magnitude of {n:,} points")
            D = _check_distance_tensor(D.to(self.device, torch.float64), name)
        else:
            D = check_distance_matrix(D, name=name)
            n = D.shape[0]
            check_torch_memory(torch_magnitude_memory(n), where,
                               memory_limit=memory_limit, what=f"magnitude of {n:,} points")
            D = torch.as_tensor(D, device=self.device)
        self.n_points = int(D.shape[0])
        self._merge_duplicates(D)
        self._ones = torch.ones((self.n_unique, 1), dtype=torch.float64, device=self.device)
        self._Z = None  # the similarity buffer, factorised in place
        self._info = torch.zeros((), dtype=torch.int32, device=self.device)
        self._D_host = None  # for the CPU fallback, made on first need
        self._cache: dict[float, float] = {0.0: 1.0}
        self._slopes: dict[float, float] = {}  # scale -> dMag/dt (read by the Hermite rules)
        self._curvatures: dict[float, float] = {}  # scale -> d²Mag/dt² (hermite_d2)
        self.fallbacks: list[dict] = []
        self._factorisations = {"convergence_scale": 0, "mag_area": 0, "other": 0}

    @classmethod
    def from_points(cls, X, metric: str = "euclidean", *, device: Device | str = "cpu",
                    memory_limit: int | None = None) -> TorchMagnitudeSpace:
        """The space of points ``X`` (shape (n, d)), its distances formed on the device
        (``euclidean``, ``cityblock`` or ``cosine``: those of
        :func:`diversity_core.pairwise_distances`, to round-off; Euclidean ones from 2,048
        points on from a matrix product, within 5e-12 relative: see
        :func:`_euclidean_by_products`)."""
        torch = _torch()
        from .._validation import check_embeddings

        X = check_embeddings(np.asarray(X) if not isinstance(X, torch.Tensor) else
                             X.detach().cpu().numpy())
        n, d = X.shape
        device = _torch_device(device)
        check_torch_memory(torch_magnitude_memory(n, d), device,
                           memory_limit=memory_limit,
                           what=f"magnitude of {n:,} points in {d} dimensions")
        Xt = torch.as_tensor(np.asarray(X, dtype=np.float64), device=device.to_torch())
        D = _pairwise_distances(Xt, metric)
        del Xt
        # Checked above for the whole computation (D is now part of what the device holds).
        return cls(D, device=device, name="X", _memory_checked=True)

    def _merge_duplicates(self, D) -> None:
        torch = _torch()
        tol = DUPLICATE_RTOL * float(D.max())
        near = torch.nonzero(D <= tol)
        groups = (_duplicate_groups(near.cpu().numpy(), D.shape[0])
                  if near.shape[0] > D.shape[0] else None)
        del near
        if groups is None:
            self.group_of_point = self.multiplicity = None
            self.D = D.contiguous()
        else:
            keep, self.group_of_point, self.multiplicity = groups
            index = torch.as_tensor(keep, device=D.device)
            self.D = D.index_select(0, index).index_select(1, index).contiguous()
        self.n_unique = int(self.D.shape[0])

    # -- one scale ------------------------------------------------------------------------------
    def _factor(self, t: float):
        """Cholesky factor of Z_t (lower), in place of the similarity buffer, or None where
        Z_t is not numerically positive definite."""
        torch = _torch()
        self._factorisations[self._phase] += 1
        if self._Z is None:
            self._Z = torch.empty_like(self.D)
        Z = self._Z
        torch.mul(self.D, -t, out=Z)
        # The NumPy engine's floor (EXPONENT_FLOOR): the same matrix, no subnormal products.
        Z.clamp_(min=-EXPONENT_FLOOR).exp_()
        # Z is bit-symmetric, so its Fortran-order view is the same matrix in the layout the
        # solvers work in: factorised there in place, without the transposed copies in and out
        # that a C-order output costs (1.7 of the 13.1 ms a factorisation of 10,000 points took
        # on an H200); the factor's bits are the same.
        L = Z.mT
        torch.linalg.cholesky_ex(L, out=(L, self._info))
        return L if int(self._info) == 0 else None

    def _solve(self, t: float, *, weights: bool):
        """(Mag(t), w or None); the fallback (with its warning and record) where Cholesky
        fails."""
        torch = _torch()
        L = self._factor(t)
        if L is None:
            w = self._fallback(t)
            return float(w.sum()), torch.as_tensor(w[:, None], device=self.device)
        v = torch.linalg.solve_triangular(L, self._ones, upper=False)
        mag = float((v * v).sum())
        if not weights:
            return mag, None
        return mag, torch.linalg.solve_triangular(L.mT, v, upper=True)

    def _fallback(self, t: float) -> np.ndarray:
        if self._D_host is None:
            self._D_host = self.D.cpu().numpy()
        w, record = fallback_solve(self._D_host, t, stacklevel=5)
        self.fallbacks.append(record)
        return w

    def _weighted_distance_form(self, t: float, w) -> float:
        """wᵀ (D ∘ exp(-tD)) w, exp(-tD) formed afresh in row blocks (the buffer holds the
        factor)."""
        torch = _torch()
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        for start, Db, E in _similarity_blocks(self.D, t):
            total += (w[start:start + Db.shape[0], 0] @ (E.mul_(Db) @ w[:, 0]))
        return float(total)

    def pair_sums(self, t: float) -> tuple[float, float]:
        """``Σ_{i≠j} exp(-t D_ij)`` and ``Σ_{i≠j} D_ij exp(-t D_ij)`` on the device (see
        ``_search.first_order_scale``)."""
        return _pair_sums(self.D, float(t))

    def magnitude(self, t: float) -> float:
        """Mag(t) at one scale t >= 0."""
        t = float(t)
        if t not in self._cache:
            self._cache[t] = self._solve(t, weights=False)[0]
        return self._cache[t]

    def magnitude_and_derivative(self, t: float) -> tuple[float, float]:
        """Mag(t) and dMag/dt = wᵀ (D ∘ Z_t) w at t > 0."""
        t = float(t)
        mag, w = self._solve(t, weights=True)
        self._cache[t] = mag
        self._slopes[t] = self._weighted_distance_form(t, w)
        self._curvatures.pop(t, None)  # it came with another weighting's slope
        return mag, self._slopes[t]

    def magnitude_and_derivatives(self, t: float) -> tuple[float, float, float]:
        """Mag(t), dMag/dt and d²Mag/dt² = 2 vᵀZ_t⁻¹v − wᵀ(D² ∘ Z_t)w with v = (D ∘ Z_t)w at
        t > 0: one factorisation, three triangular solves (as
        ``_solver._DenseSolver.magnitude_and_derivatives``)."""
        torch = _torch()
        t = float(t)
        L = self._factor(t)
        if L is None:
            w = self._fallback(t)
            mag = float(w.sum())
            dmag, ddmag = fallback_derivatives(self._D_host, t, w)
        else:
            half = torch.linalg.solve_triangular(L, self._ones, upper=False)
            mag = float((half * half).sum())
            w = torch.linalg.solve_triangular(L.mT, half, upper=True)[:, 0]
            v = torch.zeros_like(w)
            form = torch.zeros((), dtype=torch.float64, device=self.device)
            for start, Db, E in _similarity_blocks(self.D, t):
                E.mul_(Db)
                v[start:start + Db.shape[0]] = E @ w
                form += w[start:start + Db.shape[0]] @ (E.mul_(Db) @ w)
            inverse = torch.linalg.solve_triangular(L, v[:, None], upper=False)
            dmag = float(w @ v)
            ddmag = 2.0 * float((inverse * inverse).sum()) - float(form)
        self._cache[t] = mag
        self._slopes[t] = dmag
        self._curvatures[t] = ddmag
        return mag, dmag, ddmag

    def _known_derivatives(self, t: float, order: int) -> tuple:
        """Mag(t) and its first ``order`` − 1 derivatives (order 2 or 3), solved only where not
        computed at t already."""
        if order == 2:
            return self._known_slope(t)
        t = float(t)
        if t in self._curvatures:
            return self._cache[t], self._slopes[t], self._curvatures[t]
        return self.magnitude_and_derivatives(t)

    def _known_slope(self, t: float) -> tuple[float, float]:
        """Mag(t) and dMag/dt, solved only if not computed at t already (MagArea's t_cut
        where the convergence-scale search ended on a solve there)."""
        t = float(t)
        if t in self._slopes:
            return self._cache[t], self._slopes[t]
        return self.magnitude_and_derivative(t)

    def unique_weights(self, t: float) -> np.ndarray:
        """Weighting of the de-duplicated space (shape (n_unique,)), t > 0, on the host."""
        return self._solve(float(t), weights=True)[1][:, 0].cpu().numpy()

    # -- functions of the space ------------------------------------------------------------------
    def initial_scale(self) -> float:
        """``_search._initial_scale`` of the space, on the device: 5 / the median distance to
        the nearest neighbour (the minima are exact; the median is NumPy's, on the host)."""
        torch = _torch()
        n = self.n_unique
        nn = torch.empty(n, dtype=torch.float64, device=self.device)
        rows = max(1, _BLOCK_ENTRIES // n)
        for start in range(0, n, rows):
            block = self.D[start:start + rows].clone()
            k = block.shape[0]
            block[torch.arange(k), torch.arange(start, start + k)] = math.inf
            nn[start:start + k] = block.min(dim=1).values
        return 5.0 / float(np.median(nn.cpu().numpy()))

    @property
    def evaluations(self) -> dict:
        """Factorisations so far, by phase (``convergence_scale``, ``mag_area``, ``other``), as
        the large-n path counts its scales: one per scale solved (the search's derivative needs
        no second one; ``magnitude`` remembers its scales, ``weights`` solves again)."""
        return dict(self._factorisations)

    def _integrate(self, t_cut: float, *, method: str, rtol: float, n_ts: int) -> float:
        """MagArea on [0, t_cut] by the engine's quadrature (see :func:`mag_area`)."""
        diameter = float(self.D.max())
        with self._phase_of("mag_area"):
            # Every scale is a float64 factorisation here.
            return _integrate(self.magnitude, t_cut,
                              method=path_rule(method, factored=True, diameter=diameter),
                              rtol=rtol, n_ts=n_ts, slope=self._known_slope,
                              derivatives=self._known_derivatives, diameter=diameter)

    def release(self) -> None:
        """Free the similarity buffer (the distance matrix stays)."""
        self._Z = None


def _similarity_blocks(D, t: float):
    """``(start, Db, exp(-t Db))`` for each row block ``Db`` of a distance tensor, the exponent
    floored as the NumPy engine's (``EXPONENT_FLOOR``); each exp block a fresh tensor, the
    caller's to overwrite (only one block is held at a time)."""
    torch = _torch()
    rows = max(1, _BLOCK_ENTRIES // D.shape[0])
    for start in range(0, D.shape[0], rows):
        Db = D[start:start + rows]
        yield start, Db, torch.mul(Db, -t).clamp_(min=-EXPONENT_FLOOR).exp_()


def _pair_sums(D, t: float) -> tuple[float, float]:
    """``Σ_{i≠j} exp(-t D_ij)`` and ``Σ_{i≠j} D_ij exp(-t D_ij)`` of a distance tensor, in row
    blocks on its device (the diagonal's exp(0) = 1 taken off the first)."""
    torch = _torch()
    sums = torch.zeros(2, dtype=torch.float64, device=D.device)
    for _, Db, E in _similarity_blocks(D, t):
        sums[0] += E.sum()
        sums[1] += E.mul_(Db).sum()
    similarity, weighted = sums.tolist()
    return similarity - D.shape[0], weighted


def _pairwise_distances(X, metric: str):
    """(n, n) float64 distances of the rows of a tensor, on its device."""
    torch = _torch()
    if metric == "euclidean" and X.shape[0] >= _PRODUCT_DISTANCES_FROM:
        return _euclidean_by_products(X)
    if metric in ("euclidean", "cityblock"):
        n = X.shape[0]
        D = torch.empty((n, n), dtype=X.dtype, device=X.device)
        return _distances_by_rows(X, D, p=2.0 if metric == "euclidean" else 1.0)
    if metric != "cosine":
        raise ValueError(f"metric must be one of ('euclidean', 'cityblock', 'cosine'); got "
                         f"{metric!r}.")
    norms = X.norm(dim=1, keepdim=True)
    if bool((norms == 0).any()):
        raise ValueError("cosine distance is undefined for a zero vector.")
    U = X / norms
    D = (1.0 - U @ U.T).clamp_(min=0.0)
    # A product of U with itself need not be bit-symmetric: its upper triangle is mirrored.
    _mirror_upper(D)
    D.fill_diagonal_(0.0)
    return D


def _distances_by_rows(X, D, *, p: float):
    """``D`` filled with the Minkowski distances (p = 2 or 1) of the rows of ``X`` from their
    differences (cdist), in row blocks: no cancellation for close points (the NumPy side's
    pairwise_distances is exact to round-off too). Blocks, because CUDA's cdist of 50,000
    points with themselves failed to launch on an H200 ("CUDA error: invalid argument"; 10,000
    ran), a block of 2²⁴ pairs runs. Each entry is summed over the same coordinates whatever
    the block, so D is bit-symmetric (tested)."""
    torch = _torch()
    n = X.shape[0]
    rows = max(1, _BLOCK_ENTRIES // max(n, 1))
    for start in range(0, n, rows):
        D[start:start + rows] = torch.cdist(X[start:start + rows], X, p=p,
                                            compute_mode="donot_use_mm_for_euclid_dist")
    D.fill_diagonal_(0.0)
    return D


def _euclidean_by_products(X):
    """(n, n) float64 Euclidean distances of the rows of ``X`` from one matrix product, every
    pair whose product could have cancelled formed again from its differences.

    CUDA's cdist by differences took 136 ms for 10,000 points × 64 on an H200 (its own kernel,
    a fifth of a whole t_conv + MagArea), a product of the centred points a millisecond. By
    the product, ``|x - y|² = |x|² + |y|² - 2 x·y`` has an absolute error of at most about
    ``(d + 2) ε (|x|² + |y|²)`` (the centred points' norms; ε the unit round-off): where that
    could exceed ``_PRODUCT_RTOL`` of the result, the pair is formed again from its
    differences, so every distance is within ``_PRODUCT_RTOL / 2`` of the exact one (the
    differences' own sums: within a few units in the last place, as cdist's). Symmetric bit
    for bit (the upper triangle mirrored), zero on the diagonal. Past
    ``_PRODUCT_RECOMPUTE_SHARE`` of the pairs to form again, all of them are (cdist by rows).
    """
    torch = _torch()
    n, d = X.shape
    Xc = X - X.mean(dim=0)
    norms = (Xc * Xc).sum(dim=1)
    D = Xc @ Xc.T
    del Xc
    factor = (d + 2) * torch.finfo(X.dtype).eps / _PRODUCT_RTOL
    rows = max(1, _BLOCK_ENTRIES // n)
    suspects = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = D[start:stop, start:]  # this block's upper part: products still
        scale = norms[start:stop, None] + norms[None, start:]
        block.mul_(-2.0).add_(scale)
        pairs = torch.nonzero(block < factor * scale)
        pairs = pairs[pairs[:, 0] < pairs[:, 1]]  # the strict upper triangle
        if pairs.shape[0]:
            suspects.append(pairs + torch.as_tensor([start, start], device=X.device))
        block.clamp_(min=0.0).sqrt_()
    pairs = torch.cat(suspects) if suspects else None
    if pairs is not None and pairs.shape[0] > _PRODUCT_RECOMPUTE_SHARE * n * n:
        return _distances_by_rows(X, D, p=2.0)
    if pairs is not None:
        per = max(1, _BLOCK_ENTRIES // max(d, 1))
        for start in range(0, pairs.shape[0], per):
            i, j = pairs[start:start + per].unbind(1)
            D[i, j] = (X[i] - X[j]).square_().sum(dim=1).sqrt_()
    _mirror_upper(D)
    D.fill_diagonal_(0.0)
    return D


def _mirror_upper(D) -> None:
    """The strict upper triangle of a square tensor copied onto its lower one, in row blocks
    (no n × n temporary)."""
    torch = _torch()
    n = D.shape[0]
    rows = max(1, _BLOCK_ENTRIES // n)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        D[start:stop, :start] = D[:start, start:stop].T
        block = D[start:stop, start:stop]
        block.copy_(torch.triu(block) + torch.triu(block, 1).T)
