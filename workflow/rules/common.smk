# Helpers shared by every workflow file: paths, seeds and the per-experiment target list.

from pathlib import Path

import yaml

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
