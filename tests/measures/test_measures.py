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
    assert list(MEASURES) == get_measure_names(defaults=False)
    assert set(cli_options.ALIASES["prdc"]) | set(cli_options.ALIASES["mmd"]) <= set(
        get_measure_names(needs_reference=True))
    assert cli_options.parse_metrics(None, has_reference=True) == get_measure_names()
    assert not hasattr(compare_report, "LABELS") and "LABELS" not in comparison.__all__
    assert LABELS["magarea"] == "MagArea"
    assert get_measure("avgsim").higher_is_more_diverse is False  # a similarity
    assert get_measure("mag_area") is MEASURES["magarea"]  # its column: the text tables'
    with pytest.raises(ValueError, match="unknown measure 'mag area'; known: magarea"):
        get_measure("mag area")


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
    for name in tt.MEASURES:  # the text tables' spelling: each measure's column
        assert get_measure(name).column == name
        assert tt.MEASURE_LABELS[name] == get_measure(name).in_paper
    assert tt.MEASURE_LABELS["vendi"] == md.MEASURE_LABELS["vendi"] == "VS"


def test_the_registry_computes_each_measure_of_one_set():
    """Each measure is a callable (how it is computed is the registry's): the same numbers as
    the functions it wraps, only the options it names passed on, the PRDC family in one call."""
    from diversity_core.measures import baselines, reference_based
    from diversity_core.measures.registry import NEEDS, prdc_values

    rng = np.random.default_rng(1)
    X, R = rng.normal(size=(30, 5)), rng.normal(size=(40, 5))
    assert MEASURES["vendi"](X, tau=9.0, k=3) == baselines.vendi_score(X, metric="cosine")
    assert MEASURES["dcscore"](X, tau=0.5) == baselines.dc_score(X, tau=0.5, kernel="cosine")
    assert MEASURES["dcscore"](X) == baselines.dc_score(X)
    assert MEASURES["gmstds"](X) == baselines.gm_stds(X)
    assert MEASURES["mmd_rbf"](X, R) == reference_based.mmd_rbf(X, R)
    together = prdc_values(X, R, k=3)
    assert together == reference_based.prdc(R, X, 3)  # real = the reference, fake = X
    assert [MEASURES[m](X, R, k=3) for m in together] == list(together.values())
    assert {m.group for m in MEASURES.values() if m.group} == {"prdc"}
    for m in MEASURES.values():
        assert set(m.needs) <= set(NEEDS) and ("reference" in m.needs) == m.needs_reference
        assert m.compute is not None and (m.scale is not None) == ("scale" in m.needs)
    with pytest.raises(ValueError, match="magarea needs a scale chosen across sets"):
        MEASURES["magarea"](X)
    with pytest.raises(ValueError, match="recall compares a set with a reference; none given"):
        MEASURES["recall"](X)
