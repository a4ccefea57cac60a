"""What MagArea's default rule (``hermite_log``) costs, from its stages' definition: the scales
each stage adds, so that tests counting solves follow the rule instead of restating it."""

from itertools import accumulate

from diversity_core.magnitude import _quadrature


def default_rule_solves() -> set[int]:
    """Scales a MagArea on [0, t_cut] solves after the convergence-scale search: the points of
    s of its first stage (0 and t_cut known: 13), of each further stage (20, 27), or the
    57-point Clenshaw–Curtis level (55); one more each where t_cut lies between the scales the
    search solved."""
    interior = [n - 1 for n in accumulate(len(stage) for stage in _quadrature._LOG_HERMITE_STAGES)]
    interior.append(_quadrature._LOG_HERMITE_LEVELS[-1] - 1)
    return set(interior) | {n + 1 for n in interior}
