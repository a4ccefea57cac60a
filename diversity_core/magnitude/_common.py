"""What every part of the magnitude engine shares, written once: the public defaults, the warning,
the floors and tolerances that decide the last bits and the duplicate merge (the thread count is
the package's, :mod:`diversity_core._threads`).

The lowest module of the package (it imports nothing of it), so that the space classes, the
solvers, the batch and the API can all read it without an import cycle.
"""

from __future__ import annotations

import functools

import numpy as np

# The package's defaults, each written once: every signature uses these names (re-exported by
# api), and the pipeline's configuration schema must agree with them
# (tests/magnitude/test_settings.py).
DEFAULT_TARGET = 0.95  # convergence scale: Mag(t_conv) = 0.95 n (paper, Definition 3.5)
DEFAULT_T_CONV_RTOL = 1e-9  # relative tolerance of the convergence-scale search
# MagArea's rule: hermite_d2 where a float64 Cholesky factor answers each scale, hermite_log
# elsewhere (_quadrature.path_rule; docs/performance.md compares them).
DEFAULT_INTEGRATION = "auto"
# Relative tolerance of the MagArea integral: the estimated error (conservative: true errors
# were 3 to 100 times smaller on clustered, uniform, cosine and curvature clouds) must be below
# it. At 1e-6, 25 Chebyshev scales did for every cloud tried (true errors 1e-11 to 1e-7); 1e-8
# asked for 49 scales on about half of them, for digits no use of MagArea needs.
DEFAULT_INTEGRATION_RTOL = 1e-6
DEFAULT_N_TS = 30  # evenly spaced scales of the trapezoid rule (magnipy's default)
DEFAULT_MAX_ITER = 100  # Newton steps of the convergence-scale search

# Points closer than this (relative to the largest distance) are duplicates, on the dense and
# the large-n path: their rows of Z_t agree to machine precision at every scale, so Z_t is
# numerically singular anyway. Relative: an absolute floor would merge every point of a space
# whose distances are all tiny (data scaled by 1e-300 became one point).
DUPLICATE_RTOL = 1e-12
# exp(-tD) entries are kept >= exp(-345) = 1e-150 in float64 (every path clamps the exponent
# here, where some t·max(D) exceeds it), so that products of two of them, as a factorisation
# forms them, stay normal floats: subnormals make LAPACK orders of magnitude slower.
EXPONENT_FLOOR = 345.0
# The same for float32 copies and products: entries below 1e-20 = exp(-46.05) are zero (dense
# path: FLOAT32_FLOOR on the values) or raised to exp(-46) (large-n path: on the exponents), so
# that their products with the entries of a CG vector stay above float32's smallest normal
# number (1.2e-38); float32 subnormals made products 5 times slower.
FLOAT32_FLOOR = 1e-20
FLOAT32_EXPONENT_FLOOR = 46.0


class MagnitudeWarning(UserWarning):
    """The similarity matrix was not positive definite; a fallback solver was used."""


class MemberWarning(Warning):
    """A warning of one member of a batch of spaces, naming it: ``member`` (its index in the
    batch) and ``text`` (its own message) are set when the warning is made; the message reads
    ``member {i}: {text}``. Each re-raised warning is of :func:`member_warning_category` of its
    own category, so that filters on that category (``MagnitudeWarning``, ``RuntimeWarning``)
    still match it."""

    def __init__(self, member: int, text: str):
        super().__init__(f"member {member}: {text}")
        self.member, self.text = int(member), str(text)


@functools.cache
def member_warning_category(category: type[Warning]) -> type[MemberWarning]:
    """The :class:`MemberWarning` of a warning category: a subclass of both."""
    if issubclass(category, MemberWarning):
        return category
    return type(f"Member{category.__name__}", (MemberWarning, category),
                {"__module__": __name__, "__doc__": f"A member's {category.__name__}."})


# ----------------------------------------------------------------------------------------------
# Duplicates
# ----------------------------------------------------------------------------------------------


def duplicate_groups(n: int, rows, cols) -> tuple[np.ndarray, np.ndarray]:
    """Merge the points joined by the close pairs ``(rows[k], cols[k])`` (connected components).

    Returns ``(keep, group)``: the first point of each group, ascending (input order: nothing the
    caller sees is reordered), shape (n_groups,), and the group of every point, numbered in
    that order, shape (n,)."""
    # SciPy's sparse graphs are imported here, when points lie close (0.2 CPU s for each process
    # that imports the engine otherwise). A sparse graph: a dense one would make csgraph copy an
    # (n, n) matrix.
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    n_groups, labels = connected_components(graph, directed=False)
    _, first = np.unique(labels, return_index=True)
    keep = np.sort(first)
    relabel = np.empty(n_groups, dtype=np.intp)
    relabel[labels[keep]] = np.arange(n_groups)
    return keep, relabel[labels]


def summarise_fallbacks(records: list[dict]) -> list[dict]:
    """Fallback records (``_solver.fallback_solve``'s) grouped by solver: for each, the scales'
    range ``t_min``, ``t_max``, their ``count``, the largest ``relative_residual`` and
    ``mag_error_bound``.

    A MagArea over ``[0, t_cut]`` errs by at most ``t_cut`` times the largest
    ``mag_error_bound`` of the scales inside it, on top of its quadrature tolerance (the
    quadrature weights are positive and sum to ``t_cut``)."""
    summary = []
    for solver in dict.fromkeys(r["solver"] for r in records):
        same = [r for r in records if r["solver"] == solver]
        ts = [r["t"] for r in same]
        summary.append({"solver": solver, "t_min": min(ts), "t_max": max(ts),
                        "count": len(same),
                        "relative_residual": max(r["relative_residual"] for r in same),
                        "mag_error_bound": max(r["mag_error_bound"] for r in same)})
    return summary
