"""The convergence-scale search's predicted stop: two Newton steps in a row tell the error of
the scale the second one reaches, and the search ends there, unsolved, where that error is far
below its tolerance."""

import math

import numpy as np
import pytest
from point_clouds import clustered

import diversity_core as dc
from diversity_core import magnitude as mg
from diversity_core.magnitude import MagnitudeSpace, _batch, _search


def search_evaluations(space, target):
    """(the convergence scale, the scales the search solved) of a fresh space."""
    solved = []
    evaluate = space.magnitude_and_derivative

    def counted(t):
        solved.append(t)
        return evaluate(t)

    space.magnitude_and_derivative = counted
    return space.convergence_scale(target), solved


@pytest.mark.parametrize(("metric", "n", "target"), [
    ("euclidean", 50, 0.95), ("cosine", 300, 0.99), ("cityblock", 200, 0.5),
    ("euclidean", 800, 0.95)])  # 800: conjugate gradients solve the scales
def test_it_ends_one_evaluation_earlier_on_the_very_same_scale(metric, n, target,
                                                                monkeypatch):
    D = dc.pairwise_distances(clustered(n, 16, seed=4), metric)
    predicted, solved = search_evaluations(MagnitudeSpace(D), target)
    monkeypatch.setattr(_search, "_PREDICTED_SAFETY", math.inf)  # every search ends on a solve
    confirmed, confirming = search_evaluations(MagnitudeSpace(D), target)
    assert predicted == confirmed  # bit for bit
    assert len(solved) == len(confirming) - 1 and confirming[-1] == confirmed
    assert predicted not in solved


def test_a_batch_ends_its_searches_alike(monkeypatch):
    rng = np.random.default_rng(2)
    spaces = [dc.pairwise_distances(rng.normal(size=(n, 8)) * rng.uniform(1, 3), "cosine")
              for n in (10, 10, 40, 120, 120)]
    rounds = []
    evaluate = _batch._Batch.evaluate

    def spy(self, idx, ts, **kwargs):
        rounds.append(len(idx))
        return evaluate(self, idx, ts, **kwargs)

    monkeypatch.setattr(_batch._Batch, "evaluate", spy)
    mg.clear_cache()
    predicted = mg.convergence_scales(spaces, 0.95)
    predicted_rounds = list(rounds)
    monkeypatch.setattr(_search, "_PREDICTED_SAFETY", math.inf)
    rounds.clear()
    mg.clear_cache()
    confirmed = mg.convergence_scales(spaces, 0.95)
    np.testing.assert_array_equal(predicted, confirmed)
    # one solve fewer in four of the five (the fifth ended on its third solve either way)
    assert sum(rounds) - sum(predicted_rounds) == len(spaces) - 1
    # (stacked members are solved to round-off of their own spaces' path)
    assert predicted == pytest.approx([dc.convergence_scale(D, 0.95) for D in spaces],
                                      rel=1e-12)


def drive(search, n: float):
    """Run a search on the deficit n·exp(-t²): (its result, the scales it evaluated, those
    whose step was clamped to a factor of 4)."""
    evaluated, clamped = [], []
    while True:
        t = search.t
        evaluated.append(t)
        deficit = n * math.exp(-t * t)
        result = search.step(n - deficit, 2.0 * t * deficit)
        if result is not None:
            return result, evaluated, clamped
        if search.t == 4.0 * t:
            clamped.append(t)
            assert search.newton_step is None


def test_it_meets_the_tolerance_and_clamped_steps_do_not_count(monkeypatch):
    """A deficit n·exp(-t²) (Newton's error constant 1 / (2t), not the exponential decay the
    step assumes): from far below the root the first steps are clamped to a factor of 4, then
    Newton's converge, and the predicted stop lands within the tolerance of the root."""
    n, goal = 100.0, 95.0
    root = math.sqrt(math.log(n / (n - goal)))
    result, evaluated, clamped = drive(_search._ScaleSearch(n, goal, 0.05, rtol=1e-9,
                                                            max_iter=50), n)
    assert len(clamped) >= 2
    assert abs(result - root) <= 1e-9 * root
    assert result not in evaluated  # it ended on a predicted step
    monkeypatch.setattr(_search, "_PREDICTED_SAFETY", math.inf)
    confirmed, confirming, _ = drive(_search._ScaleSearch(n, goal, 0.05, rtol=1e-9,
                                                          max_iter=50), n)
    assert confirming == evaluated + [result]  # the same steps, and one evaluation more
    assert abs(confirmed - root) <= 1e-9 * root
