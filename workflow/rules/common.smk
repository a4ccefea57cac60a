# Helpers shared by every workflow file: paths, seeds and the per-experiment target list.

from pathlib import Path

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
