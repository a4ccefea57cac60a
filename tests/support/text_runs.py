"""The text experiment's tiny runs with a changed configuration, shared by the text pipeline's
test files: an overlay of the tiny configuration, a run up to the data files, and how many sets
a run's generation jobs sampled."""

import json
from pathlib import Path

import yaml
from workflow_runner import REPO, run_snakemake

TASKS = ("story", "resp", "prompt")


def overlay(tmp_path, name, change) -> Path:
    """A configuration file ``<name>.yaml`` in ``tmp_path``: the tiny configuration with its
    ``text`` section changed in place by ``change``."""
    tiny = yaml.safe_load((REPO / ".test" / "config_text_temperature.yaml").read_text())
    change(tiny["text"])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tiny))
    return path


def generated(text: Path, task: str, n_chunks: int) -> int:
    """How many sets the generation jobs of ``task`` sampled (not read from the cache)."""
    return sum(json.loads((text / "interim" / "generation" / task /
                           f"chunk{k}.stats.json").read_text())["sets_generated"]
               for k in range(n_chunks))


def data_only(out: Path, configfile: Path, resources: Path) -> None:
    """The text experiment up to its data files (results/text/data/<task>.jsonl), with the tiny
    configuration and ``configfile`` over it: the sampling, without the embeddings, scores and
    figures that the tests of this run do not read."""
    text = out / "results" / "text"
    run_snakemake(*(str(text / "data" / f"{task}.jsonl") for task in TASKS), "--configfile",
                  str(REPO / ".test" / "config_text_temperature.yaml"), str(configfile),
                  "--config", f"results_dir={out / 'results'}", f"resources_dir={resources}")
