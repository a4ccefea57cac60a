# Helpers shared by every workflow file: the configuration's types and cross-key checks (used by
# the Snakefile around `validate`), paths, seeds and the per-experiment target list.

import math
import os
import re
import sys
from pathlib import Path

import yaml

CONFIG_SCHEMA_FILE = "workflow/schemas/config.schema.yaml"


def coerce_config_types(config, schema_file=CONFIG_SCHEMA_FILE):
    """Give nested command-line values the types the schema declares, in place.

    Snakemake parses a top-level `--config seed=3` as a number, but the values inside
    `--config 'curvature={"n_points": 60}'` arrive as strings ('60'), which `validate` rejects.
    A YAML null literal becomes None wherever the schema allows null; every other string whose
    schema node allows no string (only integer / number / boolean) is converted to the first of
    those types it parses as; anything else is left for `validate` to report. Driven by the
    schema alone, so a new key needs no code here.
    """
    with open(Path(workflow.basedir) / schema_file) as stream:
        schema = yaml.safe_load(stream)
    config.update(_coerced(dict(config), schema))


def _coerced(value, node):
    if isinstance(value, dict):
        extra = node.get("additionalProperties")
        children = node.get("properties", {})
        return {key: _coerced(item, children.get(key, extra if isinstance(extra, dict) else {}))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_coerced(item, node.get("items", {})) for item in value]
    if not isinstance(value, str):
        return value
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    text = value.strip()
    if "null" in types and text in ("null", "Null", "NULL", "~"):  # YAML's null, even for
        return None  # [string, "null"]: no checksum or name is spelt "null"
    if not types or "string" in types:
        return value
    for kind in types:
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind == "integer" and re.fullmatch(r"[-+]?[0-9]+", text):
            return int(text)
        if kind == "number":
            try:
                number = float(text)
            except ValueError:
                continue
            if math.isfinite(number):
                return number
    return value


# Images per class in each data set's splits (the pool and reference are drawn within a class).
IMAGES_PER_CLASS = {"fashion_mnist": {"train": 6000, "test": 1000},
                    "cifar10": {"train": 5000, "test": 1000}}
IMAGE_CLASSES = 10
# Graphs in the datasets whose size the configuration fixes (the downloaded ones are checked
# when they are read).
FIXED_GRAPH_COUNTS = {"mutag": 188, "cuneiform": 267}
# The piecewise-linear fit of Table 1 needs at least this many training clouds per knot
# interval (diversity_core.experiments.curvature.MIN_CLOUDS_PER_KNOT_INTERVAL).
MIN_CLOUDS_PER_KNOT_INTERVAL = 4


def check_config(config):
    """Constraints between keys that the schema cannot express, checked before any job runs.

    Raises ValueError listing every violation, each naming its key; a violation would
    otherwise fail a job mid-pipeline with a library message that names no key, or not at all.
    """
    problems = []
    curv = config["curvature"]
    if not curv["curvature_min"] < curv["curvature_max"]:
        problems.append(
            f"curvature.curvature_min ({curv['curvature_min']}) must be smaller than "
            f"curvature.curvature_max ({curv['curvature_max']}).")
    n_train = curv["n_train_curvatures"] * curv["clouds_per_curvature"]
    n_clouds = n_train + curv["n_test_clouds"]
    train_sum = (f"curvature.n_train_curvatures x curvature.clouds_per_curvature = "
                 f"{curv['n_train_curvatures']} x {curv['clouds_per_curvature']}")
    if curv["n_chunks"] > n_clouds:
        problems.append(
            f"curvature.n_chunks ({curv['n_chunks']}) exceeds the number of clouds, {n_clouds} "
            f"({train_sum}, plus curvature.n_test_clouds = {curv['n_test_clouds']}): a job "
            "would get no cloud.")
    if curv["cv_folds"] > n_train:
        problems.append(
            f"curvature.cv_folds ({curv['cv_folds']}) exceeds the {n_train} training clouds "
            f"({train_sum}).")
    else:
        fold = n_train - math.ceil(n_train / curv["cv_folds"])
        most = 1 + fold // MIN_CLOUDS_PER_KNOT_INTERVAL
        if curv["piecewise_knots"] > most:
            problems.append(
                f"curvature.piecewise_knots ({curv['piecewise_knots']}) is too large for the "
                f"data: the smallest training fold holds {fold} clouds ({n_train} training "
                f"clouds, curvature.cv_folds = {curv['cv_folds']}), and at most {most} knots "
                f"leave {MIN_CLOUDS_PER_KNOT_INTERVAL} clouds per linear piece.")

    study = curv["sensitivity"]
    if not study["t_cut_min"] < study["t_cut_max"]:
        problems.append(
            f"curvature.sensitivity.t_cut_min ({study['t_cut_min']}) must be smaller than "
            f"curvature.sensitivity.t_cut_max ({study['t_cut_max']}).")
    grid = study["grid"]
    if not grid["t_first"] < grid["t_max"]:
        problems.append(
            f"curvature.sensitivity.grid.t_first ({grid['t_first']}) must be smaller than "
            f"curvature.sensitivity.grid.t_max ({grid['t_max']}).")
    if study["t_cut_max"] > grid["t_max"]:
        problems.append(
            f"curvature.sensitivity.t_cut_max ({study['t_cut_max']}) lies beyond the scale grid: "
            f"raise curvature.sensitivity.grid.t_max ({grid['t_max']}).")
    for count in study["spread_curvatures"]:
        if not curv["cv_folds"] <= count <= curv["n_train_curvatures"]:
            problems.append(
                f"curvature.sensitivity.spread_curvatures: a design of {count} curvatures needs "
                f"at least curvature.cv_folds = {curv['cv_folds']} and at most "
                f"curvature.n_train_curvatures = {curv['n_train_curvatures']}.")
    if 0 < curv["n_test_clouds"] < curv["cv_folds"]:
        problems.append(
            f"curvature.n_test_clouds ({curv['n_test_clouds']}) is below curvature.cv_folds "
            f"({curv['cv_folds']}): the sensitivity study cross-validates on the test clouds "
            "too (use 0 or at least as many as folds).")

    img = config["images"]
    set_size = img["n_reference_per_class"] * IMAGE_CLASSES
    if img["k"] >= set_size:
        problems.append(
            f"images.k ({img['k']}) must be smaller than the number of images in a set, "
            f"{set_size} (images.n_reference_per_class = {img['n_reference_per_class']} x "
            f"{IMAGE_CLASSES} classes): PRDC needs a k-th neighbour besides the point itself.")
    moved = min(round(max(img["fractions"]) * set_size),
                img["n_reference_per_class"] * (IMAGE_CLASSES - 1))
    need = img["n_reference_per_class"] + moved
    if img["n_pool_per_class"] < need:
        problems.append(
            f"images.n_pool_per_class ({img['n_pool_per_class']}) must be at least {need}: at "
            f"the largest of images.fractions ({max(img['fractions'])}) the preferred class "
            f"supplies {need} images of a set of {set_size}.")
    available = IMAGES_PER_CLASS[img["dataset"]][img["split"]]
    if img["n_reference_per_class"] + img["n_pool_per_class"] > available:
        problems.append(
            f"images.n_reference_per_class + images.n_pool_per_class "
            f"({img['n_reference_per_class']} + {img['n_pool_per_class']}) exceeds the "
            f"{available} images per class of {img['dataset']} (images.split = {img['split']}).")

    graphs = config["graphs"]
    if graphs["figure_dataset"] not in graphs["datasets"]:
        problems.append(
            f"graphs.figure_dataset ({graphs['figure_dataset']}) is not among graphs.datasets "
            f"{graphs['datasets']}.")
    for section, low, high in (("lobster", "min_nodes", "max_nodes"), ("grid", "lower", "upper"),
                               ("community", "min_size", "max_size"),
                               ("proteins", "min_nodes", "max_nodes"),
                               ("ego", "min_nodes", "max_nodes")):
        options = graphs[section]
        if options[low] > options[high]:
            problems.append(f"graphs.{section}.{low} ({options[low]}) exceeds "
                            f"graphs.{section}.{high} ({options[high]}).")
    counts = dict(FIXED_GRAPH_COUNTS, lobster=graphs["lobster"]["n_graphs"],
                  community=graphs["community"]["n_graphs"],
                  grid=max(0, graphs["grid"]["upper"] - graphs["grid"]["lower"] + 1) ** 2)
    for name in graphs["datasets"]:
        half = counts.get(name, math.inf) // 2
        if graphs["k"] >= half:
            problems.append(
                f"graphs.k ({graphs['k']}) must be smaller than the {half} graphs of the "
                f"reference half of {name}: PRDC needs a k-th neighbour besides the graph itself.")
    text = config["text"]
    for key, among in (("figure_task", "tasks"), ("figure_model", "models")):
        if text[key] not in text[among]:
            problems.append(f"text.{key} ({text[key]}) is not among text.{among} {text[among]}.")
    if not set(text["ranking_measures"]) <= set(text["measures"]):
        problems.append(f"text.ranking_measures {text['ranking_measures']} must be among "
                        f"text.measures {text['measures']}.")
    if text["data"] == "generated":
        gen = text["generation"]
        if gen["n_chunks"] > gen["prompts_per_task"]:
            problems.append(
                f"text.generation.n_chunks ({gen['n_chunks']}) exceeds "
                f"text.generation.prompts_per_task ({gen['prompts_per_task']}): a job would get "
                "no prompt.")
        n_sets = gen["prompts_per_task"] * len(gen["temperatures"])
        if 2 * text["cv_folds"] > n_sets:
            problems.append(
                f"text.cv_folds ({text['cv_folds']}) needs at least {2 * text['cv_folds']} sets "
                f"per task; text.generation.prompts_per_task x temperatures gives {n_sets}.")
    mod = config["models"]
    if mod["figure_collection"] not in mod["collections"]:
        problems.append(f"models.figure_collection ({mod['figure_collection']}) is not among "
                        f"models.collections {mod['collections']}.")
    if mod["subsample_size"] > mod["n_documents"]:
        problems.append(f"models.subsample_size ({mod['subsample_size']}) exceeds "
                        f"models.n_documents ({mod['n_documents']}).")
    if mod["cv_folds"] > mod["n_subsamples"]:
        problems.append(f"models.cv_folds ({mod['cv_folds']}) exceeds models.n_subsamples "
                        f"({mod['n_subsamples']}): a stratified fold needs a subsample of every "
                        "model.")
    else:
        # The smallest training part of a stratified split: (folds - 1) / folds of each model's
        # subsamples, rounded down.
        train = len(mod["models"]) * (mod["n_subsamples"] * (mod["cv_folds"] - 1)
                                      // mod["cv_folds"])
        for key, k in [("k", mod["k"])] + [("ks", k) for k in mod["ks"]]:
            if k > train:
                problems.append(f"models.{key} ({k}) exceeds the {train} training subsamples of "
                                f"a cross-validation fold (models.n_subsamples x models x "
                                f"(cv_folds - 1) / cv_folds).")
    if problems:
        raise ValueError("invalid configuration:\n  " + "\n  ".join(problems))


def check_assets(config):
    """strict_assets: true refuses, before any job runs, every asset the configuration selects
    that is not pinned, naming each with its configuration key and what is missing; the rule
    scripts inherit strict mode (DIVERSITY_CORE_STRICT_ASSETS) so that no fetch takes an
    unpinned file on trust either."""
    if not config.get("strict_assets"):
        return
    if workflow.basedir not in sys.path:  # the package of this checkout, installed or not
        sys.path.insert(0, workflow.basedir)
    from diversity_core.assets.pins import STRICT_ENV, unpinned_assets

    os.environ[STRICT_ENV] = "1"
    found = unpinned_assets(config)
    if found:
        raise ValueError(
            "strict_assets: true refuses these unpinned assets before fetching them:\n  "
            + "\n  ".join(f"{asset} ({key}): {problem}" for asset, key, problem in found)
            + "\nPin each under its configuration key (docs/assets.md), or run without "
            "strict_assets.")


RESULTS = Path(config["results_dir"])
RESOURCES = Path(config["resources_dir"])


def results(experiment, *parts):
    """A final artifact: committed for the default configuration."""
    return str(RESULTS.joinpath(experiment, *parts))


def interim(experiment, *parts):
    """An intermediate artifact: kept on disk for auditing, git-ignored."""
    return str(RESULTS.joinpath(experiment, "interim", *parts))


def logs(experiment, name):
    return str(RESULTS.joinpath(experiment, "logs", f"{name}.log"))


def bench(experiment, name):
    return str(RESULTS.joinpath(experiment, "benchmarks", f"{name}.tsv"))


def text_corpus_dir(name):
    """Folder of a text corpus (rule text_fetch_corpus, workflow/rules/text_assets.smk)."""
    return str(RESOURCES / "text" / "corpora" / name)


def text_model_dir(name):
    """Folder of a sentence embedding model (rule text_fetch_model)."""
    return str(RESOURCES / "text" / "models" / name)


def seed_for(experiment):
    """Each experiment gets its own seed, derived from the global one unless set explicitly."""
    explicit = config[experiment].get("seed")
    return int(explicit) if explicit is not None else int(config["seed"])


# Filled by each experiment's .smk file: experiment name -> its final files.
EXPERIMENT_TARGETS = {}


def experiment_targets():
    unknown = set(config["experiments"]) - set(EXPERIMENT_TARGETS)
    if unknown:
        raise ValueError(
            f"config 'experiments' names unknown experiments: {sorted(unknown)}; "
            f"known: {sorted(EXPERIMENT_TARGETS)}"
        )
    return [f for name in config["experiments"] for f in EXPERIMENT_TARGETS[name]]


def check_claims_against_targets(claims_file):
    """Every result file a claim reads must be a final file of its experiment (when the
    experiment exists in the workflow), so that a renamed output cannot silently turn a claim
    into "not run"."""
    with open(Path(workflow.basedir) / claims_file) as stream:
        claims = yaml.safe_load(stream)
    for experiment in claims["experiments"]:
        targets = EXPERIMENT_TARGETS.get(experiment["id"])
        if targets is None:
            continue  # not implemented yet: its claims show as "not run"
        relative = {str(Path(t).relative_to(RESULTS)) for t in targets}
        for claim in experiment["claims"]:
            if claim["ours"]["file"] not in relative:
                raise ValueError(
                    f"{claims_file}: experiment {experiment['id']!r} reads "
                    f"{claim['ours']['file']!r}, which is not among its final files "
                    f"{sorted(relative)}."
                )


def experiment_folders():
    """Experiment -> its results folder (where its benchmarks/ lie), for the configured ones."""
    return {
        name: str(RESULTS / Path(EXPERIMENT_TARGETS[name][0]).relative_to(RESULTS).parts[0])
        for name in config["experiments"]
    }
