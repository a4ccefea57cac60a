"""Metric space magnitude: magnitude functions, convergence scales, MagArea and MagDiff.

Definitions (Leinster 2013; Limbeck et al., "Metric Space Magnitude for Evaluating the Diversity
of Latent Representations", §3):

* similarity matrix ``Z_t = exp(-t D)`` (elementwise) of an (n, n) distance matrix ``D``;
* weighting ``w`` solving ``Z_t w = 1`` and magnitude ``Mag(t) = sum(w) = 1ᵀ Z_t⁻¹ 1``, with
  ``Mag(0) := 1`` by definition and ``Mag(t) -> n`` as ``t -> inf``;
* convergence scale ``t_conv``: the scale with ``Mag(t_conv) = target * n`` (paper: 0.95), n
  the number of distinct points;
* MagArea ``= ∫_0^t_cut Mag(t) dt`` and MagDiff ``= ∫_0^t_cut (Mag_X(t) - Mag_ref(t)) dt``.

How it is computed, and why it differs from the authors' ``magnipy``:

* One Cholesky factorisation ``Z_t = L Lᵀ`` per scale and ONE triangular solve:
  ``Mag(t) = ‖L⁻¹ 1‖²``. The weighting needs a second solve and is only formed when asked for
  (weights, the derivative). From 500 distinct points on, conjugate gradients
  come first: ``Z_t`` is well conditioned near the convergence scale, where a few dozen O(n²)
  iterations replace an O(n³) factorisation. They run in float32 (two to three times the
  speed of float64 matrix-vector products here) inside a float64 iterative refinement, so
  the weighting is as accurate as the direct solve's (see :class:`MagnitudeSpace`).
* Only one triangle of the symmetric ``Z_t`` is ever formed: half the exponentials, and BLAS's
  symmetric matrix-vector product reads half the memory of a general one.
* The convergence scale is found by safeguarded Newton iteration on ``log(n - Mag(t))`` with
  the exact derivative ``dMag/dt = wᵀ (D ∘ Z_t) w`` (O(n²) once ``w`` is known), inside a
  bracket that is never left; magnipy brackets by factors of 10 and runs toms748 without
  derivatives.
* MagArea is a true integral, to a relative tolerance (default 1e-6). The default rule,
  ``auto``, uses what each solve gives at scales crowded towards 0 (where magnitude rises
  fastest) and integrates their interpolant exactly: where a float64 Cholesky factor answers,
  ``hermite_d2``, the value and the first and second derivatives at 11 scales (9 solves after
  the convergence-scale search, which has solved t_cut, where its error estimate meets the
  tolerance, more stages reusing them where not); where conjugate gradients answer,
  ``hermite_log``, the value and ``dMag/dt`` at 15 (13 solves). ``chebyshev`` (alias ``cc25``)
  is Clenshaw–Curtis quadrature on nested Chebyshev grids (13, 25, 49, ... scales), refined
  until the error estimated from the decay of the Chebyshev coefficients is below the
  tolerance; ``scipy.integrate.quad``'s adaptive Gauss–Kronrod is
  kept as ``method="quad"`` for cross-checks. The paper's evenly spaced trapezoid rule is
  ``method="trapezoid"``, for comparison with published numbers.
* :class:`MagnitudeSpace` validates and de-duplicates a distance matrix once and remembers every
  scale it has evaluated, so that a convergence scale, a MagArea and a magnitude function of the
  same space share their work. The functions below accept it wherever they accept ``D``.
* Duplicate points make ``Z_t`` singular. By the twin property the magnitude of a space with
  duplicates equals that of the de-duplicated space; we merge exact duplicates *without
  re-ordering anything*: weights are returned in input order, a duplicated point's weight split
  equally among its copies (so ``Z_t w = 1`` still holds for the full matrix). magnipy uses
  ``np.unique``, which sorts the rows, and silently adds ``0.01 I`` on any failure.
* ``Z_t`` of a space that is not of negative type may be indefinite (Leinster's K_{3,2} graph
  metric below t = log √2, say) or singular: Cholesky then fails, and we fall back to a
  symmetric-indefinite LDLᵀ solve (or, for a singular matrix, an eigendecomposition with a
  pseudo-inverse) and emit a :class:`MagnitudeWarning` naming the scale — never a silently wrong
  number. Euclidean and cityblock distances are of negative type, so their ``Z_t`` is positive
  definite for distinct points. So is the cosine one, although cosine distance is no metric:
  ``exp(-t (1 - cos)) = e^{-t} exp(t <x̂, ŷ>)`` is an exponential of a positive semi-definite
  kernel (Schur product theorem). It can still be numerically singular at small ``t`` when there
  are many more points than dimensions, which is where the fallback then applies.

The package's modules, from the top down (none imports one above it: no import cycles):

* :mod:`~diversity_core.magnitude.api`: the public functions below (and the defaults,
  re-exported from ``_common``); ``sets``: the reference-free protocol for many sets; ``_torch``
  (and ``_torch_batch``): the torch (GPU) path, a space class with the same interface;
  ``_torch_large``: the large-n path on a torch device, and the memory rule choosing between
  the two (``device_path``);
* ``_batch_areas``: the MagAreas of many spaces, each rule's stages advanced together;
  ``_batch``: many spaces at once (validation, grouping by size, the searches advanced
  together); ``_batch_solve``: its stacked and looped solvers at one scale;
  ``_lapack``: LAPACK on packed triangles without the GIL;
* ``_large``: :class:`LargeMagnitudeSpace`, the large-n path (float32 distances, products formed
  on the fly);
* ``_space``: :class:`MagnitudeSpace` (validated, de-duplicated, every evaluated scale
  remembered), the operations every space offers, and the cache of prepared spaces;
* ``_solver``: the dense solvers of one space at one scale (conjugate gradients, Cholesky,
  mixed precision, the fallbacks); ``_similarity``: its similarity buffer (exp(-tD) by
  exponentials, by a shift from a nearby scale, or from MagArea's pairs of scales);
  ``_elementwise``: the row-block passes that form, shift and copy exp(-tD) on threads, and the
  exponential (:data:`EXPONENTIAL` names its routine; ``_kernels``, compiled from
  ``_kernels.c``: glibc's vector exponential, the weighted distance form of dMag/dt, and the
  large-n path's panel products);
  ``_cg``: conjugate gradients, one routine for the dense and the large-n path;
* ``_search``: the convergence-scale search; ``_quadrature``: MagArea's integral (the
  Clenshaw–Curtis levels, for one space or a batch) and :class:`ScaleGrid`;
* ``_common``: what all share, written once: the defaults, :class:`MagnitudeWarning`, the
  duplicate tolerance and merge, the exponent floors, and the thread count.
"""

from __future__ import annotations

from .._threads import allowed_threads
from ._batch import MagnitudeBatchError
from ._common import MagnitudeWarning, MemberWarning
from ._elementwise import EXPONENTIAL as EXPONENTIAL
from ._large import LargeMagnitudeSpace

# The option tuples and defaults are public too (the settings and the CLI read them).
from ._quadrature import INTEGRATION_METHODS as INTEGRATION_METHODS
from ._quadrature import ScaleGrid
from ._solver import PRECISIONS as PRECISIONS
from ._solver import SOLVERS as SOLVERS
from ._space import MagnitudeSpace, clear_cache
from ._torch import (
    TorchMagnitudeSpace,
    check_torch_memory,
    space_on_device,
    torch_magnitude_memory,
)
from ._torch_batch import (
    TorchMagnitudeBatch,
    batch_on_device,
    torch_batch_memory,
    torch_convergence_scales,
    torch_mag_areas,
    torch_magnitude_functions,
)
from ._torch_large import TorchLargeMagnitudeSpace, device_path, torch_large_memory
from .api import DEFAULT_INTEGRATION as DEFAULT_INTEGRATION
from .api import DEFAULT_INTEGRATION_RTOL as DEFAULT_INTEGRATION_RTOL
from .api import DEFAULT_N_TS as DEFAULT_N_TS
from .api import DEFAULT_T_CONV_RTOL as DEFAULT_T_CONV_RTOL
from .api import DEFAULT_TARGET as DEFAULT_TARGET
from .api import DIFF_NORMALISATIONS as DIFF_NORMALISATIONS
from .api import (
    MagnitudePlan,
    available_memory,
    convergence_scale,
    convergence_scales,
    mag_area,
    mag_areas,
    mag_diff,
    magnitude_derivative,
    magnitude_function,
    magnitude_functions,
    magnitude_memory,
    magnitude_plan,
    magnitude_space,
    magnitude_weights,
    reference_based_t_cut,
    reference_free_t_cut,
    space_path,
)
from .sets import AREA_RULES as AREA_RULES
from .sets import (
    GivenTCut,
    MedianTCut,
    ReferenceTCut,
    SetMagnitudes,
    TCutRule,
    measure_sets,
    trapezoid_weights,
)

__all__ = [
    "MagnitudeSpace",
    "MagnitudeWarning",
    "magnitude_function",
    "magnitude_weights",
    "magnitude_derivative",
    "convergence_scale",
    "mag_area",
    "mag_diff",
    "reference_free_t_cut",
    "reference_based_t_cut",
    # batches, large n and memory
    "convergence_scales",
    "magnitude_functions",
    "mag_areas",
    "MagnitudeBatchError",
    "magnitude_memory",
    "magnitude_space",
    "magnitude_plan",
    "MagnitudePlan",
    "space_path",
    "available_memory",
    "allowed_threads",
    "LargeMagnitudeSpace",
    "ScaleGrid",
    "clear_cache",
    # many sets on one integration limit: the reference-free protocol
    "measure_sets",
    "SetMagnitudes",
    "TCutRule",
    "MedianTCut",
    "GivenTCut",
    "ReferenceTCut",
    "MemberWarning",
    "trapezoid_weights",
    # the torch path (CUDA, or the CPU to check it): where it runs is a
    # diversity_core.device.Device
    "space_on_device",
    "batch_on_device",
    "TorchMagnitudeSpace",
    "TorchMagnitudeBatch",
    "torch_convergence_scales",
    "torch_mag_areas",
    "torch_magnitude_functions",
    "torch_magnitude_memory",
    "torch_batch_memory",
    "check_torch_memory",
    # the device's memory decides; the large-n path on a torch device
    "device_path",
    "TorchLargeMagnitudeSpace",
    "torch_large_memory",
]
