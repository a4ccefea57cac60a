"""Axiom checks (paper §3.1): the counterexamples are real, and magnitude passes them."""

import numpy as np
import pandas as pd
import pytest

from diversity_core import avg_sim, gm_stds, iso_score, mag_area, pairwise_distances, vendi_score
from diversity_core.experiments import axioms as ax


def _measure(name):
    return next(m for m in ax.default_measures() if m.name == name)


def test_clustered_circle_fools_vendi_avgsim_and_isoscore():
    even = ax._even_circle(8)
    pairs = ax._clustered_circle(np.deg2rad([45, 135, 225, 315]), 2, 0.05)
    # Same second-moment matrix (I / 2) and the same zero mean direction: equal scores although
    # the second set is four tight clusters.
    assert vendi_score(pairs) == pytest.approx(vendi_score(even), rel=1e-10)
    assert vendi_score(even) == pytest.approx(2.0, rel=1e-12)
    assert avg_sim(pairs) == pytest.approx(avg_sim(even), rel=1e-10, abs=1e-12)
    assert iso_score(pairs) == pytest.approx(iso_score(even), rel=1e-10)
    # Magnitude sees the clusters at every common scale.
    D_even, D_pairs = pairwise_distances(even), pairwise_distances(pairs)
    assert mag_area(D_pairs, 5.0) < mag_area(D_even, 5.0)


def test_gm_stds_scores_distinct_points_like_identical_ones():
    equator = np.c_[ax._even_circle(8), np.zeros(8)]
    assert gm_stds(equator) == 0.0 == gm_stds(np.ones((8, 3)))


def test_magnitude_holds_effective_size_monotonicity_and_twin():
    m = _measure("MagArea (Euclidean)")
    for check in (ax.check_effective_size, ax.check_monotonicity, ax.check_twin_property):
        result = check(m, seed=3)
        assert result.holds, result.counterexample
        assert result.cases_tried >= 5


@pytest.mark.parametrize("name", ["Vendi Score (cosine)", "-AvgSim (cosine)", "GMStds",
                                  "IsoScore", "DCScore (cosine, tau=1)"])
def test_baselines_fail_the_twin_property_with_a_recorded_counterexample(name):
    result = ax.check_twin_property(_measure(name), seed=3)
    assert not result.holds
    before, after = result.values["values"]
    assert before != pytest.approx(after, rel=1e-9)
    assert "copy of point" in result.counterexample


def test_vendi_monotonicity_counterexample_is_exact():
    # Two orthogonal points plus a copy of one: VS drops from 2 to exp(H(2/3, 1/3)) ~ 1.89.
    X = np.eye(2)
    assert vendi_score(np.vstack([X, X[0]])) < vendi_score(X)
    result = ax.check_monotonicity(_measure("Vendi Score (cosine)"))
    assert not result.holds and result.values["values"][1] < result.values["values"][0]


def test_crossing_pair_crosses_inside_the_integration_range():
    _, A, B = ax._crossing_pair()
    t_cut = 50.0
    crossings, diff = ax.magnitude_crossing(A, B, t_cut)
    assert crossings.size >= 1
    assert diff[0] > 0 and diff[-1] < 0  # A more diverse at coarse scales, B at fine scales
    assert ax.check_multi_scale(_measure("GMStds")).holds is False
    assert ax.check_multi_scale(_measure("MagArea (Euclidean)")).holds is True


def test_tables():
    measures = [_measure("MagArea (Euclidean)"), _measure("GMStds")]
    results = ax.check_axioms(measures, seed=0)
    table = ax.results_table(results)
    assert list(table.columns) == ["measure", "axiom", "result", "cases_tried", "counterexample"]
    assert len(table) == 2 * len(ax.AXIOMS)
    assert set(table["result"]) <= {"holds", "fails"}
    wide = ax.summary_table(results)
    assert list(wide.index) == ["MagArea (Euclidean)", "GMStds"]
    assert list(wide.columns) == list(ax.AXIOMS)
    assert (wide.loc["MagArea (Euclidean)"] == "holds").all()
    assert (wide.loc["GMStds"] == "fails").all()


@pytest.mark.slow
def test_axioms_rule_end_to_end(tiny_runs):
    out = tiny_runs("axioms") / "results" / "axioms"
    table = pd.read_csv(out / "axioms.csv")
    assert len(table) == len(ax.MEASURES) * len(ax.AXIOMS)
    assert (out / "axioms.csv.provenance.json").is_file()
    summary = (out / "axioms_summary.md").read_text()
    assert summary.startswith("| measure |") and "MagArea (Euclidean)" in summary
