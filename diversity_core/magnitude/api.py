"""The public functions of the magnitude engine (re-exported by :mod:`diversity_core.magnitude`
and :mod:`diversity_core`). Each takes a distance matrix or a prepared
:class:`~diversity_core.magnitude.MagnitudeSpace`."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._memory import (  # what magnitude_space and compare measure against
    MemoryNeedError,
    available_memory,
)
from .._validation import check_embeddings, check_scales
from ..device import Device, parse_device
from . import _batch, _batch_areas
from ._common import (  # the package's defaults, written once there
    DEFAULT_INTEGRATION,
    DEFAULT_INTEGRATION_RTOL,
    DEFAULT_MAX_ITER,
    DEFAULT_N_TS,
    DEFAULT_T_CONV_RTOL,
    DEFAULT_TARGET,
)
from ._large import LARGE_METRICS, LargeMagnitudeSpace, large_memory
from ._similarity import pair_memory
from ._solver import FLOAT32_CG_FROM
from ._space import MagnitudeSpace, as_space
from ._torch import TorchMagnitudeSpace, torch_magnitude_memory
from ._torch_large import TorchLargeMagnitudeSpace, device_path, torch_large_memory

__all__ = [
    "magnitude_function",
    "magnitude_weights",
    "magnitude_derivative",
    "convergence_scale",
    "mag_area",
    "mag_diff",
    "reference_free_t_cut",
    "reference_based_t_cut",
    "convergence_scales",
    "magnitude_functions",
    "mag_areas",
    "magnitude_memory",
    "magnitude_plan",
    "MagnitudePlan",
    "magnitude_space",
    "available_memory",
]

DIFF_NORMALISATIONS = (None, "t_cut", "reference_area")


def magnitude_function(D, ts) -> np.ndarray:
    """Magnitude of ``D`` at each scale in ``ts``.

    Parameters
    ----------
    D : array of shape (n, n)
        Distance matrix (see :func:`diversity_core.pairwise_distances`).
    ts : float or array of shape (n_scales,)
        Non-negative scales (units: 1 / distance).

    Returns
    -------
    mag : array of shape (n_scales,)
        ``Mag(t)`` in effective number of points; ``Mag(0) = 1``.
    """
    return as_space(D).magnitude_function(ts)


def magnitude_weights(D, t: float) -> np.ndarray:
    """Weighting ``w`` with ``Z_t w = 1`` at scale ``t > 0``, in the order of the input points.

    Returns
    -------
    w : array of shape (n,)
        ``w.sum()`` is the magnitude. Copies of a duplicated point share its weight equally.
    """
    t = float(check_scales(t, name="t")[0])
    if t == 0.0:
        raise ValueError("the weighting is not defined at t = 0 (Z_0 is the all-ones matrix).")
    return as_space(D).weights(t)


def magnitude_derivative(D, ts) -> np.ndarray:
    """``dMag/dt`` at each (positive) scale, ``wᵀ (D ∘ Z_t) w``.

    Returns
    -------
    dmag : array of shape (n_scales,), in points per unit of scale.
    """
    ts = check_scales(ts)
    if np.any(ts == 0):
        raise ValueError("the derivative is evaluated at t > 0 only.")
    space = as_space(D)
    return np.array([space.magnitude_and_derivative(float(t))[1] for t in ts])


def convergence_scale(
    D, target: float = DEFAULT_TARGET, *, rtol: float = DEFAULT_T_CONV_RTOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> float:
    """The scale ``t_conv`` at which ``Mag(t_conv) = target * n`` (paper, Definition 3.5).

    ``n`` counts *distinct* points: by the twin property magnitude is that of the de-duplicated
    space, which tends to the number of distinct points, so a target on all input points could be
    out of reach (a set of 10 generated texts with 3 identical ones, say). magnipy's ``Magnipy``
    de-duplicates its input with ``np.unique`` first and does the same.

    Parameters
    ----------
    D : array of shape (n, n)
    target : float in (0, 1)
        Share of the cardinality to reach (paper: 0.95).
    rtol : float
        Relative tolerance on ``t_conv``; the search also stops once ``Mag`` is within 1e-10
        (relative) of the target, the accuracy to which the solvers evaluate it.

    Returns
    -------
    t_conv : float (units: 1 / distance)
    """
    if not 0.0 < target < 1.0:  # before D is prepared
        raise ValueError(f"target must lie in (0, 1); got {target}.")
    # The space's own method (the large-n path counts its evaluations by phase there).
    return as_space(D).convergence_scale(target, rtol=rtol, max_iter=max_iter)


def mag_area(
    D,
    t_cut: float,
    *,
    method: str = DEFAULT_INTEGRATION,
    rtol: float = DEFAULT_INTEGRATION_RTOL,
    n_ts: int = DEFAULT_N_TS,
) -> float:
    """Area under the magnitude function, ``MagArea = ∫_0^t_cut Mag(t) dt`` (Definition 3.3).

    Parameters
    ----------
    D : array of shape (n, n), or a prepared space (:class:`MagnitudeSpace`,
        :class:`~diversity_core.magnitude.LargeMagnitudeSpace`)
    t_cut : float
        Upper end of the integration interval (see :func:`reference_free_t_cut`).
    method : str
        One of ``INTEGRATION_METHODS``. ``chebyshev``: Clenshaw–Curtis on nested Chebyshev
        grids (13, 25, 49, ... scales, end points included), refined until the error
        estimated from the trailing Chebyshev coefficients is below ``rtol`` (relative;
        default 1e-6: the estimate is conservative, true errors were 3 to 100 times smaller);
        ``cc25`` is the same rule by the name the quadrature study gives it. ``hermite``: values and
        derivatives ``dMag/dt`` (one solve gives both; the derivative costs an O(n²) product)
        on the 13 scales of the first Chebyshev grid, integrated exactly by their interpolant
        of degree 24; where its
        estimated error exceeds ``rtol``, ``chebyshev`` on the same scales and the finer ones.
        It solves 11 scales instead of 23 where the 13 suffice (the convergence-scale search
        has solved t_cut), and as many as ``chebyshev`` elsewhere
        (``benchmarks/results/quadrature_rule.csv``). ``hermite_log``: values and derivatives
        at 15 scales stretched towards 0 (t = t_cut (e^{αs} − 1) / (e^α − 1) at the Chebyshev
        points of s, α from t_cut times the largest distance), the exact integral of their
        interpolant of degree 28 in s; after the convergence-scale search 13 scales to solve;
        where its estimated error exceeds ``rtol``, 22 then 29 points of s (7 and 7 solves
        more), then Clenshaw–Curtis in s on 57 points reusing them (docs/performance.md).
        ``hermite_d2``: values, first and second derivatives at 11 of the
        same stretched scales (at t_cut the value and first derivative only), the exact
        integral of their interpolant of degree 29; 9 solves after the search; where its
        estimate exceeds ``rtol``, 13 then 21 points (2 and 8 solves more), then
        Clenshaw–Curtis in s.
        d²Mag/dt² costs two triangular solves where a Cholesky factor answers (fewer than
        500 distinct points, the batch's members, the torch path) but a second
        conjugate-gradient solve from 500 points on, where it is slower than ``hermite_log``
        (``benchmarks/results/hermite_d2_summary.csv``); the large-n path does not compute it
        and refuses the rule, as does any path for largest distances beyond 1e150 or below
        1e-150 (d²Mag/dt² grows as their square). ``auto``: ``hermite_d2`` where a float64
        Cholesky factor answers every scale and the largest distance is in its range,
        ``hermite_log`` elsewhere (conjugate gradients, mixed precision, the large-n path):
        the default, as on each path it is the faster of the two, every true error within
        ``rtol`` (``benchmarks/results/hermite_d2_summary.csv``).
        ``quad``: scipy's adaptive Gauss–Kronrod to ``rtol`` (about twice the evaluations).
        ``trapezoid``: the paper's rule on ``n_ts`` evenly spaced scales in [0, t_cut], 0
        included (magnipy's default is 30; the paper era used 10); its error is not controlled.

    Returns
    -------
    area : float (units: effective points × scale)
    """
    # Each kind of space integrates itself: scales solved to what the integral needs, and the
    # large-n path's error budget (area_error).
    return as_space(D)._integrate(t_cut, method=method, rtol=rtol, n_ts=n_ts)


def mag_diff(
    D_x,
    D_ref,
    t_cut: float,
    *,
    method: str = DEFAULT_INTEGRATION,
    rtol: float = DEFAULT_INTEGRATION_RTOL,
    n_ts: int = DEFAULT_N_TS,
    normalise: str | None = None,
    absolute: bool = False,
    reference_area: float | None = None,
) -> float:
    """Signed difference of magnitude functions, ``∫_0^t_cut (Mag_X(t) - Mag_ref(t)) dt``.

    The convention of this package is the plain, signed integral (Definition 3.4): negative when
    ``X`` is less diverse than the reference. The conventions found elsewhere are options:

    * ``normalise="t_cut"``: divided by ``t_cut``, the mean difference in effective points (the
      magnipy ``Magnipy`` class);
    * ``normalise="reference_area"``: divided by the reference's MagArea, a relative change (the
      paper's image experiment);
    * ``absolute=True``: the absolute value (magnipy's ``MagDiff`` default).

    Parameters
    ----------
    D_x, D_ref : arrays of shape (n, n) and (m, m)
        Distance matrices of the compared and the reference space; n and m may differ.
    t_cut : float
        Usually the reference's convergence scale (:func:`reference_based_t_cut`).
    reference_area : float, optional
        The reference's MagArea on [0, t_cut] with the same method, if already known (it is
        reused when one reference is compared with many spaces).

    Returns
    -------
    diff : float
    """
    if normalise not in DIFF_NORMALISATIONS:
        raise ValueError(f"normalise must be one of {DIFF_NORMALISATIONS}; got {normalise!r}.")
    area_x = mag_area(D_x, t_cut, method=method, rtol=rtol, n_ts=n_ts)
    if reference_area is None:
        reference_area = mag_area(D_ref, t_cut, method=method, rtol=rtol, n_ts=n_ts)
    diff = area_x - reference_area
    if normalise == "t_cut":
        diff /= t_cut
    elif normalise == "reference_area":
        diff /= reference_area
    return abs(diff) if absolute else diff


def reference_free_t_cut(distance_matrices=(), target: float = DEFAULT_TARGET, *,
                         convergence_scales=None, rtol: float = DEFAULT_T_CONV_RTOL) -> float:
    """Common integration limit for comparing spaces without a reference: the median of their
    convergence scales (paper §3.4).

    Parameters
    ----------
    distance_matrices : iterable of arrays of shape (n_i, n_i) (or :class:`MagnitudeSpace`)
    target, rtol : see :func:`convergence_scale`
    convergence_scales : array of shape (m,), optional
        Convergence scales computed already (by parallel jobs, say); they enter the median
        together with those of ``distance_matrices``.

    Returns
    -------
    t_cut : float
    """
    scales = [convergence_scale(D, target, rtol=rtol) for D in distance_matrices]
    if convergence_scales is not None:
        known = np.asarray(convergence_scales, dtype=np.float64).ravel()
        if not np.all(np.isfinite(known)) or np.any(known <= 0):
            raise ValueError("convergence_scales must be finite and positive.")
        scales.extend(known.tolist())
    if not scales:
        raise ValueError("reference_free_t_cut needs at least one space or convergence scale.")
    return float(np.median(scales))


def reference_based_t_cut(D_ref, target: float = DEFAULT_TARGET, *,
                          rtol: float = DEFAULT_T_CONV_RTOL) -> float:
    """Integration limit for comparisons with a reference: the reference's convergence scale."""
    return convergence_scale(D_ref, target, rtol=rtol)


# --------------------------------------------------------------------------------------------
# Batches of spaces
# --------------------------------------------------------------------------------------------


def convergence_scales(spaces, target: float = DEFAULT_TARGET, *,
                       rtol: float = DEFAULT_T_CONV_RTOL, errors: str = "raise") -> np.ndarray:
    """:func:`convergence_scale` of every space of a batch, computed together.

    Spaces of fewer than 500 distinct points are evaluated as stacks (see
    :mod:`diversity_core.magnitude._batch`); the results agree with :func:`convergence_scale`
    of each space to round-off. The batch functions share their preparation of the matrices
    (checks, duplicates): a call on the same arrays as the call before it, unchanged, reuses it
    (see :func:`clear_cache`).

    Parameters
    ----------
    spaces : sequence of m arrays of shape (n_i, n_i) or :class:`MagnitudeSpace`
        Distance matrices (sizes may differ), or an array of shape (m, n, n). Pass
        :class:`MagnitudeSpace` objects to keep what each evaluates (its cache, and the
        ``fallbacks`` records of scales where its similarity matrix was not positive definite).
    target, rtol : see :func:`convergence_scale`
    errors : {"raise", "nan"}
        What a member without a convergence scale does (invalid input, a single distinct
        point, a search that does not converge): ``raise`` (default) raises
        :class:`MagnitudeBatchError` after every other member is computed; its ``values`` hold
        all results (NaN for the failed members) and its ``failures`` say, per member index,
        why. ``nan``: the failed members are NaN, and one :class:`MagnitudeWarning` lists them.

    Returns
    -------
    t_conv : array of shape (m,) (units: 1 / distance)
    """
    return _batch.convergence_scales(spaces, target, rtol=rtol, errors=errors)


def magnitude_functions(spaces, ts, *, errors: str = "raise") -> np.ndarray:
    """:func:`magnitude_function` of every space of a batch on one set of scales.

    Parameters
    ----------
    spaces : sequence of m distance matrices or :class:`MagnitudeSpace` (see
        :func:`convergence_scales`)
    ts : float or array of shape (n_scales,)
    errors : {"raise", "nan"} (see :func:`convergence_scales`; only invalid input fails here)

    Returns
    -------
    mag : array of shape (m, n_scales)
    """
    return _batch.magnitude_functions(spaces, ts, errors=errors)


def mag_areas(spaces, t_cut, *, method: str = DEFAULT_INTEGRATION,
              rtol: float = DEFAULT_INTEGRATION_RTOL, n_ts: int = DEFAULT_N_TS,
              errors: str = "raise") -> np.ndarray:
    """:func:`mag_area` of every space of a batch.

    Parameters
    ----------
    spaces : sequence of m distance matrices or :class:`MagnitudeSpace` (see
        :func:`convergence_scales`)
    t_cut : float or array of shape (m,)
        One integration limit for all (the reference-free protocol: the median convergence
        scale, see :func:`reference_free_t_cut`) or one per space. Spaces sharing a limit share
        the scales of its Clenshaw–Curtis grid; the Hermite rules in the stretched variable
        (``hermite_log``, ``hermite_d2``) advance every space together, stage by stage, whatever
        their limits.
    method, rtol, n_ts : see :func:`mag_area`
    errors : {"raise", "nan"} (see :func:`convergence_scales`; only invalid input fails here:
        a space of one distinct point has Mag = 1 and MagArea = t_cut)

    Returns
    -------
    area : array of shape (m,)
    """
    return _batch_areas.mag_areas(spaces, t_cut, method=method, rtol=rtol, n_ts=n_ts, errors=errors)


# --------------------------------------------------------------------------------------------
# Spaces from points, and what they cost
# --------------------------------------------------------------------------------------------

PATHS = ("auto", "dense", "large")
# Up to this many points "auto" takes the exact dense path (float64 distance and similarity
# matrices, 21 bytes per pair: 2.1 GB at 10,000 points), beyond it the large-n path (float32
# distances, 2 bytes per pair, and products computed on the fly; see _large).
_DENSE_MAX_POINTS = 10_000


def magnitude_memory(n_points: int, n_features: int, *, path: str = "auto") -> int:
    """Peak memory of :func:`magnitude_space` and a convergence scale and MagArea of its space,
    in bytes, estimated before any work is done.

    Parameters
    ----------
    n_points, n_features : int
        Shape of the points (duplicates included: they are merged only once read).
    path : {"auto", "dense", "large"}
        ``dense``: float64 distance matrix, similarity buffer and, from 6,000 points on, its
        float32 copy (about 21 bytes per pair of points), and from 65 to 5,792 points two
        more similarity buffers for MagArea's scales in pairs. ``large``: the upper triangle of the
        distances in float32 (2 bytes per pair) plus per-thread blocks (see
        :class:`~diversity_core.magnitude.LargeMagnitudeSpace`). ``auto``: ``dense`` up to
        10,000 points, else ``large``.

    Returns
    -------
    bytes : int
    """
    n, d = int(n_points), int(n_features)
    if n < 1 or d < 1:
        raise ValueError(f"need at least one point and one feature; got {n} x {d}.")
    path = space_path(n, path)
    if path == "large":
        return large_memory(n, d)
    per_pair = 8 + 8 + 1 + (4 if n >= FLOAT32_CG_FROM else 0)  # D, Z, duplicate mask, Z32
    return per_pair * n * n + pair_memory(n) + 2 * 8 * n * d + 64 * 8 * n + 300 * 2**20


@dataclasses.dataclass(frozen=True)
class MagnitudePlan:
    """How the engine measures one set of points, and what that costs: the answer of
    :func:`magnitude_plan`, which ``compare`` and ``score`` ask for every set.

    Attributes
    ----------
    n_points, n_features : int
    metric : str
    device : Device
    path : {"dense", "large"}
        The engine's path on the host: ``large`` for a set beyond the dense path's size (10,000
        points) whose metric the large-n path knows (Euclidean, cosine), prepared from its
        points (:func:`magnitude_space`); else ``dense``, from its distance matrix.
    held_bytes : int
        Host bytes a comparison holds for the set until its end: on the dense path its float64
        distance matrix and the batch's copy (16 bytes a pair), else 0.
    peak_bytes : int
        Host bytes of the set's own convergence scale and MagArea on top of what is held: on
        the dense path :func:`magnitude_memory`; on the large path :func:`magnitude_memory`
        and the baselines' copy of the points (16 bytes a coordinate), or on a torch device
        (where such a set is prepared) the points only.
    """

    n_points: int
    n_features: int
    metric: str
    device: Device
    path: str
    held_bytes: int
    peak_bytes: int

    def device_path(self, memory_limit: int | None = None) -> str | None:
        """On a torch device, where the set is prepared there from its points: ``"dense"`` or
        ``"large"`` (:func:`device_path` against ``memory_limit``, default the device's free
        memory; refused there in one line if neither fits) for a set on the large path or one
        the device does not hold dense; else None (the batch holds it). None on the NumPy
        engine."""
        if self.device.engine != "torch":
            return None
        where = device_path(self.n_points, self.n_features, self.device,
                            memory_limit=memory_limit, metric=self.metric)
        return where if where == "large" or self.path == "large" else None

    def device_bytes(self, where: str) -> int:
        """Device bytes of the set prepared there on ``where`` (``dense``, ``large``)."""
        return (torch_magnitude_memory(self.n_points, self.n_features) if where == "dense"
                else torch_large_memory(self.n_points, self.n_features))


def magnitude_plan(n_points: int, n_features: int, *, metric: str = "euclidean",
                   device: Device | str = "cpu") -> MagnitudePlan:
    """Which path the engine takes for a set of ``n_points`` × ``n_features`` points under
    ``metric`` on ``device``, and how much memory it needs there: the one place where the
    size threshold of the large-n path and the byte counts of each path meet (see
    :class:`MagnitudePlan`; the device's own choice, which depends on its free memory, is
    :meth:`MagnitudePlan.device_path`)."""
    n, d = int(n_points), int(n_features)
    device = parse_device(device)
    large = metric in LARGE_METRICS and space_path(n) == "large"
    if not large:
        return MagnitudePlan(n, d, metric, device, "dense", 16 * n * n,
                             magnitude_memory(n, d, path="dense"))
    peak = (32 * n * d + 64 * 8 * n if device.engine == "torch"
            else magnitude_memory(n, d, path="large") + 16 * n * d)
    return MagnitudePlan(n, d, metric, device, "large", 0, peak)


def magnitude_space(X, metric: str = "euclidean", *, path: str = "auto",
                    memory_limit: int | None = None, device: Device | str = "cpu", **options):
    """A prepared space of points: :class:`MagnitudeSpace` (dense, exact) or
    :class:`~diversity_core.magnitude.LargeMagnitudeSpace` (large n), refused beforehand if it
    would not fit in memory.

    Parameters
    ----------
    X : array of shape (n_points, n_features)
    metric : {"euclidean", "cosine"} (dense path: also "cityblock")
    path : {"auto", "dense", "large"} (see :func:`magnitude_memory`)
    memory_limit : int, optional
        Bytes the computation may use; default: the memory available now (``MemAvailable``).
    device : Device or str
        Where the engine runs (a :class:`~diversity_core.device.Device` or its name). On the
        NumPy engine (``cpu``, ``auto``) the paths above, on the host. On a torch device the
        device's memory decides (:func:`device_path`): the dense float64 space on the device
        (``TorchMagnitudeSpace.from_points``) whenever it fits there, whatever its size, else
        the large-n path on the device (:class:`TorchLargeMagnitudeSpace`), else a one-line
        :class:`MemoryNeedError`; ``memory_limit`` is then the device's, and ``path``
        (``dense``, ``large``) may force either.
    options : passed to the space (``solver_rtol`` and ``threads`` of the large-n path;
        ``precision`` and ``solver`` of the dense one; on a torch device ``solver_rtol`` only)

    Raises
    ------
    MemoryNeedError
        A ``MemoryError`` of one line saying how much memory the set would need and how much
        there is (``need``, ``limit``), before anything is allocated.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        check_embeddings(X)  # raises, naming the problem
    n, d = X.shape
    device = parse_device(device)
    if device.engine == "torch":
        return _device_space(X, metric, path, memory_limit, device, options)
    path = space_path(n, path)
    need = magnitude_memory(n, d, path=path)
    limit = available_memory() if memory_limit is None else int(memory_limit)
    if need > limit:
        have = "are available" if memory_limit is None else "allowed (memory_limit)"
        raise MemoryNeedError(
            f"magnitude of {n:,} points in {d} dimensions needs about {need / 2**30:.1f} GiB "
            f"({path} path); {limit / 2**30:.1f} GiB {have}.", need=need, limit=limit)
    if path == "large":
        return LargeMagnitudeSpace(X, metric, **options)
    from ..measures.distances import pairwise_distances

    return MagnitudeSpace(pairwise_distances(X, metric), **options)


def _device_space(X, metric: str, path: str, memory_limit, device: Device, options: dict):
    """:func:`magnitude_space` on a torch device: the memory rule of :func:`device_path`."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}; got {path!r}.")
    n, d = X.shape
    if path == "auto":
        path = device_path(n, d, device, memory_limit=memory_limit, metric=metric)
    if path == "dense":
        return TorchMagnitudeSpace.from_points(X, metric, device=device,
                                               memory_limit=memory_limit)
    rtol = {"solver_rtol": options["solver_rtol"]} if "solver_rtol" in options else {}
    return TorchLargeMagnitudeSpace(X, metric, device=device, memory_limit=memory_limit, **rtol)


def space_path(n_points: int, path: str = "auto") -> str:
    """The path :func:`magnitude_space` takes for ``n_points`` points: ``"dense"`` or
    ``"large"`` (``auto``: dense up to 10,000 points, else large; any other value is kept)."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}; got {path!r}.")
    if path == "auto":
        return "dense" if int(n_points) <= _DENSE_MAX_POINTS else "large"
    return path
