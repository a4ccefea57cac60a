"""The building blocks of MagArea's quadrature: Chebyshev points, the nested Clenshaw–Curtis
levels and bisected panels with their error estimate, and the log stretch of the Hermite rules'
variable, shared by :mod:`._quadrature` (the rules and their dispatch) and :mod:`._hermite_d2`.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from numpy.polynomial import chebyshev
from scipy.fft import dct

from ._common import MagnitudeWarning

# Nested Clenshaw–Curtis grids: N + 1 Chebyshev points on a panel; each contains the previous.
# Measured on [0, t_conv] of clustered clouds (300 to 2,000 points, d = 2 to 50), the error
# estimate of 13 points was 2e-5 to 5e-5 (true errors 1e-7 to 4e-6), that of 25 points 2e-9 to
# 3e-8: 13 points meet rtol 1e-4 and 25 points mostly meet 1e-8, where the former levels of
# 17 and 33 needed 17 and 33 (17 points: 6e-7; 9 points: 1e-3, true errors about 1e-5).
_CC_LEVELS = (12, 24, 48)
_MAX_BISECTIONS = 20


def _cc_refine(f, t_cut: float, estimate: float, rtol: float, *, return_error: bool = False,
               announce=None):
    """The bisection stage of ``_quadrature._integrate_chebyshev``, after one panel on
    [0, t_cut] gave ``estimate`` with too large an error (with ``return_error``: and the sum
    of the panels' estimated errors)."""
    tol = rtol * abs(estimate)  # absolute budget, from the best single-panel estimate
    middle = 0.5 * t_cut
    left = _cc_bisect(f, 0.0, middle, tol / math.sqrt(2), _MAX_BISECTIONS, announce)
    right = _cc_bisect(f, middle, t_cut, tol / math.sqrt(2), _MAX_BISECTIONS, announce)
    value, error = left[0] + right[0], left[1] + right[1]
    return (value, error) if return_error else value


def _cc_bisect(f, a: float, b: float, tol: float, depth: int,
               announce=None) -> tuple[float, float]:
    """(estimate, estimated error) of ∫_a^b f, bisecting until each panel meets its budget."""
    estimate, error = _cc_panel(f, a, b, tol=tol, announce=announce)
    if error <= tol:
        return estimate, error
    if depth == 0:
        warnings.warn(
            f"MagArea integral on [{a:.6g}, {b:.6g}] kept an estimated error of {error:.3g} "
            f"(budget {tol:.3g}) after {_MAX_BISECTIONS} bisections: magnitude is evaluated "
            "with round-off noise there (ill-conditioned Z), or has a pole or jump (distances "
            "not of negative type).",
            MagnitudeWarning,
            stacklevel=2,
        )
        return estimate, error
    middle = 0.5 * (a + b)
    left = _cc_bisect(f, a, middle, tol / math.sqrt(2), depth - 1, announce)
    right = _cc_bisect(f, middle, b, tol / math.sqrt(2), depth - 1, announce)
    return left[0] + right[0], left[1] + right[1]


def _cc_panel(f, a: float, b: float, tol: float = 0.0, rtol: float = 0.0, announce=None):
    """Clenshaw–Curtis estimate of ∫_a^b f and its estimated absolute error, on nested grids of
    13, 25 and 49 Chebyshev points, stopping at the first whose error is below ``tol`` or
    ``rtol`` times the estimate.

    On the grid of N + 1 points the interpolant's Chebyshev coefficients a_k come from one DCT-I,
    and ∫T_k = 2 / (1 - k²) for even k. The quadrature error is Σ_{k>N} a_k (∫T_k - Q_N[T_k]),
    whose leading terms weigh coefficients of order N by about 8 / N², so it is estimated by the
    largest of the last four computed coefficients times 8 / N² (Trefethen, "Is Gauss quadrature
    better than Clenshaw–Curtis?", SIAM Review 2008). Measured on Euclidean, cityblock and cosine
    clouds, this overestimates the true error by factors of 3 to 100. (SciPy offers no nested
    Chebyshev rule with such an estimate, hence this function.)

    The nodes of a level come in pairs t_j, t_(N-j) whose sum is a + b, and t_(N/2) is its half.
    ``announce(pairs, total, half)``, if given, is told each level's new scales before ``f`` is
    asked for them: ``pairs`` lists (t_j, t_(N-j)) for the new j > N/2 (the larger first, in
    the order ``f`` will be asked), ``total`` is a + b and ``half`` is t_(N/2) if new, else
    None. The dense space's similarity buffer forms exp(-t_j D) from exp(-(a + b)D) and
    exp(-t_(N-j) D) with it (see ``_similarity.SimilarityBuffer.announce_pairs``).
    """

    def evaluate(rows, nodes, ts, n):
        # New scales from the largest down (as _cc_levels lists them): CG converges best
        # there, and once it fails at some scale it is not tried again below it (with
        # ``announce``: pair by pair, the smaller scales still descending; see _paired_order).
        new = [int(j) for j in nodes]
        if announce is not None:
            new = _paired_order(new, n)
            announce([(float(ts[j]), float(ts[n - j])) for j in new if 2 * j > n and j < n],
                     a + b, float(ts[n // 2]) if n // 2 in new else None)
        value = {j: f(float(ts[j])) for j in new}
        return [value[int(j)] for j in nodes]

    estimate, error = _cc_levels(evaluate, a, b, 1, tol=tol, rtol=rtol)
    return float(estimate[0]), float(error[0])


def _cc_levels(evaluate, a: float, b: float, count: int, *, tol: float = 0.0, rtol: float = 0.0,
               values: np.ndarray | None = None, levels: tuple[int, ...] = _CC_LEVELS):
    """The nested Clenshaw–Curtis levels on [a, b] for ``count`` integrands at once, each
    stopping at the first level whose estimated error is below ``tol`` or ``rtol`` times its
    estimate: the loop of :func:`_cc_panel` (one integrand) and of the batch (many spaces, the
    same nodes; ``_batch_areas._chebyshev_areas``), written once.

    ``evaluate(rows, nodes, ts, n)``: the integrands ``rows`` at the scales ``ts[nodes]`` of
    level ``n`` (``ts`` its n + 1 nodes, ascending), a sequence of len(rows) values; asked for
    each level's new nodes only, integrand by integrand, each integrand's nodes from the largest
    down. ``values`` (count, levels[-1] + 1): values known beforehand on the finest grid (NaN:
    unknown). ``levels``: the grids' N, each dividing the last (default: 12, 24, 48).

    Returns ``(estimate, error)``, arrays of shape (count,) from each integrand's last level.
    """
    finest = levels[-1]
    if values is None:
        values = np.full((count, finest + 1), np.nan)
    have = ~np.isnan(values)
    estimate = np.full(count, np.nan)
    error = np.full(count, np.nan)
    active = np.arange(count)
    for n in levels:
        stride = finest // n
        ts = _cc_nodes(a, b, n)
        pending = [(k, j) for k in active for j in range(n, -1, -1) if not have[k, j * stride]]
        if pending:
            rows, nodes = np.array(pending).T
            values[rows, nodes * stride] = evaluate(rows, nodes, ts, n)
            have[rows, nodes * stride] = True
        est, err = _cc_rule(values[np.ix_(active, np.arange(n + 1) * stride)], a, b)
        estimate[active], error[active] = est, err
        active = active[~(err <= np.maximum(tol, rtol * np.abs(est)))]
        if not active.size:
            break
    return estimate, error


def _paired_order(new: list[int], n: int) -> list[int]:
    """The new node indices of a level (largest first) reordered for pairs: the last node, the
    middle one, then each pair j, n - j from the middle outwards (the larger first), then the
    rest. The smaller scales still come largest first (CG's floor), and each pair's two
    matrices are formed together, so that no smaller partner waits in memory for its turn
    (fresh buffers cost more than the exponentials they save on machines that fault their
    pages in slowly: 32 MB took 5 to 20 ms here)."""
    first = [j for j in (n, n // 2) if j in new]
    pairs = [k for j in sorted(new) if 2 * j > n and j < n and n - j in new for k in (j, n - j)]
    return first + pairs + [j for j in new if j not in first and j not in pairs]


def _cc_nodes(a: float, b: float, n: int) -> np.ndarray:
    """The n + 1 Chebyshev points of [a, b], ascending, the last one exactly b (Mag(t_cut) is
    often known already)."""
    ts = a + 0.5 * (b - a) * (1.0 - np.cos(np.pi * np.arange(n + 1) / n))
    ts[-1] = b
    return ts


def _cc_rule(fx: np.ndarray, a: float, b: float):
    """Clenshaw–Curtis estimate of ∫_a^b and its error estimate (see :func:`_cc_panel`) from
    values ``fx`` of shape (..., n + 1) at :func:`_cc_nodes`; arrays of shape (...)."""
    n = fx.shape[-1] - 1
    coef = dct(fx, type=1, axis=-1) / n
    coef[..., 0] /= 2.0
    coef[..., -1] /= 2.0
    even = np.arange(0, n + 1, 2)
    estimate = 0.5 * (b - a) * np.sum(coef[..., even] * 2.0 / (1.0 - even.astype(float)**2),
                                      axis=-1)
    error = 0.5 * (b - a) * 8.0 / n**2 * np.abs(coef[..., -4:]).max(axis=-1)
    return estimate, error


@functools.cache
def _birkhoff_basis(x: tuple[float, ...], orders: tuple[int, ...]) -> np.ndarray:
    """Conditions at the points ``x`` of [-1, 1] (ascending): the value and the first
    ``orders[i]`` − 1 derivatives at ``x[i]`` (every order at least 1), listed values first,
    then first derivatives, then second (each group in the order of ``x``) -> the Chebyshev
    coefficients of the polynomial of degree (number of conditions − 1) that meets them (a
    square matrix). The Hermite rules' interpolants: ``hermite`` and ``hermite_log`` take orders
    1, 2, ..., 2, ``hermite_d2`` 1, 3, ..., 3, 2."""
    x = np.asarray(x)
    orders = np.asarray(orders)
    degree = int(orders.sum()) - 1
    unit = np.eye(degree + 1)
    blocks = [chebyshev.chebvander(x, degree)]
    for k in range(1, int(orders.max())):
        at = x[orders > k]
        blocks.append(np.stack([chebyshev.chebval(at, chebyshev.chebder(unit[j], k))
                                for j in range(degree + 1)], axis=1))
    return np.linalg.inv(np.vstack(blocks))


def _interpolant_integral(coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For Chebyshev coefficients ``coef`` (..., degree + 1) in x on [-1, 1]: the integral of
    their series over [-1, 1] (∫T_k = 2 / (1 − k²) for even k), and the sum of the last four
    coefficients' absolute values (∫|T_k| <= 2: the Hermite rules' error estimate, per unit of
    half-length)."""
    even = np.arange(0, coef.shape[-1], 2)
    return (np.sum(coef[..., even] * 2.0 / (1.0 - even.astype(float)**2), axis=-1),
            np.abs(coef[..., -4:]).sum(axis=-1))


def _stretch_rate(reach: float) -> float:
    """``hermite_log``'s α for t_cut · (largest distance) = ``reach``: 1.5 ln(reach / 25)
    within [0.25, 3]. Mag rises from 1 over scales of about 1 / (largest distance); where that
    is a small share of [0, t_cut] (reach above 100: cosine distances, targets of 0.99) the
    nodes must crowd towards 0 (α of 2.5 to 3), where it is not (reach of 20 to 40: Euclidean
    clouds whose distances concentrate) Mag changes fastest near t_cut and nearly the plain
    Chebyshev points serve best (α of 0.25 to 0.5). Chosen on the clouds of
    ``benchmarks/bench_quadrature_rule.py`` up to 1,500 points, α of 0.25 to 3.5 tried on each:
    this rule let the estimate meet rtol 1e-6 on the 15 scales in more cases than ln(reach / 20)
    or any fixed α (the study's CSV records the α used and whether it fell back; its
    ``--holdout`` clouds, which took no part in the choice, are the out-of-sample check)."""
    return min(max(1.5 * math.log(max(reach, 1e-300) / 25.0), 0.25), 3.0)


def _log_stretch(s: np.ndarray | float, t_cut: float, alpha):
    """``hermite_log``'s change of variable: t = t_cut · (e^{αs} − 1) / (e^α − 1) and dt/ds,
    d²t/ds² at s in [0, 1] (t(0) = 0 and t(1) = t_cut exactly); ``t_cut`` and ``alpha`` one
    value each, or one per entry of ``s`` (broadcast)."""
    alpha = np.asarray(alpha, dtype=float)
    scale = t_cut / np.expm1(alpha)
    grow = np.exp(alpha * np.asarray(s, dtype=float))
    return scale * np.expm1(alpha * np.asarray(s, dtype=float)), scale * alpha * grow, \
        scale * alpha**2 * grow


def _stretched_refine(f, t_cut: float, alpha: float, estimate: float,
                      rtol: float) -> tuple[float, float]:
    """The bisection stage of the stretched Hermite rules (:func:`_cc_refine` of
    g(s) = f(t(s)) t'(s) in s, t(s) of :func:`_log_stretch`), after their last level gave
    ``estimate`` with too large an error: (estimate, estimated error)."""

    def integrand(x: float) -> float:
        tx, dtx, _ = _log_stretch(x, t_cut, alpha)
        return f(float(tx) if x < 1.0 else t_cut) * float(dtx)

    return _cc_refine(integrand, 1.0, estimate, rtol, return_error=True)
