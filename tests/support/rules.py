"""What MagArea's default rule (``auto``) costs, from its stages' definitions: the scales each
stage adds, so that tests counting solves follow the rules instead of restating them."""

from itertools import accumulate

from diversity_core.magnitude import _hermite_d2, _quadrature


def default_rule_solves(*, factored: bool) -> set[int]:
    """Scales a MagArea on [0, t_cut] solves after the convergence-scale search, one more each
    where t_cut lies between the scales the search solved. ``factored`` (a float64 Cholesky
    factor answers each scale): ``auto`` is ``hermite_d2``, whose stages solve the new points
    of s of each (0 and t_cut known: 9, 11, 19), then its 41-point Clenshaw–Curtis level (39);
    else ``hermite_log``: 13, 15, 20, 27, then its 57-point level (55)."""
    if factored:
        stages = _hermite_d2.D2_STAGES
        interior = [n - 2 for n in accumulate(len(stage) for stage in stages)]
        interior.append(_hermite_d2._CC_LEVELS_IN_S[-1] - 1)
    else:
        stages = _quadrature._LOG_HERMITE_STAGES
        interior = [n - 1 for n in accumulate(len(stage) for stage in stages)]
        interior.append(_quadrature._LOG_HERMITE_LEVELS[-1] - 1)
    return set(interior) | {n + 1 for n in interior}
