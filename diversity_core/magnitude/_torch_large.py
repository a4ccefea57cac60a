"""The large-n path on a torch device, and the memory rule that chooses a device path.

:class:`TorchLargeMagnitudeSpace` is :class:`~diversity_core.magnitude.LargeMagnitudeSpace`
with its three kernels on a torch device: the float32 distances (the upper trapezoid of the
matrix, formed in row panels from float64 Gram products on the device and kept there), the
products with ``Z_t = exp(-tD)`` (formed panel by panel on the fly, float32 for the conjugate
gradients, float64 for the residuals, the derivative and the distance bound) and the float32
conjugate gradients themselves (``_cg.conjugate_gradients`` on device tensors). Everything else
is the CPU path's own code, unchanged: the duplicate merge, the float64 iterative refinement
and its stopping rule (error below ``solver_rtol · n``), the search, MagArea with its error
budget, the records and :attr:`evaluations`. The host holds the points and a few n-vectors.

:func:`device_path` is the memory rule of a torch device: a set goes on the device dense
(float64, :class:`~diversity_core.magnitude.TorchMagnitudeSpace`) whenever the device's memory
holds it (:func:`~diversity_core.magnitude.torch_magnitude_memory`), whatever its size; past
that on this path (:func:`torch_large_memory`: 2 bytes a pair); past that it is refused in one
line naming the memory needed and free. On the CPU (the NumPy engine) nothing of this applies.
"""

from __future__ import annotations

import math

import numpy as np

from .._memory import MemoryNeedError
from ..device import Device, free_memory, parse_device
from ._cg import conjugate_gradients
from ._common import EXPONENT_FLOOR, FLOAT32_EXPONENT_FLOOR
from ._large import (
    _INNER_RTOL,
    _MAX_INNER_ITERATIONS,
    DEFAULT_SOLVER_RTOL,
    LARGE_METRICS,
    LargeMagnitudeSpace,
)
from ._torch import _torch, _torch_device, torch_magnitude_memory

__all__ = ["TorchLargeMagnitudeSpace", "device_path", "torch_large_memory"]

# Rows per stored panel on the device: each product forms exp(-tD) of one panel at a time
# (1,024 × 50,000 float32: 200 MB, and its float64 forms in the float64 products).
_DEVICE_PANEL_ROWS = 1024
_OVERHEAD_BYTES = 64 * 2**20


def torch_large_memory(n_points: int, n_features: int = 0, *,
                       panel_rows: int | None = None) -> int:
    """Device memory, in bytes, of a :class:`TorchLargeMagnitudeSpace` of ``n_points`` points
    and a convergence scale and MagArea of it: the float32 upper trapezoid of the distances
    (2 bytes a pair), the points (float64) and their Gram panel, the float64 forms of one panel
    in the float64 products (distances, ``Z``, ``D ∘ Z``), CG vectors and 64 MiB."""
    n, d = int(n_points), int(n_features)
    rows = min(n, panel_rows or _DEVICE_PANEL_ROWS)
    panels = 4 * (n * (n + rows) // 2)
    points = 2 * 8 * n * d
    panel_work = (4 + 3 * 8) * rows * n  # Z32, then D64, Z64 and D∘Z of one panel
    vectors = 32 * 8 * n
    return panels + points + panel_work + vectors + _OVERHEAD_BYTES


def device_path(n_points: int, n_features: int, device, *, memory_limit: int | None = None,
                metric: str = "euclidean") -> str:
    """Where a set of ``n_points`` points goes on a torch ``device`` (a
    :class:`~diversity_core.device.Device`): ``"dense"`` when the device holds it in float64
    (:func:`~diversity_core.magnitude.torch_magnitude_memory` within its free memory, or
    ``memory_limit``), else ``"large"`` when the large-n path's float32 triangle fits
    (:func:`torch_large_memory`; Euclidean and cosine distances), else
    :class:`~diversity_core.MemoryNeedError` in one line naming the memory needed and free."""
    device = parse_device(device)
    n, d = int(n_points), int(n_features)
    limit = free_memory(device) if memory_limit is None else int(memory_limit)
    dense = torch_magnitude_memory(n, d)
    if dense <= limit:
        return "dense"
    large = torch_large_memory(n, d)
    if metric in LARGE_METRICS and large <= limit:
        return "large"
    have = "free" if memory_limit is None else "allowed (memory_limit)"
    need, how = ((large, f"large-n path; dense {dense / 2**30:.2f} GiB")
                 if metric in LARGE_METRICS else (dense, "dense"))
    raise MemoryNeedError(
        f"magnitude of {n:,} points in {d} dimensions needs about {need / 2**30:.2f} GiB on "
        f"{device.torch} ({how}); {limit / 2**30:.2f} GiB {have}.", need=need, limit=limit)


class TorchLargeMagnitudeSpace(LargeMagnitudeSpace):
    """Points prepared for magnitude on the large-n path, on a torch device (see the module
    docstring): the interface, accuracy and records of
    :class:`~diversity_core.magnitude.LargeMagnitudeSpace`.

    Parameters
    ----------
    X : array of shape (n_points, n_features)
    metric : {"euclidean", "cosine"}
    device : Device or str
        A :class:`~diversity_core.device.Device` (or a name of its table; its torch device).
    solver_rtol : float
        As :class:`~diversity_core.magnitude.LargeMagnitudeSpace`'s.
    memory_limit : int, optional
        Bytes the space may use on the device; default its free memory. The need
        (:func:`torch_large_memory`) is checked before anything is allocated there.
    """

    def __init__(self, X, metric: str = "euclidean", *, device: Device | str = "cpu",
                 solver_rtol: float = DEFAULT_SOLVER_RTOL, memory_limit: int | None = None,
                 name: str = "X"):
        _torch()
        self.device = _torch_device(device)
        self._where = self.device.to_torch()
        shape = np.shape(X)
        if len(shape) == 2 and metric in LARGE_METRICS:
            n, d = shape
            need = torch_large_memory(n, d, panel_rows=self._panel_rows())
            limit = free_memory(self.device) if memory_limit is None else int(memory_limit)
            if need > limit:
                have = "free" if memory_limit is None else "allowed (memory_limit)"
                raise MemoryNeedError(
                    f"magnitude of {n:,} points in {d} dimensions needs about "
                    f"{need / 2**30:.2f} GiB on {self.device.torch} (large-n path); "
                    f"{limit / 2**30:.2f} GiB {have}.", need=need, limit=limit)
        super().__init__(X, metric, solver_rtol=solver_rtol, threads=1, name=name)

    # -- distances ---------------------------------------------------------------------------
    def _panel_rows(self) -> int:
        return _DEVICE_PANEL_ROWS

    def _distance_panels(self, Y, sq, starts, near_tol: float) -> list:
        """``_large._distance_panel`` of every panel, on the device: each panel stays there
        (float32); its minima, largest entry and close pairs come back to the host."""
        torch = _torch()
        Yt = torch.as_tensor(np.ascontiguousarray(Y), device=self._where)
        sqt = torch.as_tensor(sq, device=self._where)
        roundoff = getattr(self, "_roundoff", 0.0)
        n = len(Y)
        results = []
        for p in starts:
            h = min(p + self._panel_rows(), n) - p
            G = Yt[p:p + h] @ Yt[p:].T
            if self.metric == "cosine":
                G = (1.0 - G).clamp_(0.0, 2.0)
                G[G < roundoff] = 0.0
            else:
                scale = sqt[p:p + h, None] + sqt[None, p:]
                G.mul_(-2.0).add_(scale)
                G[G <= 1e-12 * scale] = 0.0
                del scale
                G.sqrt_()
            block = G[:, :h]  # the diagonal block holds both triangles (symmetric)
            lower = torch.tril_indices(h, h, -1, device=self._where)
            block[lower[0], lower[1]] = block.T[lower[0], lower[1]]
            block.fill_diagonal_(0.0)
            panel = G.to(torch.float32)
            block.fill_diagonal_(math.inf)
            row_min = G.min(dim=1).values.cpu().numpy()
            col_min = G.min(dim=0).values.cpu().numpy()
            block.fill_diagonal_(0.0)
            pairs = torch.nonzero(G <= near_tol)
            pairs = pairs[pairs[:, 0] < pairs[:, 1]]
            values = G[pairs[:, 0], pairs[:, 1]].cpu().numpy()
            pairs = pairs.cpu().numpy()
            results.append((panel, row_min, col_min, float(G.max()),
                            [(int(i) + p, int(j) + p, float(v))
                             for (i, j), v in zip(pairs, values, strict=True)]))
            del G
        return results

    # -- products with Z_t -------------------------------------------------------------------
    def _product32(self, t: float, x):
        """exp(-tD) x in float32 on the device (``x`` a float32 device tensor)."""
        torch = _torch()
        y = torch.zeros_like(x)
        clamp = t * self.D_max > FLOAT32_EXPONENT_FLOOR
        rows = self._panel_rows()
        for k, panel in enumerate(self._panels):
            p = k * rows
            h = panel.shape[0]
            Z = torch.mul(panel, -t)
            if clamp:
                Z.clamp_(min=-FLOAT32_EXPONENT_FLOOR)
            Z.exp_()
            y[p:p + h] += Z @ x[p:]
            if panel.shape[1] > h:
                y[p + h:] += x[p:p + h] @ Z[:, h:]
        return y

    def _product64(self, t: float, x: np.ndarray, *, derivative: bool = False,
                   absolute: bool = False):
        """In float64 on the device: ``Z x``, and ``(D ∘ Z) x`` and ``(D ∘ Z) |x|`` if asked
        (NumPy vectors in and out)."""
        torch = _torch()
        xt = torch.as_tensor(x, device=self._where)
        columns = [v for v, wanted in ((xt, derivative), (xt.abs(), absolute)) if wanted]
        V = torch.stack(columns, dim=1) if columns else None
        Zx = torch.zeros_like(xt)
        WV = torch.zeros((len(x), len(columns)), dtype=torch.float64, device=self._where)
        clamp = t * self.D_max > EXPONENT_FLOOR
        rows = self._panel_rows()
        for k, panel in enumerate(self._panels):
            p = k * rows
            h = panel.shape[0]
            D = panel.to(torch.float64)
            Z = torch.mul(D, -t)
            if clamp:
                Z.clamp_(min=-EXPONENT_FLOOR)
            Z.exp_()
            Zx[p:p + h] += Z @ xt[p:]
            if panel.shape[1] > h:
                Zx[p + h:] += xt[p:p + h] @ Z[:, h:]
            if V is not None:
                W = D.mul_(Z)
                WV[p:p + h] += W @ V[p:]
                if panel.shape[1] > h:
                    WV[p + h:] += W[:, h:].T @ V[p:p + h]
            del D, Z
        out = [Zx.cpu().numpy()]
        WV = WV.cpu().numpy()
        return out + [WV[:, k] for k in range(len(columns))]

    def _correction(self, t: float, b: np.ndarray, energy_tol: float):
        """The float32 CG solve of a refinement step on the device (the CPU path's routine and
        stopping rule, ``_large._cg32``); ``d`` comes back as a float32 NumPy vector."""
        torch = _torch()
        bt = torch.as_tensor(b.astype(np.float32), device=self._where)
        result = conjugate_gradients(lambda v, _: self._product32(t, v), torch.zeros_like(bt),
                                     bt, stop=_INNER_RTOL * _INNER_RTOL * float(bt @ bt),
                                     budget=_MAX_INNER_ITERATIONS, energy_tol=energy_tol)
        estimate = result.estimate if result.stop == "energy" else math.inf
        return result.x.cpu().numpy(), result.iterations, estimate

    def release(self) -> None:
        """Free the device's panels (the space cannot be evaluated afterwards)."""
        self._panels = []
