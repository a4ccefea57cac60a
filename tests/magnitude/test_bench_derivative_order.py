"""benchmarks/bench_derivative_order.py: its derivatives of magnitude against the two-point
space's closed form and the engine's, its rules against the engine's accurate MagArea, and a
small run's CSVs (header lines, a row per case, a summary row per rule)."""

import math

import numpy as np
import pytest
from result_tables import benchmark, small_run, table

import diversity_core as dc
from diversity_core.magnitude import MagnitudeSpace, _chebyshev

bench = benchmark("bench_derivative_order")


@pytest.mark.parametrize("t", [0.05, 0.7, 3.0])
def test_two_points_closed_form(t):
    """Mag(t) = 2 / (1 + q) with q = e^{-td}: Mag' = 2dq / (1 + q)^2,
    Mag'' = 2d^2 q (q - 1) / (1 + q)^3, Mag''' = 2d^3 q (q^2 - 4q + 1) / (1 + q)^4."""
    d = 1.7
    q = math.exp(-t * d)
    expected = [2 / (1 + q), 2 * d * q / (1 + q)**2, 2 * d**2 * q * (q - 1) / (1 + q)**3,
                2 * d**3 * q * (q * q - 4 * q + 1) / (1 + q)**4]
    got = bench.mag_derivatives(np.array([[0.0, d], [d, 0.0]]), t, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_derivatives_agree_with_the_engine_and_its_differences():
    rng = np.random.default_rng(3)
    D = dc.pairwise_distances(rng.normal(size=(60, 4)), "euclidean")
    space = MagnitudeSpace(D)
    t, h = 1.3, 1e-4
    mag, slope, second = bench.mag_derivatives(D, t, 3)
    engine_mag, engine_slope = space.magnitude_and_derivative(t)
    assert mag == pytest.approx(engine_mag, rel=1e-10)
    assert slope == pytest.approx(engine_slope, rel=1e-8)
    # Mag'' against a central difference of the engine's Mag' (error of order h^2).
    difference = (space.magnitude_and_derivative(t + h)[1]
                  - space.magnitude_and_derivative(t - h)[1]) / (2 * h)
    assert second == pytest.approx(difference, rel=1e-5)


@pytest.mark.parametrize("points,order", bench.RULES)
def test_each_rule_integrates_within_the_tolerance(points, order):
    rng = np.random.default_rng(5)
    D = dc.pairwise_distances(rng.uniform(size=(80, 3)), "euclidean")
    space = MagnitudeSpace(D)
    t_cut = space.convergence_scale(0.9)
    reference = space.mag_area(t_cut, method="chebyshev", rtol=1e-10)
    alpha = _chebyshev._stretch_rate(t_cut * space.diameter)
    estimate, error = bench.rule(D, t_cut, alpha, points, order)
    assert abs(estimate - reference) <= 1e-6 * reference
    assert 0 <= error < 1e-3 * reference


def test_a_small_run_writes_both_tables(tmp_path):
    out = tmp_path / "order.csv"
    _, rows = small_run("bench_derivative_order.py", ["--max-n", "50", "--out", str(out)], out,
                        f"python benchmarks/bench_derivative_order.py --max-n 50 --out {out}")
    assert list(rows[0]) == bench.COLUMNS
    # A row per target of each of the study's clouds of 50 points.
    assert len(rows) == sum(len(c[4]) for _, c in bench.study.clouds(50))
    for row in rows:
        for points, order in bench.RULES:
            key = bench.name(points, order)
            assert int(row[f"{key}_solves"]) == points - 2
            assert 0 <= float(row[f"{key}_rel_error"]) < 1e-4
    _, summary = table(out.with_name("order_summary.csv"))
    assert [r["rule"] for r in summary] == [bench.name(*r) for r in bench.RULES]
    assert all(int(r["cases"]) == len(rows) for r in summary)
