"""End to end: measures from a module outside the package (tests/support/toy_measures.py),
enabled only through the configuration's ``measures.plugins``, run through every tiny experiment
whose protocol fits them and appear in its tables beside the built-in measures, with their
module's digest in the provenance records; no file of the project changes."""

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_runner import REPO, run_snakemake, tiny_config

pytestmark = pytest.mark.slow

PLUGINS = ["tests.support.toy_measures:mean_nn", "tests.support.toy_measures:NN_TO_REFERENCE"]
FREE, AGAINST, LABEL = "mean_nn", "nn_to_reference", "Mean NN distance"

# experiment -> (table, its measure column, the plugins' names in it)
TABLES = {
    "axioms": ("axioms/axioms.csv", "measure", {LABEL}),
    "image_mode_dropping": ("images/mode_dropping.csv", "metric", {FREE, AGAINST}),
    "model_distinguishing": ("models/table2.csv", "measure", {LABEL}),
    "graph_mode_collapse": ("graphs/summary.csv", "metric", {AGAINST}),
    "text_temperature": ("text/r2_scores.csv", "measure", {FREE}),
    "curvature": ("curvature/table1.csv", "method", {f"{LABEL} (piecewise linear)"}),
}


def _status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


# The jobs of each experiment that compute measures. A plugin's run starts from a copy of the
# shared tiny run's results (timestamps kept) and makes these jobs again, and what reads them
# after: the data, embeddings and graphs before them are the same and not made twice.
SCORING = {
    "axioms": ["axioms_check"],
    "image_mode_dropping": ["images_scores"],
    "model_distinguishing": ["models_scores", "models_stability"],
    "graph_mode_collapse": ["graphs_evaluate"],
    "text_temperature": ["text_scores", "text_stability_scores"],
    "curvature": ["curvature_measures", "curvature_measures_table"],
}


@pytest.fixture(scope="module")
def plugin_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plugins") / "plugins.yaml"
    path.write_text(yaml.safe_dump({"measures": {"plugins": PLUGINS}}))
    return path


# The experiments whose plugin runs take longest go to the extended tier; each kind of plugin
# (a set alone, against a reference, a label in a table) still runs in the default suite.
EXTENDED = {"model_distinguishing", "graph_mode_collapse"}


@pytest.mark.parametrize("experiment", [
    pytest.param(e, marks=pytest.mark.extended) if e in EXTENDED else e for e in TABLES])
def test_a_plugin_runs_through_the_experiment(experiment, plugin_config, tiny_runs, tmp_path):
    shared = tiny_runs(experiment)
    before = _status()
    shutil.copytree(shared / "results", tmp_path / "results", symlinks=True)
    run_snakemake(experiment, "--configfile", str(tiny_config(experiment)), str(plugin_config),
                  "--config", f"results_dir={tmp_path / 'results'}",
                  f"resources_dir={tiny_runs.resources}", "--forcerun", *SCORING[experiment])
    assert _status() == before  # no file of the project changed
    table, column, names = TABLES[experiment]
    path = tmp_path / "results" / table
    found = set(pd.read_csv(path)[column])
    assert names <= found and len(found) > len(names)  # beside the built-in measures
    # The records of the files whose jobs computed a plugin name its module, with its digest.
    records = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("*.provenance.json")]
    touched = [r["measures"] for r in records if r.get("measures")]
    assert touched and all([e["path"] for e in entries] == ["tests/support/toy_measures.py"]
                           for entries in touched)
