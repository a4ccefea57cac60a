# Helpers shared by every workflow file: the configuration's types and cross-key checks (used by
# the Snakefile around `validate`), paths, seeds and the per-experiment target list.

import importlib
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


# Constraints between keys that the schema cannot express: each rule file registers, as it
# registers its targets, the protocol module that states its section's constraints
# (config_problems(section) -> sentences naming the keys): section name -> module.
CONFIG_CHECKS = {"magnitude": "diversity_core.magnitude.settings"}


def check_config(config):
    """Raise ValueError listing every violation of a registered section's constraints, each
    naming its key, before any job runs; a violation would otherwise fail a job mid-pipeline with
    a library message that names no key, or not at all."""
    _package_importable()
    problems = [problem for section, module in CONFIG_CHECKS.items()
                for problem in importlib.import_module(module).config_problems(config[section])]
    device_problem = importlib.import_module("diversity_core.device").device_problem  # by name
    problems += [p for s, v in config.items() if isinstance(v, dict) and "device" in v
                 and (p := device_problem(v["device"], f"{s}.device"))]  # (the GPU: the job's)
    if problems:
        raise ValueError("invalid configuration:\n  " + "\n  ".join(problems))


def _package_importable():
    """diversity_core of this checkout, installed or not."""
    if workflow.basedir not in sys.path:
        sys.path.insert(0, workflow.basedir)


def check_assets(config):
    """strict_assets: true refuses, before any job runs, every asset the configuration selects
    that is not pinned, naming each with its configuration key and what is missing; the rule
    scripts inherit strict mode (DIVERSITY_CORE_STRICT_ASSETS) so that no fetch takes an
    unpinned file on trust either."""
    if not config.get("strict_assets"):
        return
    _package_importable()
    from diversity_core.assets.pins import STRICT_ENV
    from diversity_core.experiments.unpinned import unpinned_assets

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
