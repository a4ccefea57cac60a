"""Table 1's measures besides MagArea: which join, their value per cloud, their rows."""

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.spatial.distance import cdist
from workflow_runner import REPO

from diversity_core.data.curvature import geodesic_distances, normal_coordinates, sample_disk
from diversity_core.experiments.curvature import (
    BASELINE_ROW,
    cloud_measures,
    config_problems,
    configured_measures,
    measure_rows,
    other_measures,
    with_measure_rows,
)
from diversity_core.measures import registry
from diversity_core.measures.registry import get_measure, load_plugin

TOY = "tests.support.toy_measures"


@pytest.fixture
def plugins(monkeypatch):
    """The toy plugins registered for the test, the registry restored after it."""
    saved = dict(registry.MEASURES)
    monkeypatch.setattr(registry, "_USED", set())
    yield registry.register_plugins([f"{TOY}:mean_nn", f"{TOY}:NN_TO_REFERENCE"],
                                    entry_points=False)
    registry.MEASURES.clear()
    registry.MEASURES.update(saved)


def test_plugins_of_a_set_alone_join_and_those_against_a_reference_do_not(plugins):
    assert configured_measures({"measures": ["magarea"]}) == ["magarea", "mean_nn"]
    assert configured_measures({"measures": ["magarea", "gmstds"]}) == [
        "magarea", "gmstds", "mean_nn"]
    assert other_measures(configured_measures({"measures": ["magarea"]})) == ["mean_nn"]
    with pytest.raises(ValueError, match="magdiff do not fit"):
        configured_measures({"measures": ["magarea", "magdiff"]})
    with pytest.raises(ValueError, match="unknown measure 'renyi'"):
        configured_measures({"measures": ["renyi"]})


def test_the_list_must_name_magarea():
    section = yaml.safe_load((REPO / "config.yaml").read_text())["curvature"]
    assert section["measures"] == ["magarea"] and config_problems(section) == []
    problems = config_problems({**section, "measures": ["gmstds"]})
    assert problems == ["curvature.measures ['gmstds'] must name magarea: Table 1 regresses the "
                        "curvature on MagArea, and on each other measure named there."]


def test_normal_coordinates_keep_the_distance_to_the_centre():
    rng = np.random.default_rng(3)
    flat = sample_disk(0.0, 40, rng)
    np.testing.assert_allclose(cdist(normal_coordinates(flat), normal_coordinates(flat)),
                               geodesic_distances(flat, 0.0), atol=1e-12)
    curved = sample_disk(1.5, 40, rng)
    points = normal_coordinates(curved)
    np.testing.assert_allclose(np.linalg.norm(points, axis=1), curved[:, 0], rtol=1e-12)
    # Between two points of a sphere's cap the chart stretches: geodesics are shorter.
    assert np.all(cdist(points, points) >= geodesic_distances(curved, 1.5) - 1e-12)


def test_cloud_measures_read_points_and_the_engine(plugins):
    mean_nn = get_measure("mean_nn")
    polar = sample_disk(0.0, 30, np.random.default_rng(1))
    values = cloud_measures([mean_nn, get_measure("gmstds"), get_measure("magarea")], polar,
                            t_cut=12.0, mag_area=7.5, where="cloud 4")
    D = geodesic_distances(polar, 0.0)
    np.fill_diagonal(D, np.inf)  # the flat disk's chart is isometric
    assert values["mean_nn"] == pytest.approx(D.min(axis=1).mean(), rel=1e-12)
    assert values["magarea"] == 7.5  # what the engine found for the cloud, read through a view
    assert values["gmstds"] > 0


@pytest.mark.parametrize("spec, message", [
    ("not_finite", r"cloud 7 \(curvature -1\): measure not_finite .* returned nan"),
    ("raises", r"cloud 7 \(curvature -1\): measure raises .* failed: RuntimeError: no value"),
])
def test_a_measure_without_a_value_for_a_cloud_names_both(spec, message):
    measure = load_plugin(f"{TOY}:{spec}")  # not registered: computed all the same
    polar = sample_disk(-1.0, 20, np.random.default_rng(2))
    with pytest.raises(ValueError, match=message):
        cloud_measures([measure], polar, t_cut=1.0, mag_area=1.0,
                       where="cloud 7 (curvature -1)")


def test_a_built_in_measure_that_fails_is_named_with_the_cloud():
    polar = sample_disk(0.5, 10, np.random.default_rng(0))
    polar[3] = 0.0  # the disk's centre: a point of norm 0 has no direction
    with pytest.raises(ValueError, match=r"^cloud 2: measure gmstds_unit failed: .*norm 0"):
        cloud_measures([get_measure("gmstds_unit")], polar, t_cut=1.0, mag_area=1.0,
                       where="cloud 2")


def test_measure_rows_and_their_place_in_table1():
    rng = np.random.default_rng(5)
    curvature = np.repeat(np.linspace(-2, 2, 20), 3)
    values = pd.DataFrame({"gmstds": 3 - 0.4 * curvature + rng.normal(0, 0.01, curvature.size),
                           "vendi": rng.uniform(1, 2, curvature.size)})
    rows = measure_rows(values, curvature, cv_folds=5, piecewise_knots=4, seed=0)
    assert list(rows["method"]) == ["GMStds (piecewise linear)", "Vendi (piecewise linear)"]
    mse = rows.set_index("method")["mse_mean"]
    assert mse["GMStds (piecewise linear)"] < 0.01 < 1 < mse["Vendi (piecewise linear)"]
    magarea = pd.DataFrame({"method": ["MagArea (piecewise linear)", "MagArea (quantile)",
                                       BASELINE_ROW],
                            "mse_mean": [0.1, 0.2, 0.3], "mse_std": [0.01, 0.02, 0.03]})
    table = with_measure_rows(magarea, rows)
    assert list(table["method"]) == ["MagArea (piecewise linear)", "MagArea (quantile)",
                                     "GMStds (piecewise linear)", "Vendi (piecewise linear)",
                                     BASELINE_ROW]
    # A measure with too few distinct values for the knots is refused by name.
    few = pd.DataFrame({"gmstds": np.repeat([1.0, 2.0], 30)})
    with pytest.raises(ValueError, match=r"piecewise_knots \(4\) is too large for the values "
                                         r"of gmstds"):
        measure_rows(few, curvature, cv_folds=5, piecewise_knots=4, seed=0)
