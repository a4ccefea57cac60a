"""A measure from outside the package (tests/support/toy_measures.py) joins the registry and,
through it, every protocol that fits; a bad one is refused in one line, a failing one reported
for its set; a measure added to the registry needs no other edit."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import diversity_core as dc
from diversity_core.measures import registry

REPO = Path(__file__).resolve().parents[2]
TOY = "tests.support.toy_measures"


@pytest.fixture
def clean_registry(monkeypatch):
    """The registry as built again after the test, whatever it registers (the one table, which
    every reader holds, emptied and refilled in place)."""
    saved = dict(registry.MEASURES)
    monkeypatch.setattr(registry, "_USED", set())
    yield registry
    registry.MEASURES.clear()
    registry.MEASURES.update(saved)


def test_plugins_join_every_protocol_that_fits(clean_registry):
    from diversity_core.experiments import axioms, graph_analysis, image_mode_dropping
    from diversity_core.experiments import model_distinguishing as md
    from diversity_core.experiments import text_temperature as tt
    from diversity_core.reporting.figure_style import DEFAULT_PALETTE, MEASURE_COLOURS

    free, against = clean_registry.register_plugins(
        [f"{TOY}:mean_nn", f"{TOY}:NN_TO_REFERENCE"], entry_points=False)
    assert (free.name, free.label, free.needs_reference) == ("mean_nn", "Mean NN distance", False)
    assert against.needs_reference and against.file.endswith("toy_measures.py")
    assert tt.configured_measures({"measures": list(tt.MEASURES)})[-1] == "mean_nn"
    assert image_mode_dropping.configured_measures({"metrics": ["recall"]}) == [
        "recall", "mean_nn", "nn_to_reference"]
    assert md.measures()[-1] == "mean_nn" and "nn_to_reference" not in md.measures()
    assert [m.name for m in axioms.default_measures()][-1] == free.description
    assert graph_analysis.measure_names()[-1] == "nn_to_reference"
    assert MEASURE_COLOURS["mean_nn"] in DEFAULT_PALETTE
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(12, 4)) for _ in range(3)]
    scores, _ = tt.score_sets(sets, measures=["vendi"])
    assert list(scores) == ["vendi", "mean_nn", "t_conv"]
    assert scores["mean_nn"][0] == pytest.approx(_mean_nn(sets[0]))
    table = dc.compare({"a": sets[0], "b": sets[1]}, sets[2]).table
    assert table.loc["a", "mean_nn"] == pytest.approx(_mean_nn(sets[0]))
    assert np.isfinite(table.loc["a", "nn_to_reference"])
    assert clean_registry.plugin_files() == [free.file]  # each ran: both from one file


def _mean_nn(X):
    D = np.linalg.norm(X[:, None] - X[None], axis=2)
    np.fill_diagonal(D, np.inf)
    return D.min(axis=1).mean()


@pytest.mark.parametrize("spec, message", [
    ("no_such_module:f", "module no_such_module does not import"),
    (f"{TOY}:absent", "has no absent"),
    (f"{TOY}:two_sets", r"cannot be called as compute\(X, reference\)"),
    (f"{TOY}:magarea", "the name 'magarea' is taken by a built-in measure"),
    ("no colon", "write it as package.module:OBJECT"),
])
def test_a_bad_plugin_is_refused_in_one_line(clean_registry, spec, message):
    with pytest.raises(registry.PluginError, match=message) as err:
        clean_registry.register_plugins([spec], entry_points=False)
    assert "\n" not in str(err.value)


def test_a_failing_plugin_is_reported_for_its_set(clean_registry):
    from diversity_core.experiments import text_temperature as tt

    clean_registry.register_plugins([f"{TOY}:not_finite", f"{TOY}:raises"], entry_points=False)
    sets = [np.random.default_rng(i).normal(size=(8, 3)) for i in range(2)]
    with pytest.raises(ValueError, match=r"set 0: measure not_finite .* returned nan"):
        tt.score_sets(sets, measures=["vendi"])
    result = dc.compare({"a": sets[0], "b": sets[1]}, measures=["raises", "vendi"])
    assert np.isnan(result.table.loc["b", "raises"]) and np.isfinite(result.table["vendi"]).all()
    assert re.search(r"b: measure raises .*RuntimeError: no value for this set",
                     result.undefined["b"]["raises"])


def test_a_measure_added_to_the_registry_needs_no_other_edit(clean_registry):
    """Registered once (here in the built-in table's place), a measure is in every experiment's
    list, has a figure colour and passes the configuration check: no second table to edit."""
    from diversity_core.experiments import axioms, graph_analysis, image_mode_dropping
    from diversity_core.experiments import model_distinguishing as md
    from diversity_core.experiments import text_temperature as tt
    from diversity_core.reporting.figure_style import MEASURE_COLOURS

    def spread(X) -> float:
        return float(np.ptp(X))

    def gap(X, reference) -> float:
        return float(abs(X.mean() - reference.mean()))

    clean_registry.register(registry.Measure("spread", "Spread", "range of X", False, True,
                                             compute=spread))
    clean_registry.register(registry.Measure("gap", "Gap", "gap of means", True, None,
                                             needs=frozenset({"reference"}), compute=gap,
                                             higher_is_closer=False))
    clean_registry.register(registry.Measure("overlap", "Overlap", "overlap", True, None,
                                             needs=frozenset({"reference"}), compute=gap,
                                             higher_is_closer=True))
    # The configuration lists name the paper's measures; the new ones join after them.
    assert "spread" in md.measures()
    assert tt.configured_measures({"measures": ["mag_area"]}) == ["mag_area", "spread"]
    assert "range of X" in [m.name for m in axioms.default_measures()]
    assert {"gap", "overlap"} <= set(graph_analysis.measure_names())
    assert "overlap" in graph_analysis.flipped_measures()  # rises with closeness: flipped
    assert "gap" not in graph_analysis.flipped_measures()  # a distance: rises as it is
    assert image_mode_dropping.configured_measures({"metrics": ["magdiff"]}) == [
        "magdiff", "spread", "gap", "overlap"]
    assert isinstance(MEASURE_COLOURS["spread"], str)
    rng = np.random.default_rng(3)
    summary = md.summarise_sets([rng.normal(size=(15, 3)) for _ in range(4)],
                                dc.MagnitudeSettings(), metric="euclidean")
    assert summary["spread"].shape == (4,) and np.isfinite(summary["spread"]).all()


def test_the_command_line_takes_a_plugin_and_refuses_a_bad_one(tmp_path):
    X = np.random.default_rng(0).normal(size=(20, 4))
    np.save(tmp_path / "x.npy", X)
    command = [sys.executable, "-m", "diversity_core", "score", str(tmp_path / "x.npy"),
               "--json", "--metrics", "vendi,mean_nn", "--plugin", f"{TOY}:mean_nn"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)["scores"]["embeddings"]
    assert scores["mean_nn"] == pytest.approx(_mean_nn(X))
    bad = subprocess.run(command[:-1] + [f"{TOY}:two_sets"], cwd=REPO, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "argument --plugin: measure plugin" in bad.stderr


def test_an_edited_plugin_makes_its_results_stale(tmp_path, clean_registry, monkeypatch):
    from diversity_core.provenance.audit import audit
    from diversity_core.provenance.digests import Hasher
    from diversity_core.provenance.records import Roots, write_records

    plugin = tmp_path / "work" / "my_plugin.py"
    plugin.parent.mkdir()
    plugin.write_text("def wide(X):\n    return float(X.max() - X.min())\n")
    monkeypatch.syspath_prepend(str(plugin.parent))
    clean_registry.register_plugins(["my_plugin:wide"], entry_points=False)
    clean_registry.get_measure("wide")(np.arange(6.0).reshape(3, 2))
    results = tmp_path / "work" / "results"
    results.mkdir()
    (results / "table.csv").write_text("measure,value\nwide,5\n")
    script = tmp_path / "work" / "script.py"
    script.write_text("# the rule's script\n")
    roots = Roots.of(results, tmp_path / "work" / "resources", tmp_path / "work")
    write_records({"table": [results / "table.csv"]}, {}, roots=roots, hasher=Hasher(),
                  rule="r", script=script, measures=clean_registry.plugin_files())
    where = {"resources_dir": roots.resources, "workdir": roots.workdir}
    assert audit(results, **where).code_changed == {}
    plugin.write_text("def wide(X):\n    return float(X.std())\n")
    changed = audit(results, **where).code_changed
    assert list(changed.values()) == [("workdir", "my_plugin.py")]


def test_the_manual_page_example_runs():
    """docs/add_a_measure.md's python block, as a reader copies it (a fresh process)."""
    page = (REPO / "docs" / "add_a_measure.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) == 1 and len(blocks[0].splitlines()) < 30
    done = subprocess.run([sys.executable, "-c", blocks[0]], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert "mean_nn" in done.stdout and "narrow" in done.stdout
