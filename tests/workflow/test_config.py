"""The configuration is checked before any job runs: nested command-line overrides get the
schema's types, and every constraint between keys fails a dry run (`snakemake -n`) with a
message naming the key."""

import json

import pytest
from workflow_runner import REPO, run_snakemake, tiny_config


def _dry_run(tmp_path, target, *config, configfile=None):
    args = ["-n", target, "--config", f"results_dir={tmp_path / 'results'}",
            f"resources_dir={tmp_path / 'resources'}", *config]
    if configfile is not None:
        args = ["--configfile", str(configfile), *args]
    return run_snakemake(*args, "--nolock", check=False)


def test_nested_command_line_values_get_the_schema_types(tmp_path):
    """`--config 'curvature={"n_chunks": 3}'` arrives as the string '3'; it must work as 3."""
    overrides = {"n_points": 60, "n_chunks": 3, "quantile": 0.25, "seed": None}
    done = _dry_run(tmp_path, "curvature", f"curvature={json.dumps(overrides)}",
                    configfile=tiny_config("curvature"))
    assert done.returncode == 0, done.stderr[-3000:]
    for chunk in range(3):  # n_chunks reached the rules as a number
        assert f"chunk{chunk}.npz" in done.stdout
    assert "chunk3.npz" not in done.stdout
    # Booleans and nulls too, and a top-level list.
    done = _dry_run(tmp_path, "graph_mode_collapse",
                    'graphs={"ap_damping": [0.6, 0.8], "proteins": {"sha256": null}}',
                    "experiments=[graph_mode_collapse]",
                    configfile=tiny_config("graph_mode_collapse"))
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_string_where_a_number_belongs_still_fails(tmp_path):
    done = _dry_run(tmp_path, "curvature", 'curvature={"n_points": "sixty"}',
                    configfile=tiny_config("curvature"))
    assert done.returncode != 0
    assert ("curvature.n_points: 'sixty' is a string; allowed: an integer from 3 to 10,000,000"
            in done.stdout + done.stderr)


# Each case: overrides on the tiny configuration of `target`, and the messages (each naming its
# key) the dry run must fail with. The tiny curvature configuration has 11 x 3 = 33 training and
# 6 test clouds; the tiny image one 1 reference and 10 pool images per class.
CASES = {
    "curvature": ("curvature", [
        'curvature={"curvature_min": 2.5, "n_chunks": 40, "cv_folds": 34}',
    ], [
        "curvature.curvature_min (2.5) must be smaller than curvature.curvature_max (2.0)",
        "curvature.n_chunks (40) exceeds the number of clouds, 39",
        "curvature.cv_folds (34) exceeds the 33 training clouds",
    ]),
    "sensitivity": ("curvature", [
        'curvature={"n_test_clouds": 3, "sensitivity": {"t_cut_min": 400, "spread_curvatures": '
        '[4, 12], "grid": {"t_first": 2000}}}',
    ], [
        "curvature.sensitivity.t_cut_min (400.0) must be smaller than "
        "curvature.sensitivity.t_cut_max (300.0)",
        "curvature.sensitivity.grid.t_first (2000.0) must be smaller than "
        "curvature.sensitivity.grid.t_max (1280.0)",
        "curvature.sensitivity.spread_curvatures: a design of 4 curvatures needs at least "
        "curvature.cv_folds = 5",
        "curvature.sensitivity.spread_curvatures: a design of 12 curvatures",
        "curvature.n_test_clouds (3) is below curvature.cv_folds (5)",
    ]),
    "grid": ("curvature", ['curvature={"sensitivity": {"t_cut_max": 2000}}'], [
        "curvature.sensitivity.t_cut_max (2000.0) lies beyond the scale grid",
    ]),
    "knots": ("curvature", ['curvature={"piecewise_knots": 100}'], [
        "curvature.piecewise_knots (100) is too large for the data: the smallest training fold "
        "holds 26 clouds",
    ]),
    "images": ("image_mode_dropping", ['images={"k": 10, "n_pool_per_class": 9}'], [
        "images.k (10) must be smaller than the number of images in a set, 10",
        "images.n_pool_per_class (9) must be at least 10",
    ]),
    "image pool": ("image_mode_dropping",
                   ['images={"split": "test", "n_reference_per_class": 100, '
                    '"n_pool_per_class": 1000}'], [
        "images.n_reference_per_class + images.n_pool_per_class (100 + 1000) exceeds the 1000 "
        "images per class of fashion_mnist (images.split = test)",
    ]),
    "graphs": ("graph_mode_collapse", [
        'graphs={"figure_dataset": "grid", "k": 15, "lobster": {"min_nodes": 50, '
        '"max_nodes": 40}, "grid": {"lower": 5, "upper": 4}, '
        '"community": {"min_size": 9, "max_size": 8}}',
    ], [
        "graphs.figure_dataset (grid) is not among graphs.datasets",
        "graphs.lobster.min_nodes (50) exceeds graphs.lobster.max_nodes (40)",
        "graphs.grid.lower (5) exceeds graphs.grid.upper (4)",
        "graphs.community.min_size (9) exceeds graphs.community.max_size (8)",
        "graphs.k (15) must be smaller than the 15 graphs of the reference half of lobster",
    ]),
    "graphs zinc": ("graph_mode_collapse", ['graphs={"k": 14, "zinc": {"n_graphs": 28}}'], [
        "graphs.k (14) must be smaller than the 14 graphs of the reference half of zinc",
    ]),
    "seeds": ("axioms", ["seed=-1"], ["seed: -1 is not allowed; allowed: an integer from 0 to "
                                      "4,294,967,295"]),
    "text": ("text_temperature", [
        'text={"figure_task": "story", "tasks": ["resp"], "ranking_measures": ["mag_area", '
        '"vendi"], "measures": ["mag_area", "avg_sim"], "cv_folds": 5, '
        '"design": "grid", '
        '"generation": {"n_chunks": 2, "grid": {"n_prompts": 1, "temperatures": [0.5, 1.0]}}}',
    ], [
        "text.figure_task (story) is not among text.tasks ['resp']",
        "text.ranking_measures ['mag_area', 'vendi'] must be among text.measures",
        "text.generation.n_chunks (2) exceeds text.generation.grid.n_prompts (1)",
        "text.cv_folds (5) needs at least 10 sets per task; text.generation.grid.n_prompts x "
        "temperatures gives 2",
    ]),
    "text dectest": ("text_temperature", [
        'text={"cv_folds": 4, "generation": {"n_chunks": 9, "dectest": {"n_sets": 7, '
        '"temperature_min": 1.5, "pilot_temperature_max": 1.2}}}',
    ], [
        "text.generation.dectest.temperature_min (1.5) must be below pilot_temperature_max (1.2)",
        "text.generation.n_chunks (9) exceeds text.generation.dectest.n_sets (7)",
        "text.cv_folds (4) needs at least 8 sets per task; text.generation.dectest.n_sets gives 7",
    ]),
    "models": ("model_distinguishing", [
        'models={"figure_collection": "foldoc", "subsample_size": 61, "k": 40, "ks": [1, 50]}',
    ], [
        "models.figure_collection (foldoc) is not among models.collections ['jargon', 'fortunes']",
        "models.subsample_size (61) exceeds models.n_documents (60)",
        "models.k (40) exceeds the 24 training subsamples of a cross-validation fold",
        "models.ks (50) exceeds the 24 training subsamples",
    ]),
    "model folds": ("model_distinguishing", ['models={"cv_folds": 13}'], [
        "models.cv_folds (13) exceeds models.n_subsamples (12)",
    ]),
    # Every section's device, by name (a GPU, by the job: it may be on the job's node).
    "devices": ("image_mode_dropping", ['images={"device": "gpu"}', 'text={"device": "cuda:x"}',
                                        'models={"device": "cuda:1"}'], [
        "images.device: unknown device 'gpu'; the devices are cpu, auto, cuda, cuda:N, "
        "torch:cpu (N = 0, 1, ...).",
        "text.device: unknown device 'cuda:x'",
    ]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cross_key_constraints_fail_the_dry_run(case, tmp_path):
    target, overrides, messages = CASES[case]
    done = _dry_run(tmp_path, target, *overrides, configfile=tiny_config(target))
    assert done.returncode != 0, done.stdout[-2000:]
    for message in messages:
        assert message in done.stdout + done.stderr, (message, done.stdout[-3000:])
    assert "models.device" not in done.stdout + done.stderr  # cuda:1 is a name of the table


def test_strict_assets_refuses_unpinned_assets_before_any_job(tmp_path):
    """`--config strict_assets=true`: the default configuration (every asset pinned) plans its
    jobs; the paper's text configuration (a release without published checksum, hub models
    without file checksums) stops before any job, naming each asset and its configuration key."""
    done = _dry_run(tmp_path, "curvature", "strict_assets=true",
                    configfile=tiny_config("curvature"))
    assert done.returncode == 0, done.stderr[-3000:]
    paper = REPO / "configs" / "paper_text_temperature.yaml"
    done = _dry_run(tmp_path, "text_temperature", "strict_assets=true", configfile=paper)
    message = done.stdout + done.stderr
    assert done.returncode != 0
    assert ("Tevet & Berant's release (text.tevet_berant): no checksum is pinned (sha256 is "
            "null)") in message
    assert ("text model all-distilroberta-v1 (text_assets.models.all-distilroberta-v1): "
            "revision 'main'") in message
    # One line per asset, like every other refusal of the configuration: no traceback.
    assert "Traceback" not in message and "common.smk, line" not in message
    assert "strict_assets: true refuses it before fetching" in message
    # Not strict (the default): the same configuration plans its jobs.
    done = _dry_run(tmp_path, "text_temperature", configfile=paper)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("override, message", [
    ('measures={"plugins": ["tests.support.toy_measures:magarea"]}',
     "measures.plugins: measure plugin tests.support.toy_measures:magarea: the name 'magarea' is "
     "taken by a built-in measure; rename it."),
    ('measures={"plugins": ["tests.support.toy_measures:two_sets"]}',
     "measures.plugins: measure plugin tests.support.toy_measures:two_sets: two_sets's compute "
     "cannot be called as compute(X, reference)"),
    ('measures={"plugins": ["no_such_module:f"]}',
     "measures.plugins: measure plugin no_such_module:f: module no_such_module does not import"),
    ('images={"metrics": ["recall", "renyi"]}',
     "images.metrics ['recall', 'renyi']: unknown measure 'renyi'; known: magarea"),
    ('curvature={"measures": ["magarea", "magdiff"]}',
     "curvature.measures ['magarea', 'magdiff']: measures magdiff do not fit this experiment's "
     "protocol"),
    ('curvature={"measures": ["vendi"]}', "curvature.measures ['vendi'] must name magarea"),
])
def test_measures_are_checked_against_the_registry_when_the_configuration_is_read(
        override, message, tmp_path):
    """A measure plugin that cannot join, or a name the registry does not hold, fails the dry
    run in one line naming the key (no enum of names in the schema)."""
    done = _dry_run(tmp_path, "image_mode_dropping", override,
                    configfile=tiny_config("image_mode_dropping"))
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if message in line]
    assert len(lines) == 1, done.stderr[-3000:]
