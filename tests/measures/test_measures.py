"""The registry of measures (diversity_core.measures): one name per measure from the command line
to compare's columns and report."""

import numpy as np
import pytest

import diversity_core as dc
from diversity_core.cli import options as cli_options
from diversity_core.comparison import protocol as comparison
from diversity_core.comparison import report as compare_report
from diversity_core.measures.registry import LABELS, MEASURES, get_measure, get_measure_names


def test_every_reader_takes_its_names_and_labels_from_the_registry():
    assert list(cli_options.METRICS) == list(MEASURES) == get_measure_names()
    assert {name for name, (_, ref) in cli_options.METRICS.items() if ref} == set(
        get_measure_names(needs_reference=True))
    assert comparison.LABELS is LABELS and compare_report.LABELS is LABELS
    assert comparison.FREE_MEASURES == tuple(get_measure_names(needs_reference=False))
    assert get_measure("avgsim").higher_is_more_diverse is False  # a similarity
    with pytest.raises(ValueError, match="unknown measure 'mag_area'; known: magarea"):
        get_measure("mag_area")


def test_compare_columns_are_the_registry_names():
    rng = np.random.default_rng(0)
    sets = {"a": rng.normal(size=(20, 4)), "b": rng.normal(size=(25, 4))}
    result = dc.compare(sets, rng.normal(size=(30, 4)), metric="euclidean")
    measured = [c for c in result.table.columns if c in MEASURES]
    assert measured == [n for n in get_measure_names() if n in result.table.columns]
    assert set(get_measure_names(needs_reference=False)) <= set(measured)


def test_the_experiments_read_names_and_paper_labels_from_the_registry():
    """The text and model experiments' measure tables come from the registry: names (under the
    text experiment's declared spelling) and the paper's labels (the Vendi Score is VS in the
    paper's Figure 3 and Table 2, and so in the committed tables and figures)."""
    from diversity_core.experiments import model_distinguishing as md
    from diversity_core.experiments import text_temperature as tt

    assert get_measure("vendi").in_paper == "VS" and get_measure("vendi").label == "Vendi"
    assert get_measure("magarea").in_paper == "MagArea"  # no paper label: the label
    assert md.MEASURE_LABELS == {m: get_measure(m).in_paper for m in md.MEASURES}
    assert md.SCALAR_MEASURES == tuple(get_measure_names(needs_reference=False))
    for name, registered in tt.REGISTRY_NAMES.items():
        assert tt.MEASURE_LABELS[name].startswith(get_measure(registered).in_paper)
    assert tt.MEASURE_LABELS["vendi"] == md.MEASURE_LABELS["vendi"] == "VS"
